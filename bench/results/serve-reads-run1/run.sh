#!/usr/bin/env bash
# statepipe serve, the main build (BASE) against this branch (NEW), and
# the peers of bench/serve-peers (PEER: actix-web with k workers, axum with
# k tokio workers, same durability), each given k CPUs with taskset; wrk
# drives POST /item (fills the store), then GET /item/1. Rounds rotate the
# order of the servers.
# Usage: run.sh BASE NEW PEER ROUNDS WINDOW_S
set -euo pipefail
BASE=$1; NEW=$2; PEER=$3; ROUNDS=${4:-3}; WIN=${5:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
PORT=18433
run_one() { # name k
  local name=$1 k=$2 cpus gen data pid
  if [ "$k" = 1 ]; then cpus=0; gen="taskset -c 1"; else cpus=0,1; gen="taskset -c 0,1"; fi
  data=$(mktemp -d)
  case $name in
    base) taskset -c "$cpus" "$BASE" serve --listen 127.0.0.1:$PORT --data "$data" > "$data/out" 2>/dev/null & ;;
    new) taskset -c "$cpus" "$NEW" serve --listen 127.0.0.1:$PORT --data "$data" > "$data/out" 2>/dev/null & ;;
    actix) taskset -c "$cpus" "$PEER" actix --listen 127.0.0.1:$PORT --data "$data" --workers $k > "$data/out" 2>/dev/null & ;;
    axum) taskset -c "$cpus" "$PEER" axum --listen 127.0.0.1:$PORT --data "$data" --worker-threads $k > "$data/out" 2>/dev/null & ;;
  esac
  pid=$!
  for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$PORT/health && break; sleep 0.1; done
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
SERVERS=(base new actix axum)
for r in $(seq "$ROUNDS"); do
  for k in 1 2; do
    for i in 0 1 2 3; do run_one "${SERVERS[$(( (i + r) % 4 ))]}" $k; done
  done
done
