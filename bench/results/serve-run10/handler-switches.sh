#!/usr/bin/env bash
# How often each thread of statepipe serve sleeps (voluntary context
# switches) per journal batch during POST /item: server pinned to CPU 0,
# wrk -t1 -c200 on CPU 1, counted over the middle 3 s of a 6 s run.
# Usage: handler-switches.sh STATEPIPE [ROUNDS]  (from the repository root)
set -u
bin=$1 rounds=${2:-2}
post=$(mktemp); trap 'rm -f "$post"' EXIT
printf '%s\n' 'wrk.method = "POST"' 'wrk.body = '"'"'{"name":"bench item","price":12.5}'"'"'' \
  'wrk.headers["Content-Type"] = "application/json"' > "$post"
echo "$(nproc) CPUs; $(uptime)"
for r in $(seq "$rounds"); do
  d=$(mktemp -d)
  taskset -c 0 "$bin" serve --listen 127.0.0.1:18097 --data "$d" > "$d.out" 2>&1 & pid=$!
  for _ in $(seq 50); do grep -q listening "$d.out" && break; sleep 0.1; done
  taskset -c 1 wrk -t1 -c200 -d6s -s "$post" http://127.0.0.1:18097/item > "$d.wrk" & w=$!
  sleep 1.5
  snap() { for t in /proc/$pid/task/*; do echo "$(cat "$t/comm") $(awk '/^voluntary_ctxt/{v=$2} /^nonvoluntary_ctxt/{n=$2} END{print v, n}' "$t/status")"; done; }
  batches() { curl -s http://127.0.0.1:18097/metrics | awk '/^statepipe_serve_journal_batch_events_count/{print $2}'; }
  b0=$(batches); snap > "$d.a"; sleep 3; snap > "$d.b"; b1=$(batches)
  wait "$w"
  echo "round $r: $(grep Requests/sec "$d.wrk"), $((b1 - b0)) journal batches in 3 s"
  paste "$d.a" "$d.b" | awk -v n=$((b1 - b0)) '$1 ~ /^(ring|serve)/ {
    printf "  %-15s sleeps %6d (%.1f a batch), preempted %6d\n", $1, $5 - $2, ($5 - $2) / n, $6 - $3 }'
  kill "$pid"; wait "$pid" 2>/dev/null
  rm -rf "$d" "$d.out" "$d.wrk" "$d.a" "$d.b"
done
