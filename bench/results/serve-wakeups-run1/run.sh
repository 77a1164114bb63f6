#!/usr/bin/env bash
# Futex calls, fsyncs, poll loops and context switches per thread of
# `statepipe serve` (pinned to CPU 0) during 3 s of wrk POST load (CPU 1),
# with perf's syscall tracepoints. Run from this folder, as root, with the
# release binary built.
set -euo pipefail
sp=../../../target/release/statepipe
data=$(mktemp -d)
trap 'kill "$pid" 2> /dev/null; rm -rf "$data"' EXIT
taskset -c 0 "$sp" serve --listen 127.0.0.1:8099 --data "$data" > serve.out 2>&1 &
pid=$!
sleep 1
printf 'wrk.method = "POST"\nwrk.path = "/item"\nwrk.body = %s\nwrk.headers["Content-Type"] = "application/json"\n' \
  "'{\"name\":\"widget\",\"price\":9.5}'" > post.lua
taskset -c 1 wrk -t1 -c200 -d6s -s post.lua http://127.0.0.1:8099/ > wrk.txt &
sleep 2
perf stat -e 'syscalls:sys_enter_futex,syscalls:sys_enter_fdatasync,syscalls:sys_enter_epoll_wait,context-switches' \
  --per-thread -p "$pid" sleep 3 2> perf.txt
wait %2 || true
