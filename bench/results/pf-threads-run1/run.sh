#!/usr/bin/env bash
# The whole `statepipe pf --engine in-process` (its own `wall` line) at
# several sizes: one CPU (taskset), and both CPUs with the thread rule
# before (OLD) and after (NEW), interleaved, ROUNDS rounds.
# usage: run.sh OLD NEW [ROUNDS] [HOG]   (HOG=1: a busy loop on CPU 0 throughout)
set -euo pipefail
old=$1 new=$2 rounds=${3:-5}
w() { "$@" pf --engine in-process --particles "$n" 2>&1 | sed -n 's/^wall \([0-9.]*\) s$/\1/p'; }
if [[ ${4:-0} == 1 ]]; then taskset -c 0 sh -c 'while :; do :; done' & hog=$!; trap 'kill $hog' EXIT; fi
echo "# $(nproc) CPUs; $(uptime)"
echo "particles round one-cpu old-auto new-auto"
for n in 2000 10000 20000 40000 60000 100000 200000; do
  for r in $(seq "$rounds"); do
    echo "$n $r $(w taskset -c 1 "$new") $(w "$old") $(w "$new")"
  done
done
