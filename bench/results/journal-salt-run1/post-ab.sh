#!/usr/bin/env bash
# POST /item throughput of two statepipe binaries, interleaved: the server
# pinned to CPU 0 with a fresh data folder each round, wrk on CPU 1 (200
# connections, 8 s). Usage: post-ab.sh BIN_A BIN_B ROUNDS
set -euo pipefail
a=$1 b=$2 rounds=${3:-4}
printf 'wrk.method = "POST"\nwrk.path = "/item"\nwrk.body = %s\nwrk.headers["Content-Type"] = "application/json"\n' \
  "'{\"name\":\"widget\",\"price\":9.5}'" > /tmp/post-ab.lua
one() {
  local bin=$1 data pid
  data=$(mktemp -d)
  taskset -c 0 "$bin" serve --listen 127.0.0.1:8099 --data "$data" > /dev/null 2>&1 &
  pid=$!
  for _ in $(seq 50); do
    curl -sf http://127.0.0.1:8099/health > /dev/null && break
    sleep 0.1
  done
  taskset -c 1 wrk -t1 -c200 -d8s -s /tmp/post-ab.lua http://127.0.0.1:8099/ \
    | awk '/Requests\/sec/ {r=$2} /Latency/ {l=$2} END {printf "%s req/s, mean latency %s\n", r, l}'
  kill -TERM "$pid"
  wait "$pid" || true
  rm -rf "$data"
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="$a $b"; else order="$b $a"; fi
  for bin in $order; do
    echo "round $r $(basename "$bin") $(one "$bin")"
  done
done
