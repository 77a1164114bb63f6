#!/usr/bin/env bash
# GET /item/1 with the server, not the generator, as the limit: each
# server pinned to CPU 0 and held to QUOTA of it by a cgroup v1 CPU quota
# (period 10 ms), wrk -t1 -c200 pinned to CPU 1, 4 s closed loop after a
# 1 s warm-up; ROUNDS rounds, the servers' order rotated each round.
# Peers as `bench serve` starts them (bench/serve-peers, Json<T>).
# usage: get-quota.sh [QUOTA] [ROUNDS]   (run from the repository root, as root)
set -euo pipefail
quota=${1:-0.5} rounds=${2:-3}
sp=target/release/statepipe peer=bench/serve-peers/target/release/serve-peer
cg=/sys/fs/cgroup/cpu/statepipe-get-quota
mkdir -p "$cg"; echo 10000 > "$cg/cpu.cfs_period_us"
echo "$(awk -v q="$quota" 'BEGIN{printf "%d", q*10000}')" > "$cg/cpu.cfs_quota_us"
names=(statepipe actix-web axum axum16)
start() {  # name dir -> prints the port
  local cmd
  case $1 in
    statepipe) cmd=("$sp" serve) ;;
    actix-web) cmd=("$peer" actix --decode typed --workers 1) ;;
    axum) cmd=("$peer" axum --decode typed) ;;
    axum16) cmd=("$peer" axum --decode typed --worker-threads 16) ;;
  esac
  sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec taskset -c 0 "$@"' sh "$cg" "${cmd[@]}" \
    --listen 127.0.0.1:0 --data "$2" > "$2/out" 2>&1 &
  echo $! > "$2/pid"
  for _ in $(seq 100); do grep -q "listening on" "$2/out" 2>/dev/null && break; sleep 0.05; done
  sed -n 's/.*listening on [^:]*:\([0-9]*\).*/\1/p' "$2/out" | head -1
}
echo "$(nproc) CPUs; quota $quota CPU; $(uptime)"
for r in $(seq "$rounds"); do
  for k in $(seq 0 3); do
    name=${names[$(( (k + r) % 4 ))]}
    dir=$(mktemp -d); port=$(start "$name" "$dir")
    curl -s -X POST -H 'content-type: application/json' -d '{"name":"bench item","price":12.5}' "http://127.0.0.1:$port/item" > /dev/null
    taskset -c 1 wrk -t1 -c200 -d1s "http://127.0.0.1:$port/item/1" > /dev/null
    res=$(taskset -c 1 wrk -t1 -c200 -d4s --latency "http://127.0.0.1:$port/item/1")
    rps=$(echo "$res" | awk '/Requests\/sec/{print $2}')
    p99=$(echo "$res" | awk '$1=="99%"{print $2}')
    bad=$(echo "$res" | awk '/Non-2xx/{print $NF}')
    echo "round $r $name $rps req/s p99 $p99 non-2xx ${bad:-0}"
    kill "$(cat "$dir/pid")"; wait "$(cat "$dir/pid")" 2>/dev/null || true; rm -rf "$dir"
  done
done
