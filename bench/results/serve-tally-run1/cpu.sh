#!/bin/bash
# The server CPU a GET /item/{id} costs, two statepipe builds interleaved:
# each pinned to CPU 0, `wrk -t1 -c256` on CPU 1 for 4 s; the server's
# user and system ticks (1/100 s, /proc/PID/stat) over the run, per
# request. At k = 1 wrk is the limit, so the rates match and the CPU a
# request takes is what differs.
# usage: cpu.sh OLD NEW ROUNDS
set -euo pipefail
old=$1 new=$2 rounds=${3:-3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# shellcheck source=bench/results/serve-lib.sh
. "$(dirname "$0")/../serve-lib.sh"
one() {
    serve_start "$dir" taskset -c 0 "$2" serve
    curl -s -XPOST -H 'content-type: application/json' -d '{"name":"widget","price":9.5}' \
        "http://$SERVE_ADDR/item" > /dev/null
    taskset -c 1 wrk -t1 -c256 -d1s "http://$SERVE_ADDR/item/1" > /dev/null
    serve_cpu_per_request "$1" 4 "http://$SERVE_ADDR/item/1"
    serve_stop
}
for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 1 ]; then one old "$old"; one new "$new"; else one new "$new"; one old "$old"; fi
done
