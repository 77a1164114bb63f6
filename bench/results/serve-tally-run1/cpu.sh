#!/bin/bash
# The server CPU a GET /item/{id} costs, two statepipe builds interleaved:
# each pinned to CPU 0, `wrk -t1 -c256` on CPU 1 for 4 s; the server's
# user and system ticks (1/100 s, /proc/PID/stat) over the run, per
# request. At k = 1 wrk is the limit, so the rates match and the CPU a
# request takes is what differs.
# usage: cpu.sh OLD NEW ROUNDS
set -euo pipefail
old=$1 new=$2 rounds=${3:-3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
one() {
    local name=$1 bin=$2
    rm -rf "$dir/data"
    taskset -c 0 "$bin" serve --listen 127.0.0.1:0 --data "$dir/data" > "$dir/out" 2> "$dir/err" &
    local pid=$!
    for _ in $(seq 100); do [ -s "$dir/out" ] && break; sleep 0.05; done
    local addr; addr=$(awk '{print $3; exit}' "$dir/out")
    curl -s -XPOST -H 'content-type: application/json' -d '{"name":"widget","price":9.5}' "http://$addr/item" > /dev/null
    taskset -c 1 wrk -t1 -c256 -d1s "http://$addr/item/1" > /dev/null
    read -r u0 s0 < <(awk '{print $14, $15}' /proc/$pid/stat)
    taskset -c 1 wrk -t1 -c256 -d4s "http://$addr/item/1" > "$dir/wrk"
    read -r u1 s1 < <(awk '{print $14, $15}' /proc/$pid/stat)
    local rate; rate=$(awk '/Requests\/sec/{print $2}' "$dir/wrk")
    awk -v n="$name" -v r="$rate" -v u=$((u1 - u0)) -v s=$((s1 - s0)) 'BEGIN {
        q = r * 4
        printf "%-7s %8.0f req/s  server busy %3.0f%%  user %.3f us/req  system %.2f us/req\n",
            n, r, (u + s) / 4, u * 1e4 / q, s * 1e4 / q }'
    kill "$pid"; wait "$pid" 2> /dev/null || true
}
for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 1 ]; then one old "$old"; one new "$new"; else one new "$new"; one old "$old"; fi
done
