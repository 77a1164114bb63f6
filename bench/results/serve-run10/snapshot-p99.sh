#!/usr/bin/env bash
# POST /item latency with snapshots (the default --snapshot-every 100000)
# and without (10^8), from an empty store, 4 s of wrk -t1 -c200 --latency
# (CPU 1) against the server pinned to CPU 0.
# Usage: snapshot-p99.sh OLD_STATEPIPE NEW_STATEPIPE [ROUNDS]
set -u
old=$1 new=$2 rounds=${3:-2}
post=$(mktemp); trap 'rm -f "$post"' EXIT
printf '%s\n' 'wrk.method = "POST"' 'wrk.body = '"'"'{"name":"bench item","price":12.5}'"'"'' \
  'wrk.headers["Content-Type"] = "application/json"' > "$post"
echo "$(nproc) CPUs; $(uptime)"
for r in $(seq "$rounds"); do
  for name in old new; do
    bin=$old; [ "$name" = new ] && bin=$new
    for every in 100000 100000000; do
      d=$(mktemp -d)
      taskset -c 0 "$bin" serve --listen 127.0.0.1:18094 --data "$d" --snapshot-every "$every" > "$d.out" 2>&1 & pid=$!
      for _ in $(seq 50); do grep -q listening "$d.out" && break; sleep 0.1; done
      printf 'round %s %-3s snapshot-every %-9s ' "$r" "$name" "$every"
      taskset -c 1 wrk -t1 -c200 -d4s --latency -s "$post" http://127.0.0.1:18094/item |
        awk '/Requests\/sec/{r=$2} / 50%/{m=$2} / 99%/{l=$2} END{print r, "req/s, p50", m, "p99", l}'
      kill "$pid"; wait "$pid" 2>/dev/null
      rm -rf "$d" "$d.out"
    done
  done
done
