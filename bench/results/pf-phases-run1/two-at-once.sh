#!/bin/bash
# The 2-vCPU VM's own bound on two threads: the whole `statepipe pf` in
# process at N particles, (a) alone on CPU 0, (b) two copies at once, on
# CPU 0 and CPU 1, (c) one copy on both CPUs (2 threads). Wall seconds
# from the command's own `wall` line.
# usage: two-at-once.sh STATEPIPE ROUNDS N...
set -euo pipefail
sp=$1 rounds=$2
shift 2
wall() { "$@" 2>&1 | awk '/^wall/ {print $2}'; }
run() { wall taskset -c "$1" "$sp" pf --engine in-process --particles "$2" --quiet; }
for n in "$@"; do
    for r in $(seq "$rounds"); do
        alone=$(run 0 "$n")
        tmp=$(mktemp)
        run 0 "$n" > "$tmp" &
        other=$(run 1 "$n")
        wait
        first=$(cat "$tmp")
        rm -f "$tmp"
        both=$(run 0-1 "$n")
        awk -v n="$n" -v r="$r" -v a="$alone" -v f="$first" -v o="$other" -v b="$both" 'BEGIN {
            m = (f + o) / 2
            printf "%7d particles, round %d: alone %.3f s, two at once %.3f / %.3f s (%.2fx alone: bound %.2fx), 2 threads %.3f s (%.2fx one)\n",
                n, r, a, f, o, m / a, 2 * a / m, b, a / b }'
    done
done
