"""The bench's chunked filter on statepipe at W workers, each evolve call
timed by the worker (timed_chunk.py) and each step's start by the driver.

    mkdir -p /tmp/prof19 && PYTHONPATH=bench/results/python-run4-timeline:python/bench \
        target/bench-pyenv/bin/python bench/results/python-run4-timeline/drive.py 50
    python3 bench/results/python-run4-timeline/analyse.py
"""
import sys, time
import bench_python as b
import numpy as np
import statepipe
import timed_chunk

LOG = "/tmp/prof19"
y = b.load_nile()[: b.STEPS]
W = int(sys.argv[1]) if len(sys.argv) > 1 else 50
e = statepipe.Engine(timed_chunk.TimedChunk(y), workers=W, seed=1, placement="workers")
nchunks = b.PARTICLES // b.CHUNK
ids = e.reset([None] * nchunks)
counts = [np.ones(b.CHUNK, dtype=np.int64) for _ in range(nchunks)]
g = np.random.default_rng(1)
t0, evolve_s, driver_s = time.perf_counter(), 0.0, 0.0
for t in range(b.STEPS):
    a = time.perf_counter()
    with open(f"{LOG}/driver.log", "a") as f:
        f.write(f"{t} {time.time():.6f}\n")
    inputs = {i: (t, counts[c], c) for c, i in enumerate(ids)}
    b1 = time.perf_counter()
    out = e.evolve_many(inputs)
    c1 = time.perf_counter()
    parents = ids
    ids = [out[i][0][0] for i in ids]
    lws = [out[p][0][1] for p in parents]
    allw = np.concatenate(lws)
    cc = b.systematic(allw, b.PARTICLES, float(g.random()))
    counts = np.split(cc, np.cumsum([len(w) for w in lws])[:-1])
    d = time.perf_counter()
    evolve_s += c1 - b1
    driver_s += (b1 - a) + (d - c1)
    print(f"step {t}: evolve {1000*(c1-b1):.1f} ms, driver {1000*((b1-a)+(d-c1)):.1f} ms, "
          f"largest chunk {max(int(x.sum()) for x in counts)} children", flush=True)
print(f"wall {time.perf_counter()-t0:.2f} s; ideal {b.STEPS*b.PARTICLES*b.SLEEP_PER_CHILD/W:.2f} s; "
      f"evolve {evolve_s:.2f} s, driver {driver_s:.3f} s")
print(e.stats())
e.close()
