#!/bin/bash
# Where a GET /item/{id}'s server CPU goes at k = 1 without a quota:
# each server pinned to CPU 0, wrk -t1 -c256 on CPU 1 for 4 s; the
# server's user and system ticks (1/100 s, /proc/PID/stat) over the run.
# usage: cpu-per-request.sh STATEPIPE PEER ROUNDS
set -euo pipefail
sp=$1 peer=$2 rounds=${3:-2}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
one() {
    local name=$1; shift
    rm -rf "$dir/data"
    taskset -c 0 "$@" --listen 127.0.0.1:0 --data "$dir/data" > "$dir/out" 2> "$dir/err" &
    local pid=$!
    for _ in $(seq 100); do [ -s "$dir/out" ] && break; sleep 0.05; done
    local addr; addr=$(awk '{print $3; exit}' "$dir/out")
    curl -s -XPOST -H 'content-type: application/json' -d '{"name":"widget","price":9.5}' "http://$addr/item" > /dev/null
    local id; id=$(curl -s "http://$addr/item" | grep -o '"id":[0-9]*' | head -1 | cut -d: -f2)
    read -r u0 s0 < <(awk '{print $14, $15}' /proc/$pid/stat)
    taskset -c 1 wrk -t1 -c256 -d4s "http://$addr/item/$id" > "$dir/wrk"
    read -r u1 s1 < <(awk '{print $14, $15}' /proc/$pid/stat)
    local rate; rate=$(awk '/Requests\/sec/{print $2}' "$dir/wrk")
    awk -v n="$name" -v r="$rate" -v u=$((u1 - u0)) -v s=$((s1 - s0)) 'BEGIN {
        q = r * 4
        printf "%-10s %8.0f req/s  server busy %3.0f%%  user %.2f us/req  system %.2f us/req\n",
            n, r, (u + s) / 4, u * 1e4 / q, s * 1e4 / q }'
    kill "$pid"; wait "$pid" 2> /dev/null || true
}
for _ in $(seq "$rounds"); do
    one statepipe "$sp" serve
    one actix-web "$peer" actix --workers 1
    one axum "$peer" axum --worker-threads 1
done
