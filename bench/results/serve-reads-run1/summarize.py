"""Medians (and min-max) per k, endpoint and server from output.txt.
POST req/s counts accepted answers only (wrk's rate minus non-2xx / window)."""
import re, sys, statistics as st
win = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
rows = {}
for line in open(sys.argv[1] if len(sys.argv) > 1 else "output.txt"):
    m = re.match(r'k=(\d) (\w+) (\w+) req/s=([\d.]+) p99=([\d.]+)(ms|us|s) non2xx=(\d+)', line)
    if not m: continue
    k, ep, srv, rps, p99, unit, non = m.groups()
    p99 = float(p99) * {"ms": 1, "us": 1e-3, "s": 1e3}[unit]
    ok = float(rps) - int(non) / win
    rows.setdefault((k, ep, srv), []).append((ok, p99, int(non)))
for key in sorted(rows):
    v = rows[key]; r = [x[0] for x in v]; p = [x[1] for x in v]
    print(f"k={key[0]} {key[1]:4} {key[2]:5}  accepted req/s median {st.median(r):9.0f} (min {min(r):7.0f}, max {max(r):7.0f})  p99 ms median {st.median(p):7.2f} (min {min(p):.2f}, max {max(p):.2f})  refused {sum(x[2] for x in v)}  n={len(v)}")
