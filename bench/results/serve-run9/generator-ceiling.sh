#!/usr/bin/env bash
# Is wrk on one CPU the limit? statepipe serve pinned to CPU 0, wrk pinned
# to CPU 1 (200 connections, as `bench serve`), 4 s each, closed loop; the
# busy share of each CPU from /proc/stat during each run.
set -euo pipefail
bin=${1:-target/release/statepipe}
dir=$(mktemp -d); trap 'kill $srv 2>/dev/null; rm -rf "$dir"' EXIT
taskset -c 0 "$bin" serve --listen 127.0.0.1:18091 --data "$dir" > "$dir/out" 2>&1 & srv=$!
for _ in $(seq 50); do grep -q listening "$dir/out" && break; sleep 0.1; done
curl -s -X POST -d '{"name":"bench item","price":12.5}' -H 'content-type: application/json' http://127.0.0.1:18091/item > /dev/null || true
busy() { awk '/^cpu[01] /{print $1, $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8}' /proc/stat; }
run() {
  local a b; a=$(busy)
  taskset -c 1 wrk -t1 -c200 -d4s "$@" | grep -E "Requests/sec|Non-2xx"
  b=$(busy)
  paste <(echo "$a") <(echo "$b") | awk '{printf "  %s busy %.0f%%\n", $1, 100*($5-$2)/($6-$3)}'
}
echo "$(nproc) CPUs; $(uptime)"
post=$(mktemp); trap 'kill $srv 2>/dev/null; rm -rf "$dir" "$post"' EXIT
printf '%s\n' 'wrk.method = "POST"' 'wrk.body = '"'"'{"name":"bench item","price":12.5}'"'"'' \
  'wrk.headers["Content-Type"] = "application/json"' > "$post"
for i in 1 2; do
  echo "GET /health (answered by the I/O thread):"; run http://127.0.0.1:18091/health
  echo "GET /item/1:"; run http://127.0.0.1:18091/item/1
  echo "POST /nothing (404 from the I/O thread, the same body as a write):"; run -s "$post" http://127.0.0.1:18091/nothing
  echo "POST /item (durable writes):"; run -s "$post" http://127.0.0.1:18091/item
done
