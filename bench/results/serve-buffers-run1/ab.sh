#!/usr/bin/env bash
# GET /item/{id} and POST /item throughput of two statepipe binaries,
# interleaved: the server pinned to CPU 0 and held to half of it by a
# cgroup v1 CPU quota (so that the server, not wrk, is the limit), a fresh
# data folder each round, wrk on CPU 1 (200 connections, 6 s a window).
# Needs root (the cgroup). Usage: ab.sh BIN_A BIN_B ROUNDS
set -euo pipefail
a=$1 b=$2 rounds=${3:-3}
cg=/sys/fs/cgroup/cpu/statepipe-ab
mkdir -p "$cg"
echo 100000 > "$cg/cpu.cfs_period_us"
echo 50000 > "$cg/cpu.cfs_quota_us"
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
printf 'wrk.method = "POST"\nwrk.path = "/item"\nwrk.body = %s\nwrk.headers["Content-Type"] = "application/json"\n' \
  "'{\"name\":\"widget\",\"price\":9.5}'" > /tmp/ab-post.lua
window() {
  taskset -c 1 wrk -t1 -c200 -d6s "$@" \
    | awk '/Requests\/sec/ {r=$2} /Latency/ {l=$2} END {printf "%s req/s, mean latency %s", r, l}'
}
one() {
  local bin=$1 data pid
  data=$(mktemp -d)
  taskset -c 0 "$bin" serve --listen 127.0.0.1:8099 --data "$data" --io-threads 1 > /dev/null 2>&1 &
  pid=$!
  echo "$pid" > "$cg/tasks"
  for t in /proc/"$pid"/task/*; do echo "${t##*/}" > "$cg/tasks" 2>/dev/null || true; done
  for _ in $(seq 50); do
    curl -sf http://127.0.0.1:8099/health > /dev/null && break
    sleep 0.1
  done
  for t in /proc/"$pid"/task/*; do echo "${t##*/}" > "$cg/tasks" 2>/dev/null || true; done
  echo "POST $(window -s /tmp/ab-post.lua http://127.0.0.1:8099/) | GET $(window http://127.0.0.1:8099/item/1)"
  kill -TERM "$pid"
  wait "$pid" || true
  rm -rf "$data"
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="$a $b"; else order="$b $a"; fi
  for bin in $order; do
    echo "round $r $(basename "$bin"): $(one "$bin")"
  done
done
