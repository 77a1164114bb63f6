"""Reads /tmp/prof19 (drive.py) and prints, per step, when workers started and ended, idle gaps and call overruns."""
import glob, collections
drv = {}
for line in open("/tmp/prof19/driver.log"):
    p = line.split()
    if len(p) == 2: drv[int(p[0])] = float(p[1])
ev = collections.defaultdict(list)
for f in glob.glob("/tmp/prof19/*.log"):
    if f.endswith("driver.log"): continue
    pid = f.split("/")[-1]
    for line in open(f):
        t, c, k, s, e = line.split()
        ev[int(t)].append((pid, int(c), int(k), float(s), float(e)))
for t in sorted(ev):
    xs = ev[t]; t0 = drv[t]
    first = min(x[3] for x in xs) - t0
    last = max(x[4] for x in xs) - t0
    # per worker: first start, last end, busy
    per = collections.defaultdict(list)
    for x in xs: per[x[0]].append(x)
    starts = sorted(min(y[3] for y in v) - t0 for v in per.values())
    ends = sorted(max(y[4] for y in v) - t0 for v in per.values())
    gaps = 0.0
    for v in per.values():
        v.sort(key=lambda y: y[3])
        for a, bb in zip(v, v[1:]): gaps += max(0, bb[3] - a[4])
    big = max(xs, key=lambda x: x[2])
    over = sum((x[4]-x[3]) - 0.006*x[2] for x in xs)
    print(f"t={t:2d} first start {1000*first:5.1f} ms, worker starts median {1000*starts[len(starts)//2]:5.1f} max {1000*starts[-1]:5.1f}; ends min {1000*ends[0]:5.1f} med {1000*ends[len(ends)//2]:5.1f} max {1000*last:5.1f}; gaps/worker {1000*gaps/len(per):4.1f} ms; call overrun/worker {1000*over/len(per):4.1f} ms; biggest k={big[2]} start {1000*(big[3]-t0):5.1f} end {1000*(big[4]-t0):5.1f}")
