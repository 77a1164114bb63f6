#!/usr/bin/env bash
# GET /item/1 after a store filled by 4 s of POST /item, as `bench serve`
# orders its cases: each build in turn on a fresh data directory, server
# pinned to CPU 0, wrk -t1 -c200 on CPU 1, two 3 s GET runs after the POSTs.
# Usage: get-after-post.sh STATEPIPE... [ROUNDS=2 in the environment]
set -u
post=$(mktemp); trap 'rm -f "$post"' EXIT
printf '%s\n' 'wrk.method = "POST"' 'wrk.body = '"'"'{"name":"bench item","price":12.5}'"'"'' \
  'wrk.headers["Content-Type"] = "application/json"' > "$post"
echo "$(nproc) CPUs; $(uptime)"
for r in $(seq "${ROUNDS:-2}"); do
  for bin in "$@"; do
    d=$(mktemp -d)
    taskset -c 0 "$bin" serve --listen 127.0.0.1:18098 --data "$d" > "$d.out" 2>&1 & pid=$!
    for _ in $(seq 50); do grep -q listening "$d.out" && break; sleep 0.1; done
    p=$(taskset -c 1 wrk -t1 -c200 -d4s -s "$post" http://127.0.0.1:18098/item | awk '/Requests\/sec/{print $2}')
    get() { taskset -c 1 wrk -t1 -c200 -d3s --latency http://127.0.0.1:18098/item/1 | awk '/Requests\/sec/{r=$2} / 99%/{l=$2} END{print r " req/s p99 " l}'; }
    g1=$(get); g2=$(get)
    echo "round $r $bin: POST $p req/s; GET $g1; GET again $g2"
    kill "$pid"; wait "$pid" 2>/dev/null; rm -rf "$d" "$d.out"
  done
done
