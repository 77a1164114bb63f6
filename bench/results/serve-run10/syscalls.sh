#!/usr/bin/env bash
# Syscalls per request during POST /item: each server pinned to CPU 0, wrk
# -t1 -c200 on CPU 1 for 6 s, `perf stat` on the server for the middle 3 s.
# Usage: syscalls.sh OLD_STATEPIPE NEW_STATEPIPE [ROUNDS]  (from the repository root)
set -u
old=$1 new=$2 rounds=${3:-2}
peer=bench/serve-peers/target/release/serve-peer
post=$(mktemp); trap 'rm -f "$post"' EXIT
printf '%s\n' 'wrk.method = "POST"' 'wrk.body = '"'"'{"name":"bench item","price":12.5}'"'"'' \
  'wrk.headers["Content-Type"] = "application/json"' > "$post"
echo "$(nproc) CPUs; $(uptime)"
for r in $(seq "$rounds"); do
  for name in old new actix-web; do
    d=$(mktemp -d)
    case $name in
      old) taskset -c 0 "$old" serve --listen 127.0.0.1:18093 --data "$d" > "$d.out" 2>&1 & ;;
      new) taskset -c 0 "$new" serve --listen 127.0.0.1:18093 --data "$d" > "$d.out" 2>&1 & ;;
      actix-web) taskset -c 0 "$peer" actix --workers 1 --listen 127.0.0.1:18093 --data "$d" > "$d.out" 2>&1 & ;;
    esac
    pid=$!
    for _ in $(seq 50); do grep -q listening "$d.out" && break; sleep 0.1; done
    taskset -c 1 wrk -t1 -c200 -d6s -s "$post" http://127.0.0.1:18093/item > "$d.wrk" &
    w=$!
    sleep 1.5
    perf stat -x, -e 'syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_write,syscalls:sys_enter_fdatasync,context-switches' \
      -p "$pid" -- sleep 3 2> "$d.perf"
    wait "$w"
    rps=$(awk '/Requests\/sec/{print $2}' "$d.wrk")
    send=$(awk -F, '/sendto/{print $1}' "$d.perf")
    awk -F, -v name="$name" -v r="$r" -v rps="$rps" -v send="$send" '
      BEGIN { printf "round %s %-9s %9s req/s  per request:", r, name, rps }
      { split($3, a, ":"); ev = (a[2] != "" ? a[2] : $3); sub("sys_enter_", "", ev); printf " %s %.2f", ev, $1 / send }
      END { print "" }' "$d.perf"
    kill "$pid"; wait "$pid" 2>/dev/null
    rm -rf "$d" "$d.out" "$d.wrk" "$d.perf"
  done
done
