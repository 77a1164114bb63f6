#!/usr/bin/env bash
# POST /item, two statepipe builds alternating (order flipped each round),
# server pinned to CPU 0, wrk -t1 -c200 on CPU 1, 4 s; the server's context
# switches per request. Usage: post-ab.sh BUILD_A BUILD_B
set -u
post=$(mktemp); trap 'rm -f "$post"' EXIT
printf '%s\n' 'wrk.method = "POST"' 'wrk.body = '"'"'{"name":"bench item","price":12.5}'"'"'' \
  'wrk.headers["Content-Type"] = "application/json"' > "$post"
for r in 1 2 3 4; do
  order="$1 $2"; [ $((r % 2)) = 0 ] && order="$2 $1"
  for bin in $order; do
    d=$(mktemp -d)
    taskset -c 0 $bin serve --listen 127.0.0.1:18096 --data $d > $d.out 2>&1 & pid=$!
    for _ in $(seq 50); do grep -q listening $d.out && break; sleep 0.1; done
    snap() { for t in /proc/$pid/task/*; do grep -E '^(voluntary|nonvoluntary)_ctxt' $t/status | awk '{print $2}'; done | paste -sd+ | bc; }
    a=$(snap)
    res=$(taskset -c 1 wrk -t1 -c200 -d4s --latency -s "$post" http://127.0.0.1:18096/item | awk '/Requests\/sec/{r=$2} / 99%/{l=$2} END{print r, "p99", l}')
    b=$(snap)
    echo "round $r $(basename $bin) POST $res ctxsw/req $(echo "scale=3; ($b-$a)/($(echo $res | cut -d' ' -f1 | cut -d. -f1)*4)" | bc)"
    kill $pid; wait $pid 2>/dev/null; rm -rf $d $d.out
  done
done
