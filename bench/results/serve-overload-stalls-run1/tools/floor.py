# The floor the stalls in the files given (spin.c or sampler.c output) put
# under the p99 of requests arriving at random instants: the wait x that more
# than 1 % of instants exceed, a request waiting for every CPU it passes.
import sys
iv=[];T=None;lost={}
for fn in sys.argv[1:]:
    L=0
    for line in open(fn):
        if line.startswith('#'): a,b=map(float,line[1:].split()); T=b-a; continue
        s,e=map(float,line.split()); iv.append((s,e)); L+=e-s
    lost[fn]=L
def frac(x):
    segs=sorted((s,e-x) for s,e in iv if e-s>x)
    tot=0;cs=ce=None
    for s,e in segs:
        if cs is None or s>ce:
            if cs is not None: tot+=ce-cs
            cs,ce=s,e
        else: ce=max(ce,e)
    if cs is not None: tot+=ce-cs
    return tot/T
lo,hi=0.0,max(e-s for s,e in iv)
for _ in range(50):
    m=(lo+hi)/2
    if frac(m)>0.01: lo=m
    else: hi=m
print(f"lost {' '.join('%.2f%%'%(100*l/T) for l in lost.values())}; longest {1e3*max(e-s for s,e in iv):.2f} ms; arrival p99 floor {lo*1e3:.3f} ms")
