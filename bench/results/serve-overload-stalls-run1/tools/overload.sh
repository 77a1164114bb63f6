#!/bin/bash
# The overload run by hand, to look inside it: statepipe serve pinned to CPU 0
# in a 200-IOPS blkio cgroup, oha on CPU 1 at RATE POST/s over CONNS
# connections for DUR s; prints the 429s' p50/p99/max from oha's CSV (the
# first second left out, as the bench does). Work files go to /tmp/ovr.
# Options (environment): TCPD=1 captures loopback with tcpdump on CPU 1 (then
# `python3 wire.py` gives the latencies on the wire, the server's side);
# SAMPLE=1 runs the SCHED_FIFO sampler on both CPUs (`gcc -O2 -o
# /tmp/ovr/sampler sampler.c` first; then `python3 floor.py /tmp/ovr/s0
# /tmp/ovr/s1`); PERF=1 records `perf sched` (CLOCK_MONOTONIC; /tmp/ovr/offset
# holds realtime - monotonic, to line it up with the capture); OHAX adds oha
# options; EXTRA adds server options; BIN is the statepipe binary.
mkdir -p /tmp/ovr
set -e; trap "kill -TERM \$SP 2>/dev/null; wait \$SP 2>/dev/null" EXIT
BIN=${BIN:-/work/main/target/release/statepipe}
RATE=${RATE:-6000}; CONNS=${CONNS:-400}; DUR=${DUR:-5}
D=/tmp/ovr/data; rm -rf $D; mkdir -p $D
dev=$(lsblk -no MAJ:MIN /dev/vda | head -1 | tr -d ' ')
CG=/sys/fs/cgroup/blkio/ovr; mkdir -p $CG; echo "$dev 200" > $CG/blkio.throttle.write_iops_device
PORT=${PORT:-18080}
( echo $BASHPID > $CG/cgroup.procs; exec taskset -c 0 $BIN serve --listen 127.0.0.1:$PORT --data $D --ring-capacity 128 $EXTRA ) > /tmp/ovr/server.log 2>&1 &
SP=$!
python3 -c "import time;print(time.time()-time.monotonic())" > /tmp/ovr/offset
for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:$PORT/health && break; sleep 0.1; done
[ -n "$TCPD" ] && { taskset -c 1 tcpdump -i lo -n -tt -s 96 -B 65536 -w /tmp/ovr/cap.pcap tcp port $PORT >/dev/null 2>&1 & TP=$!; sleep 0.5; }
[ -n "$SAMPLE" ] && { (taskset -c 0 /tmp/ovr/sampler $((DUR+1)) /tmp/ovr/s0 &); (taskset -c 1 /tmp/ovr/sampler $((DUR+1)) /tmp/ovr/s1 &); }
[ -n "$PERF" ] && { perf sched record -k CLOCK_MONOTONIC -o /tmp/ovr/perf.data -a -- sleep $((DUR+1)) >/dev/null 2>&1 & PP=$!; }
taskset -c 1 oha $OHAX --no-tui --latency-correction --wait-ongoing-requests-after-deadline -c $CONNS -q $RATE -z ${DUR}s --output-format csv -m POST -T application/json -d '{"name":"widget","price":9.5}' http://127.0.0.1:$PORT/item > /tmp/ovr/oha.csv
[ -n "$PERF" ] && { wait $PP || true; }
[ -n "$TCPD" ] && { sleep 0.3; kill $TP; wait $TP 2>/dev/null || true; }
kill -TERM $SP; wait $SP || true; SP=
python3 - <<'PY'
import csv
rows=list(csv.DictReader(open('/tmp/ovr/oha.csv')))
t0=min(float(r['request-start']) for r in rows)
def p(xs,q): xs=sorted(xs); return xs[min(len(xs)-1,int(q*len(xs)))] if xs else float('nan')
rej=[(float(r['request-start'])-t0,float(r['request-duration'])*1e3) for r in rows if r['status']=='429' and float(r['request-start'])-t0>1.0]
acc=[float(r['request-duration'])*1e3 for r in rows if r['status']!='429' and float(r['request-start'])-t0>1.0]
print(f"n={len(rows)} 429={len(rej)} p50={p([x[1] for x in rej],.5):.2f} p99={p([x[1] for x in rej],.99):.2f} max={max(x[1] for x in rej):.1f} ms; acc n={len(acc)} p99={p(acc,.99):.1f}")
slow=[x for x in rej if x[1]>1.0]
print("slow 429s:",len(slow), "first:", [(round(a,3),round(b,1)) for a,b in slow[:15]])
PY
