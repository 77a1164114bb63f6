#!/usr/bin/env bash
# A multi-host statepipe cluster on one machine: network namespaces joined
# by veth pairs to a bridge that lives in a namespace of its own, a master
# in one namespace and one worker in each of the others.
#
#   sudo deploy/netns/run.sh [--check]
#   sudo deploy/netns/run.sh --serve [--check]
#   sudo deploy/netns/run.sh --pipeline [--check]
#   sudo deploy/netns/run.sh --elastic [--check]
#
# Runs, in order:
#   1. the reference: `statepipe pf --engine workers --workers N` on this host's loopback;
#   2. `statepipe master` + N `statepipe worker`s across the bridge: the
#      Nile filter's JSON (loglik, its standard error, filtered means) must
#      equal the reference's byte for byte, hence bit for bit;
#   3. the `sleep` model (`statepipe sleep-master`: every evolve call sleeps
#      SLEEP_MS) on loopback inside the master's namespace, then across the
#      bridge: the final states must be identical;
#   4. both again with each worker's link (both directions) delaying frames
#      2 ms ± 1 ms, then the same delay with 0.5 % loss: `tc netem` where
#      the kernel has it, else link.py (TAP devices and a user-space
#      forwarder; needs python3 and /dev/net/tun), which then carries the
#      workers' links in every run across the bridge.
# With --serve it runs the HTTP item service instead: `statepipe serve` in
# one namespace and `wrk` in another (POST /item, then GET /item/{id}, each
# CONNS keep-alive connections for SECS seconds), on loopback inside the
# server's namespace, across the bridge, and across the bridge with the
# client's link delayed (DELAY_MS ± JITTER_MS); then an item read back
# across the bridge and SIGTERM, which must end the server with status 0.
# It prints req/s, p50 and p99 per run; every answer must be 2xx with no
# socket errors (exit 1 otherwise).
#
# With --pipeline it runs a distributed pipeline instead: `statepipe run
# EXAMPLE --coordinator` in the first namespace and a `statepipe member` in
# each of the WORKERS others, on loopback (all in one namespace), across the
# bridge, across it with every member's link delayed 2 ms ± 1 ms, and with
# that delay and LOSS_PCT loss; each run's `digest:` line must equal a
# one-process `statepipe run EXAMPLE`'s, and each prints its items/s and
# that over the loopback run's (EXAMPLE: counts, ITEMS: 2000000).
#
# With --elastic it scales the cluster during a run instead: the pk
# filter (PARTICLES particles in ISLANDS islands, PK_HOURS hours of
# PK_SUBSTEPS substeps: seconds of work) by `statepipe master` across the
# bridge, twice. Scale-in: WORKERS workers start the run and the last half
# are sent SIGTERM SCALE_AFTER_S seconds in: each must leave (its states
# moved to the others) and exit 0. Scale-out: the first half start the
# run and the others start SCALE_AFTER_S seconds in, in their own
# namespaces, and join it. Each result must equal `statepipe pf --engine
# workers --workers WORKERS` on loopback bit for bit.
#
# It prints, per sleep run, wall time, efficiency (busy / workers / wall)
# and that efficiency over the loopback run's. Exits 0 when every result is
# identical, 1 when one is not or a run fails, 3 (saying why) when it cannot
# run here (not root, no `ip netns`, no `tc`). `--check` only checks that.
#
# Every name carries a per-run id; namespaces (and with them the veths, the
# bridge and the qdiscs) and processes are removed on exit, failure and
# signals included.
#
# Environment: STATEPIPE (default target/release/statepipe), WORKERS (4),
# SLEEP_MS (30), STATES (32), STEPS (8), PARTICLES (2000), ISLANDS (20),
# SEED (1), OUT (a directory for the JSON files and logs; default a
# temporary one, removed at exit), DELAY_MS (2), JITTER_MS (1), LOSS_PCT
# (0.5), LINK (netem or tap; default: netem if the kernel has it); with
# --serve: CONNS (50), SECS (5); with --pipeline: WORKERS (2), EXAMPLE,
# ITEMS; with --elastic: PARTICLES (10000), PK_HOURS (12), PK_SUBSTEPS
# (10000), SCALE_AFTER_S (0.5).
set -euo pipefail
# Paths given in the environment are relative to the caller's directory.
if [ -n "${STATEPIPE:-}" ]; then STATEPIPE=$(realpath -m "$STATEPIPE"); fi
if [ -n "${OUT:-}" ]; then OUT=$(realpath -m "$OUT"); fi
cd "$(dirname "$0")/../.."

STATEPIPE=${STATEPIPE:-target/release/statepipe}
WORKERS_SET=${WORKERS:-}
WORKERS=${WORKERS:-4}
SLEEP_MS=${SLEEP_MS:-30}
STATES=${STATES:-32}
STEPS=${STEPS:-8}
PARTICLES_SET=${PARTICLES:-}
PARTICLES=${PARTICLES:-2000}
ISLANDS=${ISLANDS:-20}
SEED=${SEED:-1}
DELAY_MS=${DELAY_MS:-2}
JITTER_MS=${JITTER_MS:-1}
LOSS_PCT=${LOSS_PCT:-0.5}
PORT=7878
MASTER_IP=10.231.0.1
MODE=cluster
if [ "${1:-}" = "--serve" ]; then
  MODE=serve
  shift
  WORKERS=1 # node 0: the server, node 1: the load generator
fi
if [ "${1:-}" = "--pipeline" ]; then
  MODE=pipeline
  shift
  WORKERS=${WORKERS_SET:-2}
fi
if [ "${1:-}" = "--elastic" ]; then
  MODE=elastic
  shift
  PARTICLES=${PARTICLES_SET:-10000}
fi
PK_HOURS=${PK_HOURS:-12}
PK_SUBSTEPS=${PK_SUBSTEPS:-10000}
SCALE_AFTER_S=${SCALE_AFTER_S:-0.5}
CONNS=${CONNS:-50}
SECS=${SECS:-5}
EXAMPLE=${EXAMPLE:-counts}
ITEMS=${ITEMS:-2000000}

cannot() { echo "cannot run here: $*" >&2; exit 3; }

[ "$(id -u)" = 0 ] || cannot "needs root (network namespaces)"
command -v ip >/dev/null || cannot "no ip command (iproute2)"
RUN="sp$$x$RANDOM"
PROBE="$RUN-probe"
ip netns add "$PROBE" 2>/dev/null || cannot "ip netns add fails"
trap 'ip netns del "$PROBE" 2>/dev/null || true' EXIT
if [ -z "${LINK:-}" ]; then
  if command -v tc >/dev/null \
    && ip netns exec "$PROBE" tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
    LINK=netem
  else
    LINK=tap
  fi
fi
if [ "$LINK" = tap ]; then
  if ! command -v python3 >/dev/null || ! ip -n "$PROBE" tuntap add dev t0 mode tap 2>/dev/null; then
    cannot "the kernel has no netem qdisc, and TAP devices or python3 are missing"
  fi
fi
ip netns del "$PROBE"
if [ "$MODE" = serve ]; then
  command -v wrk >/dev/null || cannot "--serve needs wrk (apt-get install wrk)"
fi
if [ "${1:-}" = "--check" ]; then
  echo "ok: network namespaces usable; links emulated by $LINK"
  exit 0
fi
[ -x "$STATEPIPE" ] || { echo "no statepipe binary at $STATEPIPE (cargo build --release -p statepipe)" >&2; exit 1; }
STATEPIPE=$(realpath "$STATEPIPE")
if [ "$WORKERS" -lt 1 ] || [ "$WORKERS" -gt 200 ]; then
  echo "WORKERS must be 1..200" >&2
  exit 1
fi
if [ "$MODE" = elastic ] && [ "$WORKERS" -lt 2 ]; then
  echo "--elastic needs WORKERS >= 2 (half of them come or go)" >&2
  exit 1
fi

if [ -z "${OUT:-}" ]; then
  OUT=$(mktemp -d)
  REMOVE_OUT=1
else
  mkdir -p "$OUT"
  REMOVE_OUT=0
fi

BR="$RUN-br"
node() { echo "$RUN-n$1"; }  # node 0: the master; 1..N: the workers
PIDS=()
NSS=()

cleanup() {
  local pid ns
  # TERM first: `timeout` passes it on to the statepipe process it runs.
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  sleep 0.2
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for ns in "${NSS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  if [ "$REMOVE_OUT" = 1 ]; then rm -rf "$OUT"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The bridge's namespace, then one namespace per node with a veth whose
# other end is a port of the bridge.
ip netns add "$BR"; NSS+=("$BR")
ip -n "$BR" link add br0 type bridge
ip -n "$BR" link set br0 up
ip -n "$BR" link set lo up
if [ "$LINK" = tap ]; then
  # One forwarder for every worker link: TAP pairs l<i>a (a bridge port)
  # and l<i>b (moved to worker i as eth0).
  echo "0 0 0" >"$OUT/link-params"
  names=()
  for i in $(seq 1 "$WORKERS"); do names+=("l$i"); done
  ip netns exec "$BR" python3 -u deploy/netns/link.py "$OUT/link-params" "${names[@]}" \
    >"$OUT/link.log" 2>&1 &
  LINK_PID=$!
  PIDS+=("$LINK_PID")
  for _ in $(seq 100); do grep -q ready "$OUT/link.log" && break; sleep 0.1; done
  grep -q ready "$OUT/link.log" || { cat "$OUT/link.log" >&2; exit 1; }
fi
for i in $(seq 0 "$WORKERS"); do
  ns=$(node "$i")
  ip netns add "$ns"; NSS+=("$ns")
  if [ "$LINK" = tap ] && [ "$i" -gt 0 ]; then
    ip -n "$BR" link set "l${i}b" netns "$ns"
    ip -n "$ns" link set "l${i}b" name eth0
    ip -n "$BR" link set "l${i}a" master br0 up
  else
    ip -n "$BR" link add "v$i" type veth peer name eth0 netns "$ns"
    ip -n "$BR" link set "v$i" master br0 up
  fi
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "10.231.$((i / 250)).$((i % 250 + 1))/16" dev eth0
  ip -n "$ns" link set eth0 up
done

export STATEPIPE_SECRET
STATEPIPE_SECRET=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')

# Starts the workers in their namespaces, connecting to $1; their pids go
# to WPIDS (and PIDS, for the cleanup).
start_workers() {
  WPIDS=()
  for i in $(seq 1 "$WORKERS"); do
    if [ "$2" = loopback ]; then ns=$(node 0); else ns=$(node "$i"); fi
    timeout 120 ip netns exec "$ns" "$STATEPIPE" worker --connect "$1" \
      >"$OUT/worker-$3-$i.log" 2>&1 &
    WPIDS+=("$!"); PIDS+=("$!")
  done
}

wait_workers() {
  local pid
  for pid in "${WPIDS[@]}"; do wait "$pid" || true; done
}

# The Nile filter across the bridge: $1 names the run.
nile() {
  start_workers "$MASTER_IP:$PORT" bridge "nile-$1"
  timeout 120 ip netns exec "$(node 0)" "$STATEPIPE" master --listen "0.0.0.0:$PORT" \
    --workers "$WORKERS" --quiet --seed "$SEED" --particles "$PARTICLES" \
    --islands "$ISLANDS" --json "$OUT/nile-$1.json" >"$OUT/nile-$1.log" 2>&1 \
    || { cat "$OUT/nile-$1.log" >&2; FAILED=1; wait_workers; return; }
  wait_workers
  if cmp -s <(result "$OUT/nile-reference.json") <(result "$OUT/nile-$1.json"); then
    echo "nile $1: identical to the local reference (loglik $(field loglik "$OUT/nile-$1.json")$(losses "$OUT/nile-$1.json"))"
  else
    echo "nile $1: DIFFERS from the local reference"
    diff <(result "$OUT/nile-reference.json") <(result "$OUT/nile-$1.json") | head -5
    FAILED=1
  fi
}

# The sleep model: $1 names the run, $2 is loopback or bridge.
sleep_run() {
  local addr=$MASTER_IP:$PORT listen=0.0.0.0:$PORT
  if [ "$2" = loopback ]; then addr=127.0.0.1:$PORT; listen=$addr; fi
  start_workers "$addr" "$2" "sleep-$1"
  timeout 120 ip netns exec "$(node 0)" "$STATEPIPE" sleep-master --listen "$listen" \
    --workers "$WORKERS" --sleep-ms "$SLEEP_MS" --states "$STATES" --steps "$STEPS" \
    --seed "$SEED" --json "$OUT/sleep-$1.json" >"$OUT/sleep-$1.log" 2>&1 \
    || { cat "$OUT/sleep-$1.log" >&2; FAILED=1; wait_workers; return; }
  wait_workers
  local wall eff same=identical
  wall=$(field wall_s "$OUT/sleep-$1.json")
  eff=$(field efficiency "$OUT/sleep-$1.json")
  if [ "$1" != loopback ]; then
    cmp -s <(result "$OUT/sleep-loopback.json") <(result "$OUT/sleep-$1.json") \
      || { same="DIFFERENT states"; FAILED=1; }
  fi
  awk -v n="$1" -v w="$wall" -v e="$eff" -v e0="${EFF0:-$eff}" -v s="$same" \
    -v l="$(losses "$OUT/sleep-$1.json")" 'BEGIN {
    printf "sleep %s: wall %.3f s, efficiency %.3f, %.3f of loopback%s; states %s\n", n, w, e, e / e0, l, s }'
  if [ "$1" = loopback ]; then EFF0=$eff; fi
}

# What must not change between runs: the JSON without its timings, its
# worker counts (workers that came or went) and the run's losses (a worker dropped as stopped on a loaded host is
# recovered with the same bits; `losses` reports it).
result() {
  awk '/"(efficiency|wall_s|lost_workers|left_workers|workers|rollbacks|recovered_unix_s)":/ {
         if ($0 ~ /\[$/) skip = 1
         next
       }
       skip { if ($0 ~ /^ *\],?$/) skip = 0; next }
       { print }' "$1"
}
# ", N worker(s) lost and recovered" when the run in $1 lost any.
losses() {
  local n
  n=$(field lost_workers "$1")
  if [ "${n:-0}" != 0 ]; then printf ', %s worker(s) lost and recovered' "$n"; fi
}
field() { sed -n "s/.*\"$1\": \\([-0-9.eE+]*\\).*/\\1/p" "$2" | head -1; }

# The forwarder's frame counts so far (tap links only).
frames() {
  if [ "$LINK" = tap ]; then
    kill -USR1 "$LINK_PID"
    sleep 0.1
    echo "  worker links, $(grep '^frames: ' "$OUT/link.log" | tail -1) since the start"
  fi
}

# Both directions of every worker link: delay $1 ms ± $2 ms, loss $3 %.
links() {
  local i
  echo "links of the workers, both directions: delay $1 ms ± $2 ms, loss $3 % ($LINK)"
  if [ "$LINK" = tap ]; then
    echo "$1 $2 $(awk -v p="$3" 'BEGIN { print p / 100 }')" >"$OUT/link-params.new"
    mv "$OUT/link-params.new" "$OUT/link-params"
    sleep 0.2 # the forwarder reads the file at least every 50 ms
    return
  fi
  for i in $(seq 1 "$WORKERS"); do
    ip netns exec "$(node "$i")" tc qdisc replace dev eth0 root netem \
      delay "$1ms" "$2ms" loss "$3%"
    ip netns exec "$BR" tc qdisc replace dev "v$i" root netem \
      delay "$1ms" "$2ms" loss "$3%"
  done
}

# One wrk run: $1 the namespace, $2 the base URL, $3 the script, $4 the
# label. Prints req/s, p50, p99; a non-2xx answer or socket error fails.
wrk_run() {
  local line
  line=$(timeout $((SECS + 30)) ip netns exec "$1" wrk -t1 -c"$CONNS" -d"${SECS}s" \
    --timeout 5s -s "$3" "$2" 2>&1 | sed -n 's/^WRKJSON //p')
  if [ -z "$line" ]; then echo "serve $4: wrk printed no figures"; FAILED=1; return; fi
  echo "$line" >>"$OUT/serve-wrk.jsonl"
  awk -v l="$line" -v n="$4" 'BEGIN {
    split(l, kv, /[,{}]/); for (i in kv) { split(kv[i], p, ":"); gsub(/"/, "", p[1]); v[p[1]] = p[2] }
    errs = v["connect"] + v["read"] + v["write"] + v["timeout"]
    printf "serve %s: %.0f req/s, p50 %.2f ms, p99 %.2f ms, non-2xx %d, socket errors %d\n",
      n, v["requests"] / (v["duration_us"] / 1e6), v["p50_us"] / 1e3, v["p99_us"] / 1e3, v["status"], errs
    exit (v["status"] + errs > 0) }' || FAILED=1
}

serve_case() {
  local done_lua='done = function(s, l, r)
  io.write(string.format("WRKJSON {\"requests\":%d,\"duration_us\":%d,\"connect\":%d,\"read\":%d,\"write\":%d,\"status\":%d,\"timeout\":%d,\"p50_us\":%d,\"p99_us\":%d}\n",
    s.requests, s.duration, s.errors.connect, s.errors.read, s.errors.write, s.errors.status,
    s.errors.timeout, l:percentile(50), l:percentile(99)))
end'
  printf 'wrk.method = "POST"\nwrk.path = "/item"\nwrk.body = %s\nwrk.headers["Content-Type"] = "application/json"\n%s\n' \
    "'{\"name\":\"widget\",\"price\":9.5}'" "$done_lua" >"$OUT/post.lua"
  printf 'request = function() return wrk.format("GET", "/item/" .. math.random(1, 1000)) end\n%s\n' \
    "$done_lua" >"$OUT/get.lua"
  ip netns exec "$(node 0)" "$STATEPIPE" serve --listen "0.0.0.0:$PORT" --data "$OUT/serve-data" \
    >"$OUT/serve.out" 2>"$OUT/serve.log" &
  local server=$!
  PIDS+=("$server")
  for _ in $(seq 100); do grep -q listening "$OUT/serve.out" && break; sleep 0.1; done
  grep -q listening "$OUT/serve.out" || { cat "$OUT/serve.log" >&2; exit 1; }
  echo "statepipe serve in $(node 0) ($MASTER_IP:$PORT); wrk in $(node 1): $CONNS connections, $SECS s per run"
  local where ns url
  for where in loopback bridge delay; do
    ns=$(node 1); url="http://$MASTER_IP:$PORT"
    if [ "$where" = loopback ]; then ns=$(node 0); url="http://127.0.0.1:$PORT"; fi
    if [ "$where" = delay ]; then links "$DELAY_MS" "$JITTER_MS" 0; fi
    wrk_run "$ns" "$url" "$OUT/post.lua" "$where POST /item"
    wrk_run "$ns" "$url" "$OUT/get.lua" "$where GET /item/{id}"
  done
  local first
  first=$(timeout 10 ip netns exec "$(node 1)" bash -c \
    "exec 3<>/dev/tcp/$MASTER_IP/$PORT; printf 'GET /item/1 HTTP/1.1\r\nConnection: close\r\n\r\n' >&3; cat <&3" \
    | tail -1)
  echo "GET /item/1 across the bridge: $first"
  case "$first" in *'"id":1'*) ;; *) FAILED=1 ;; esac
  kill -TERM "$server"
  if wait "$server"; then
    echo "SIGTERM: the server drained and exited 0 ($(wc -l <"$OUT/serve-wrk.jsonl") runs)"
  else
    echo "SIGTERM: the server exited with status $?"; FAILED=1
  fi
}

# One distributed run: $1 names it, $2 is loopback or bridge.
pipeline_run() {
  local addr=$MASTER_IP:$PORT listen=0.0.0.0:$PORT ns i
  if [ "$2" = loopback ]; then addr=127.0.0.1:$PORT; listen=$addr; fi
  WPIDS=()
  for i in $(seq 1 "$WORKERS"); do
    if [ "$2" = loopback ]; then ns=$(node 0); else ns=$(node "$i"); fi
    timeout 300 ip netns exec "$ns" "$STATEPIPE" member --connect "$addr" --no-pin \
      >"$OUT/member-$1-$i.log" 2>&1 &
    WPIDS+=("$!"); PIDS+=("$!")
  done
  timeout 300 ip netns exec "$(node 0)" "$STATEPIPE" run "$EXAMPLE" --items "$ITEMS" \
    --coordinator "$listen" --members "$WORKERS" >"$OUT/pipeline-$1.out" 2>"$OUT/pipeline-$1.log" \
    || { cat "$OUT/pipeline-$1.log" >&2; FAILED=1; wait_workers; return; }
  wait_workers
  local rate same=identical
  rate=$(sed -n 's/.* s: \([0-9.]*\) M items\/s/\1/p' "$OUT/pipeline-$1.out")
  [ "$(grep '^digest:' "$OUT/pipeline-$1.out")" = "$DIGEST" ] || { same="DIFFERENT"; FAILED=1; }
  awk -v n="$1" -v r="$rate" -v r0="${RATE0:-$rate}" -v s="$same" 'BEGIN {
    printf "pipeline %s: %.3f M items/s, %.3f of loopback; digest %s\n", n, r, r / r0, s }'
  if [ "$1" = loopback ]; then RATE0=$rate; fi
}

# The pk filter across the bridge while workers come or go: $1 is in
# (the last half sent SIGTERM mid-run) or out (the last half started
# mid-run).
elastic_run() {
  local half=$((WORKERS / 2)) i ns pid first=$WORKERS status bad=0
  if [ "$1" = out ]; then first=$half; fi
  WPIDS=()
  for i in $(seq 1 "$first"); do
    timeout --foreground 300 ip netns exec "$(node "$i")" "$STATEPIPE" worker --connect "$MASTER_IP:$PORT" \
      >"$OUT/worker-scale-$1-$i.log" 2>&1 &
    WPIDS+=("$!"); PIDS+=("$!")
  done
  timeout 300 ip netns exec "$(node 0)" "$STATEPIPE" master --listen "0.0.0.0:$PORT" \
    --workers "$first" --quiet --seed "$SEED" "${PK[@]}" --json "$OUT/scale-$1.json" \
    >"$OUT/scale-$1.log" 2>&1 &
  local master=$!
  PIDS+=("$master")
  sleep "$SCALE_AFTER_S"
  if [ "$1" = in ]; then
    # `timeout --foreground` passes one TERM on to the worker it runs
    # (without it, a second reaches the worker through the process group,
    # and a worker's second SIGTERM is a crash).
    for i in $(seq $((half + 1)) "$WORKERS"); do kill -TERM "${WPIDS[$((i - 1))]}"; done
  else
    for i in $(seq $((half + 1)) "$WORKERS"); do
      timeout --foreground 300 ip netns exec "$(node "$i")" "$STATEPIPE" worker --connect "$MASTER_IP:$PORT" \
        >"$OUT/worker-scale-$1-$i.log" 2>&1 &
      WPIDS+=("$!"); PIDS+=("$!")
    done
  fi
  wait "$master" || { cat "$OUT/scale-$1.log" >&2; FAILED=1; wait_workers; return; }
  i=0
  for pid in "${WPIDS[@]}"; do
    i=$((i + 1))
    status=0
    wait "$pid" || status=$?
    if [ "$status" != 0 ]; then
      echo "scale-$1: worker $i exited $status"; cat "$OUT/worker-scale-$1-$i.log" >&2; bad=1
    fi
  done
  [ "$bad" = 0 ] || FAILED=1
  local how
  if [ "$1" = in ]; then
    how="$(field left_workers "$OUT/scale-$1.json") of $WORKERS workers left mid-run"
  else
    how="$(field workers "$OUT/scale-$1.json") workers took part, $((WORKERS - half)) of them joining mid-run"
  fi
  if cmp -s <(result "$OUT/scale-reference.json") <(result "$OUT/scale-$1.json"); then
    echo "scale-$1: identical to the local reference (loglik $(field loglik "$OUT/scale-$1.json"); $how$(losses "$OUT/scale-$1.json"))"
  else
    echo "scale-$1: DIFFERS from the local reference ($how)"
    diff <(result "$OUT/scale-reference.json") <(result "$OUT/scale-$1.json") | head -5
    FAILED=1
  fi
}

FAILED=0
if [ "$MODE" = elastic ]; then
  PK=(--model pk --pk-hours "$PK_HOURS" --pk-substeps "$PK_SUBSTEPS" --particles "$PARTICLES"
    --islands "$ISLANDS")
  echo "run $RUN: pk filter, $PARTICLES particles in $ISLANDS islands, seed $SEED; $WORKERS workers," \
    "half of them leaving (SIGTERM), then joining, $SCALE_AFTER_S s into the run"
  timeout 300 "$STATEPIPE" pf --engine workers --workers "$WORKERS" --quiet --seed "$SEED" "${PK[@]}" \
    --json "$OUT/scale-reference.json" >"$OUT/scale-reference.log" 2>&1 \
    || { cat "$OUT/scale-reference.log" >&2; exit 1; }
  echo "pk reference (statepipe pf --engine workers --workers $WORKERS, loopback): loglik $(field loglik "$OUT/scale-reference.json")"
  elastic_run in
  elastic_run out
  if [ "$FAILED" = 0 ]; then echo "all results identical"; exit 0; fi
  echo "FAILED: see above" >&2
  exit 1
fi
if [ "$MODE" = pipeline ]; then
  DIGEST=$("$STATEPIPE" run "$EXAMPLE" --items "$ITEMS" --no-pin 2>/dev/null | grep '^digest:')
  echo "run $RUN: \`$EXAMPLE\`, $ITEMS items, $WORKERS members; one process: $DIGEST"
  pipeline_run loopback loopback
  pipeline_run bridge bridge
  links "$DELAY_MS" "$JITTER_MS" 0
  pipeline_run delay bridge
  links "$DELAY_MS" "$JITTER_MS" "$LOSS_PCT"
  pipeline_run delay-loss bridge
  if [ "$FAILED" = 0 ]; then echo "all digests identical"; exit 0; fi
  echo "FAILED: see above" >&2
  exit 1
fi
if [ "$MODE" = serve ]; then
  serve_case
  if [ "$FAILED" = 0 ]; then echo "serve: every answer 2xx, no socket errors"; exit 0; fi
  echo "FAILED: see above" >&2
  exit 1
fi
echo "run $RUN: $WORKERS workers, statepipe $("$STATEPIPE" --version)"
echo "nile: $PARTICLES particles in $ISLANDS islands, seed $SEED;" \
  "sleep: $STATES states x $STEPS steps of $SLEEP_MS ms"
timeout 120 "$STATEPIPE" pf --engine workers --workers "$WORKERS" --quiet --seed "$SEED" \
  --particles "$PARTICLES" --islands "$ISLANDS" --json "$OUT/nile-reference.json" \
  >"$OUT/nile-reference.log" 2>&1 || { cat "$OUT/nile-reference.log" >&2; exit 1; }
echo "nile reference (statepipe pf --engine workers --workers $WORKERS, loopback): loglik $(field loglik "$OUT/nile-reference.json")"

sleep_run loopback loopback
nile bridge
sleep_run bridge bridge
links "$DELAY_MS" "$JITTER_MS" 0
nile delay
sleep_run delay bridge
frames
links "$DELAY_MS" "$JITTER_MS" "$LOSS_PCT"
nile delay-loss
sleep_run delay-loss bridge
frames

if [ "$FAILED" = 0 ]; then
  echo "all results identical"
else
  echo "FAILED: see above" >&2
  exit 1
fi
