#!/bin/bash
# How evenly `statepipe serve` shares keep-alive connections over its I/O
# threads: the server with --io-threads 4 (not pinned: every thread on
# both CPUs of the 2-vCPU host, beside wrk), wrk -t2 -c256 GET /item/{id}
# for 4 s after a 1 s warm-up; each I/O thread's CPU ticks (1/100 s)
# over the window, their spread, wrk's rate and p99. OLD and NEW are two
# builds, alternated.
# usage: balance.sh OLD NEW ROUNDS
set -euo pipefail
old=$1 new=$2 rounds=${3:-3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
one() {
    local name=$1 sp=$2
    rm -rf "$dir/data"
    "$sp" serve --io-threads 4 --listen 127.0.0.1:0 --data "$dir/data" > "$dir/out" 2> "$dir/err" &
    local pid=$!
    for _ in $(seq 100); do [ -s "$dir/out" ] && break; sleep 0.05; done
    local addr; addr=$(awk '{print $3; exit}' "$dir/out")
    curl -s -XPOST -H 'content-type: application/json' -d '{"name":"widget","price":9.5}' "http://$addr/item" > /dev/null
    local id; id=$(curl -s "http://$addr/item" | grep -o '"id":[0-9]*' | head -1 | cut -d: -f2)
    wrk -t2 -c256 -d1s "http://$addr/item/$id" > /dev/null
    for t in /proc/"$pid"/task/*; do echo "$(cat "$t/comm") $(awk '{print $14 + $15}' "$t/stat")"; done | grep serve-io | sort > "$dir/t0"
    wrk -t2 -c256 -d4s --latency "http://$addr/item/$id" > "$dir/wrk" &
    local w=$!
    sleep 2
    local gauge; gauge=$(curl -s "http://$addr/metrics" | grep '^statepipe_serve_connections{' | sed 's/statepipe_serve_connections{io="\([0-9]*\)"} /\1:/' | tr '\n' ' ' || true)
    wait "$w"
    for t in /proc/"$pid"/task/*; do echo "$(cat "$t/comm") $(awk '{print $14 + $15}' "$t/stat")"; done | grep serve-io | sort > "$dir/t1"
    local ticks; ticks=$(join "$dir/t0" "$dir/t1" | awk '{printf "%d ", $3 - $2}')
    local rate; rate=$(awk '/Requests\/sec/{print $2}' "$dir/wrk")
    local p99; p99=$(awk '$1 == "99%" {print $2}' "$dir/wrk")
    echo "$name: $rate req/s, p99 $p99; I/O threads' CPU ticks: $ticks${gauge:+; open connections by thread (mid-run, with the one asking): $gauge}"
    kill "$pid"; wait "$pid" 2> /dev/null || true
}
for r in $(seq "$rounds"); do
    echo "round $r"
    one old "$old"
    one new "$new"
done
