#!/bin/bash
# Durable POST /item with the journal appending (--journal-segment-mib 0)
# and writing over zero-filled segments (the default, 16), same binary,
# interleaved: the server pinned to CPU 0, `wrk -t1 -cC` on CPU 1, from
# an empty store (snapshots as by default), 1 s after the server is up,
# W seconds a run. Prints rate, p50, p99 and the mean journal commit
# (write + fdatasync) from the server's own histogram.
# With NEIGHBOR=MB (MB/s), a neighbour on the same file system writes that
# much a second, buffered, never syncing (a log shipper, a build), for the
# whole of each run.
# With OTHER=BIN, each round runs BIN zero-filled first (lines "other"),
# then STATEPIPE zero-filled and appending (lines "this"), in that order
# (how pacing.txt compared an unpaced build, OTHER, with the paced one).
# usage: [NEIGHBOR=MB] [OTHER=BIN] ab.sh STATEPIPE ROUNDS WINDOW CONNECTIONS...
set -euo pipefail
sp=$1 rounds=$2 window=$3; shift 3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# shellcheck source=bench/results/serve-lib.sh
. "$(dirname "$0")/../serve-lib.sh"
cat > "$dir/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"name":"widget","price":9.5}'
wrk.headers["Content-Type"] = "application/json"
LUA
neighbour() {
    exec python3 - "$dir/neighbour" "$1" <<'PY'
import os, sys, time
path, rate = sys.argv[1], float(sys.argv[2])
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
buf, n, t = b"y" * (1 << 20), 0, time.time()
while True:
    os.write(fd, buf); n += 1
    if n % 256 == 0: os.ftruncate(fd, 0); os.lseek(fd, 0, 0)
    t += 1 / rate
    time.sleep(max(0, t - time.time()))
PY
}
one() {
    local mib=$1 conns=$2 bin=${3:-$sp} npid=
    if [ -n "${NEIGHBOR:-}" ]; then neighbour "$NEIGHBOR" & npid=$!; fi
    serve_start "$dir" taskset -c 0 "$bin" serve --journal-segment-mib "$mib"
    local addr=$SERVE_ADDR
    sleep 1
    taskset -c 1 wrk -t1 -c"$conns" -d"${window}s" --latency -s "$dir/post.lua" "http://$addr/item" > "$dir/wrk"
    local m; m=$(curl -s "http://$addr/metrics")
    local sum count zf
    sum=$(awk '/^statepipe_serve_journal_fsync_seconds_sum/{print $2}' <<< "$m")
    count=$(awk '/^statepipe_serve_journal_fsync_seconds_count/{print $2}' <<< "$m")
    zf=$(awk '/^statepipe_serve_journal_zero_filled/{print $2}' <<< "$m")
    printf '%-9s c=%-4s %9.0f req/s  p50 %8s  p99 %8s  commit mean %5.0f us  zero-filled %s  non-2xx %s\n' \
        "$([ "$mib" = 0 ] && echo append || echo zeroed)" "$conns" \
        "$(awk '/Requests\/sec/{print $2}' "$dir/wrk")" \
        "$(awk '$1=="50%"{print $2}' "$dir/wrk")" "$(awk '$1=="99%"{print $2}' "$dir/wrk")" \
        "$(awk -v s="$sum" -v c="$count" 'BEGIN{print (c > 0 ? s / c * 1e6 : 0)}')" "$zf" \
        "$(awk '/Non-2xx/{print $NF; f=1} END{if (!f) print 0}' "$dir/wrk")"
    serve_stop
    if [ -n "$npid" ]; then kill "$npid"; wait "$npid" 2> /dev/null || true; rm -f "$dir/neighbour"; fi
}
for r in $(seq "$rounds"); do
    if [ -n "${OTHER:-}" ]; then
        for c in "$@"; do
            echo -n "other "; one 16 "$c" "$OTHER"
            echo -n "this  "; one 16 "$c"
            echo -n "this  "; one 0 "$c"
        done
        continue
    fi
    echo "round $r"
    for c in "$@"; do
        if [ $((r % 2)) = 1 ]; then one 0 "$c"; one 16 "$c"; else one 16 "$c"; one 0 "$c"; fi
    done
done
