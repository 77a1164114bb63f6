# shellcheck shell=bash
# Sourced by the serve lab scripts (serve-zerofill-run1/ab.sh,
# serve-tally-run1/cpu.sh): start a server on a fresh data directory and
# wait for its `listening on ADDR` line; measure its CPU per request; stop
# it.

# serve_start DIR COMMAND...: runs `COMMAND --listen 127.0.0.1:0 --data
# DIR/data` in the background (stdout in DIR/out, stderr in DIR/err);
# sets SERVE_PID and SERVE_ADDR.
serve_start() {
    local dir=$1; shift
    rm -rf "$dir/data" "$dir/out"
    "$@" --listen 127.0.0.1:0 --data "$dir/data" > "$dir/out" 2> "$dir/err" &
    # shellcheck disable=SC2034 # read by the scripts that source this file
    SERVE_PID=$!
    for _ in $(seq 200); do [ -s "$dir/out" ] && break; sleep 0.05; done
    # shellcheck disable=SC2034
    SERVE_ADDR=$(awk '{print $3; exit}' "$dir/out")
}

# serve_stop: stops the server serve_start started.
serve_stop() {
    kill "$SERVE_PID"
    wait "$SERVE_PID" 2> /dev/null || true
}

# serve_cpu_per_request NAME SECONDS URL: `wrk -t1 -c256` on CPU 1 against
# URL for SECONDS; prints its rate and the server's user and system CPU
# (ticks of 1/100 s from /proc/PID/stat) per request over the run.
serve_cpu_per_request() {
    local name=$1 secs=$2 url=$3 u0 s0 u1 s1 rate out
    out=$(mktemp)
    read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$SERVE_PID/stat")
    taskset -c 1 wrk -t1 -c256 -d"${secs}s" "$url" > "$out"
    read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$SERVE_PID/stat")
    rate=$(awk '/Requests\/sec/{print $2}' "$out")
    rm -f "$out"
    awk -v n="$name" -v r="$rate" -v t="$secs" -v u=$((u1 - u0)) -v s=$((s1 - s0)) 'BEGIN {
        q = r * t
        printf "%-7s %8.0f req/s  server busy %3.0f%%  user %.3f us/req  system %.2f us/req\n",
            n, r, (u + s) / t, u * 1e4 / q, s * 1e4 / q }'
}
