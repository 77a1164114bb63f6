#!/usr/bin/env bash
# statepipe serve (BIN) inside a cgroup v1 CPU quota (QUOTA of one CPU,
# pinned to CPU 0; a 10 ms CFS period, so throttling stalls it at most
# (1 - QUOTA) * 10 ms), ring of RING slots (default 4096). wrk measures its POST capacity C
# (closed loop, 200 connections); h2load then offers POST /item open loop
# at 0.5*C ("unloaded") and at 2*C over 400 connections (> ring slots),
# one request in flight per connection, on CPU 1. Per-request logs give
# latency by status. After SIGTERM and a restart, every 201'd id must be
# served. /metrics gives the refusals by cause after each phase.
# Usage: overload.sh BIN QUOTA(e.g. 0.3) SECONDS [RING] [CONNECTIONS]
set -euo pipefail
BIN=$1; QUOTA=${2:-0.3}; SECS=${3:-8}; RING=${4:-4096}; CONNS=${5:-400}
HERE=$(cd "$(dirname "$0")" && pwd)
PORT=18436; CG=/sys/fs/cgroup/cpu/sp33-overload
mkdir -p $CG
echo 10000 > $CG/cpu.cfs_period_us
echo "$(python3 -c "print(int($QUOTA*10000))")" > $CG/cpu.cfs_quota_us
DATA=$(mktemp -d); WORK=$(mktemp -d)
start() {
  taskset -c 0 "$BIN" serve --listen 127.0.0.1:$PORT --data "$DATA" --ring-capacity $RING > "$WORK/out" 2>/dev/null &
  PID=$!; echo $PID > $CG/cgroup.procs
  for _ in $(seq 200); do grep -q listening "$WORK/out" 2>/dev/null && break; sleep 0.1; done
  for t in /proc/$PID/task/*; do echo "$(basename $t)" > $CG/tasks 2>/dev/null || true; done
}
start
echo "# $(date -u) uptime: $(uptime)"
cap_out=$(taskset -c 1 wrk -t1 -c200 -d5s --latency -s "$HERE/post.lua" http://127.0.0.1:$PORT/item)
total=$(echo "$cap_out" | awk '/^ +[0-9]+ requests in/ {print $1}')
non=$(echo "$cap_out" | awk '/Non-2xx/ {print $NF}'); non=${non:-0}
C=$(( (total - non) / 5 ))
echo "capacity (wrk, 200 connections, closed loop): $C accepted POST/s ($total answers, $non refused)"
echo $((total - non)) > "$WORK/acked"
echo "  refusals so far: $(curl -s http://127.0.0.1:$PORT/metrics | grep '^statepipe_serve_refusals_total' | tr '\n' ' ')"
body='{"name":"overload item","price":1}'
printf '%s' "$body" > "$WORK/body"
for factor in 0.5 2; do
  rate=$(python3 -c "print(max(1, round($C*$factor/$CONNS)))")
  taskset -c 1 h2load --h1 -c $CONNS -m 1 --rps $rate -D $SECS -d "$WORK/body" -H 'Content-Type: application/json' \
     --log-file "$WORK/log-$factor" http://127.0.0.1:$PORT/item > "$WORK/h2-$factor" 2>&1 || true
  python3 - "$WORK/log-$factor" "$factor" "$C" "$rate" "$SECS" "$WORK/h2-$factor" "$WORK/acked" "$CONNS" <<'PY'
import sys
log, factor, C, rate, secs, summ, acked, conns = sys.argv[1:]
by = {}
for line in open(log):
    p = line.split()
    if len(p) < 3: continue
    by.setdefault(int(p[1]), []).append(int(p[2]) / 1000.0)
def pct(v, q):
    v = sorted(v); return v[min(len(v)-1, int(q*len(v)))] if v else float('nan')
errs = [l.strip() for l in open(summ) if 'failed' in l or 'errored' in l or 'timeout' in l]
print(f"offered {factor}x C: asked {int(rate)*int(conns)}/s, sent {sum(len(v) for v in by.values())/float(secs):.0f}/s over {secs}s; " +
      "; ".join(f"{s}: {len(v)} p50 {pct(v,.5):.2f} ms p99 {pct(v,.99):.2f} ms max {max(v):.1f} ms" for s, v in sorted(by.items())))
print("  h2load:", " | ".join(errs))
prev = int(open(acked).read())
open(acked, 'w').write(str(prev + len(by.get(201, []))))
PY
  echo "  refusals so far: $(curl -s http://127.0.0.1:$PORT/metrics | grep '^statepipe_serve_refusals_total' | tr '\n' ' ')"
done
kill -TERM $PID; wait $PID || true
start
python3 - $PORT "$WORK/acked" <<'PY'
import sys, json, urllib.request
port, acked = sys.argv[1], int(open(sys.argv[2]).read())
after, n = 0, 0
while True:
    page = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/item?after={after}&limit=1000"))
    n += len(page["items"])
    if page["next_after"] is None: break
    after = page["next_after"]
print(f"after SIGTERM and restart: {n} items served; 201s over all runs: {acked}; acknowledged writes missing: {max(0, acked - n)}")
PY
kill -TERM $PID; wait $PID || true
rmdir $CG || true
rm -rf "$DATA" "$WORK"
echo "# end $(date -u) uptime: $(uptime)"
