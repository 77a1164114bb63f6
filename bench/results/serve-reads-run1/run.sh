#!/usr/bin/env bash
# statepipe serve, the main build (BASE) against this branch (NEW), each
# given k CPUs with taskset; wrk drives POST /item (fills the store), then
# GET /item/1. Rounds interleave the binaries in alternating order.
# Usage: run.sh BASE NEW ROUNDS WINDOW_S
set -euo pipefail
BASE=$1; NEW=$2; ROUNDS=${3:-3}; WIN=${4:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
PORT=18433
run_one() { # name bin k
  local name=$1 bin=$2 k=$3 cpus gen data pid
  if [ "$k" = 1 ]; then cpus=0; gen="taskset -c 1"; else cpus=0,1; gen="taskset -c 0,1"; fi
  data=$(mktemp -d)
  taskset -c "$cpus" "$bin" serve --listen 127.0.0.1:$PORT --data "$data" > "$data/out" 2>/dev/null &
  pid=$!
  for _ in $(seq 100); do grep -q listening "$data/out" 2>/dev/null && break; sleep 0.1; done
  local post get
  post=$($gen wrk -t1 -c200 -d${WIN}s --latency -s "$HERE/post.lua" http://127.0.0.1:$PORT/item)
  get=$($gen wrk -t1 -c200 -d${WIN}s --latency http://127.0.0.1:$PORT/item/1)
  kill -TERM $pid; wait $pid || true
  rm -rf "$data"
  for what in post get; do
    local out=${!what}
    local rps p99 non2xx
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    p99=$(echo "$out" | awk '$1=="99%" {print $2}')
    non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
    echo "k=$k $what $name req/s=$rps p99=$p99 non2xx=${non2xx:-0} load=\"$(cut -d' ' -f1-3 /proc/loadavg)\""
  done
}
for r in $(seq "$ROUNDS"); do
  for k in 1 2; do
    if [ $((r % 2)) = 1 ]; then run_one base "$BASE" $k; run_one new "$NEW" $k
    else run_one new "$NEW" $k; run_one base "$BASE" $k; fi
  done
done
