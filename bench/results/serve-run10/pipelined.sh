#!/usr/bin/env bash
# GET /item/1 with 16 requests pipelined per connection (wrk -t1 -c200, a
# Lua script that sends them in one write), each server pinned to CPU 0,
# wrk on CPU 1, 4 s; `perf stat` counts the server's sends for 2 s.
# Usage: pipelined.sh BEFORE_STATEPIPE AFTER_STATEPIPE [ROUNDS]
set -u
before=$1 after=$2 rounds=${3:-2}
peer=bench/serve-peers/target/release/serve-peer
lua=$(mktemp); trap 'rm -f "$lua"' EXIT
cat > "$lua" <<'LUA'
init = function(args)
  local r = {}
  for i = 1, 16 do r[i] = wrk.format("GET", "/item/1") end
  req = table.concat(r)
end
request = function() return req end
LUA
echo "$(nproc) CPUs; $(uptime)"
for r in $(seq "$rounds"); do
  for name in before after actix-web; do
    d=$(mktemp -d)
    case $name in
      before) taskset -c 0 "$before" serve --listen 127.0.0.1:18095 --data "$d" > "$d.out" 2>&1 & ;;
      after) taskset -c 0 "$after" serve --listen 127.0.0.1:18095 --data "$d" > "$d.out" 2>&1 & ;;
      actix-web) taskset -c 0 "$peer" actix --workers 1 --listen 127.0.0.1:18095 --data "$d" > "$d.out" 2>&1 & ;;
    esac
    pid=$!
    for _ in $(seq 50); do grep -q listening "$d.out" && break; sleep 0.1; done
    curl -s -X POST -H 'content-type: application/json' -d '{"name":"a","price":1}' http://127.0.0.1:18095/item > /dev/null
    taskset -c 1 wrk -t1 -c200 -d4s -s "$lua" http://127.0.0.1:18095/ > "$d.wrk" & w=$!
    sleep 1
    sends=$(perf stat -x, -e syscalls:sys_enter_sendto,syscalls:sys_enter_writev,syscalls:sys_enter_write -p "$pid" -- sleep 2 2>&1 | awk -F, '{s += $1} END {print s / 2}')
    wait "$w"
    printf 'round %s %-9s %s, %s sends/s, non-2xx: %s\n' "$r" "$name" \
      "$(grep Requests/sec "$d.wrk")" "$sends" "$(awk '/Non-2xx/{print $NF}' "$d.wrk")"
    kill "$pid"; wait "$pid" 2>/dev/null
    rm -rf "$d" "$d.out" "$d.wrk"
  done
done
