"""Per-step lower bound and greedy longest-first schedule of the chunked filter at W workers (the same chunks, computed without sleeping)."""
import sys, heapq, math
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "python" / "bench"))
import bench_python as b
import numpy as np
b.SLEEP_PER_CHILD_SAVED = b.SLEEP_PER_CHILD
sleep = b.SLEEP_PER_CHILD
b.SLEEP_PER_CHILD = 0.0
y = b.load_nile()[: b.STEPS]
W = int(sys.argv[1]) if len(sys.argv) > 1 else 50
nchunks = b.PARTICLES // b.CHUNK
counts = [np.ones(b.CHUNK, dtype=np.int64) for _ in range(nchunks)]
states = [None] * nchunks
g = np.random.default_rng(1)
tot_lb = tot_lpt = tot_ideal = 0.0
for t in range(b.STEPS):
    ks = [int(c.sum()) for c in counts]
    costs = sorted((k * sleep for k in ks), reverse=True)
    ideal = sum(costs) / W
    lb = max(ideal, costs[0])
    heap = [0.0] * W
    for c in costs:
        m = heapq.heappop(heap); heapq.heappush(heap, m + c)
    lpt = max(heap)
    tot_lb += lb; tot_lpt += lpt; tot_ideal += ideal
    out = [b.evolve_chunk(states[c], counts[c], t, y[t], c) for c in range(nchunks)]
    states = [o[0] for o in out]
    lws = [o[1] for o in out]
    sizes = [len(w) for w in lws]
    allw = np.concatenate(lws)
    cc = b.systematic(allw, b.PARTICLES, float(g.random()))
    counts = np.split(cc, np.cumsum(sizes)[:-1])
    print(f"step {t}: ideal {1000*ideal:.0f} ms, largest chunk {1000*costs[0]:.0f} ms, bound {1000*lb:.0f}, LPT {1000*lpt:.0f}")
print(f"W={W}: ideal {tot_ideal:.2f} s, lower bound {tot_lb:.2f} s (efficiency at most {tot_ideal/tot_lb:.3f}), LPT schedule {tot_lpt:.2f} s (efficiency {tot_ideal/tot_lpt:.3f})")
