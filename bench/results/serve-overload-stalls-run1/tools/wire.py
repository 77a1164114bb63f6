# The latencies on the wire: request and answer segments of tcpdump's
# capture paired per connection in order; answers grouped by length (162
# bytes: a 429 here). `python3 wire.py [PORT [x]]`; x adds the worst 429
# per 100 ms.
import subprocess,collections,sys
out=subprocess.run(['tcpdump','-r','/tmp/ovr/cap.pcap','-n','-tt','-q'],capture_output=True,text=True).stdout
port=sys.argv[1] if len(sys.argv)>1 else '18080'
req=collections.defaultdict(collections.deque); lat={}
res=[]
for line in out.splitlines():
    p=line.split()
    if len(p)<6 or p[1]!='IP': continue
    t=float(p[0]); src=p[2]; dst=p[4].rstrip(':'); n=int(p[-1])
    if n==0: continue
    if dst.endswith('.'+port): req[src].append(t)
    elif src.endswith('.'+port):
        q=req[dst]
        if q: res.append((q[0],t-q.popleft(),n))
res.sort(); t0=res[0][0]
res=[r for r in res if r[0]-t0>1.0]
by=collections.defaultdict(list)
for s,l,n in res: by[n].append(l*1e3)
for n,ls in sorted(by.items(), key=lambda x:-len(x[1]))[:4]:
    ls.sort(); print(f"resp len {n}: n={len(ls)} p50={ls[len(ls)//2]:.3f} p99={ls[int(.99*len(ls))]:.3f} max={ls[-1]:.2f} ms")
worst=sorted([r for r in res if r[2]==162], key=lambda r:-r[1])[:5]
for s,l,n in worst: print(f"slow 429: arrived {s:.6f} answered after {l*1e3:.2f} ms")
if len(sys.argv)>2:
    import math
    w=collections.defaultdict(list)
    for s,l,n in res:
        if n==162: w[int((s-t0)*10)].append(l*1e3)
    print(' '.join(f"{k/10:.1f}:{max(v):.1f}" for k,v in sorted(w.items()) if max(v)>2))
