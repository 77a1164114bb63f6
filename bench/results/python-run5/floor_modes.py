"""The floor of bench_python.py two ways: the chunked filter's chunks on W
forked processes with a longest-first schedule known in advance and no data
moved, and either one byte to and from each process per step (`step`, what
the bench's `floor` system does) or one byte to and from a process per call,
the next call sent when the last one's byte comes back (`call`: the least a
per-call protocol costs), or one message to and from each process per step
carrying its calls' inputs and outputs, pickled (`data`: the least an engine
that moves inputs and outputs costs; the states are still where the
schedule needs them, for free).

    target/bench-pyenv/bin/python bench/results/python-run5/floor_modes.py 50 step
    target/bench-pyenv/bin/python bench/results/python-run5/floor_modes.py 50 call
    target/bench-pyenv/bin/python bench/results/python-run5/floor_modes.py 50 data
"""
import pickle
import sys, os, time, heapq
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3] / "python" / "bench"))
import bench_python as b
import numpy as np

W = int(sys.argv[1]); MODE = sys.argv[2] if len(sys.argv) > 2 else "step"
y = b.load_nile()[: b.STEPS]
sleep = b.SLEEP_PER_CHILD
b.SLEEP_PER_CHILD = 0.0
nchunks = b.PARTICLES // b.CHUNK
counts = [np.ones(b.CHUNK, dtype=np.int64) for _ in range(nchunks)]
states = [None] * nchunks
g = np.random.default_rng(1)
jobs = []  # jobs[t][w] = list of (states, counts, t, y, c)
for t in range(b.STEPS):
    ks = [int(c.sum()) for c in counts]
    order = sorted(range(nchunks), key=lambda c: -ks[c])
    heap = [(0.0, w) for w in range(W)]
    per = [[] for _ in range(W)]
    for c in order:
        l, w = heapq.heappop(heap); per[w].append((states[c], counts[c], t, float(y[t]), c)); heapq.heappush(heap, (l + ks[c], w))
    jobs.append(per)
    out = [b.evolve_chunk(states[c], counts[c], t, y[t], c) for c in range(nchunks)]
    states = [o[0] for o in out]
    lws = [o[1] for o in out]
    allw = np.concatenate(lws)
    cc = b.systematic(allw, b.PARTICLES, float(g.random()))
    counts = np.split(cc, np.cumsum([len(w) for w in lws])[:-1])
b.SLEEP_PER_CHILD = sleep
def read_exact(fd, n):
    buf = b""
    while len(buf) < n:
        c = os.read(fd, n - len(buf))
        if not c:
            raise EOFError
        buf += c
    return buf


def read_msg(fd):
    return read_exact(fd, int.from_bytes(read_exact(fd, 4), "little"))


def write_msg(fd, m):
    os.write(fd, len(m).to_bytes(4, "little") + m)


pipes = []
for w in range(W):
    r1, w1 = os.pipe(); r2, w2 = os.pipe()
    if os.fork() == 0:
        os.close(w1); os.close(r2)
        for t in range(b.STEPS):
            if MODE == "data":
                ins = pickle.loads(read_msg(r1))
                outs = [b.evolve_chunk(j[0], cnt, tt, j[3], c)[1] for j, (cnt, tt, c) in zip(jobs[t][w], ins)]
                write_msg(w2, pickle.dumps(outs, 5))
            elif MODE == "step":
                os.read(r1, 1)
                for j in jobs[t][w]:
                    b.evolve_chunk(*j)
                os.write(w2, b"d")
            else:
                for j in jobs[t][w]:
                    os.read(r1, 1); b.evolve_chunk(*j); os.write(w2, b"d")
        os._exit(0)
    os.close(r1); os.close(w2)
    pipes.append((w1, r2))
time.sleep(1.0)
t0 = time.perf_counter()
import select
for t in range(b.STEPS):
    if MODE == "data":
        for w, (w1, r2) in enumerate(pipes):
            write_msg(w1, pickle.dumps([(j[1], j[2], j[4]) for j in jobs[t][w]], 5))
        lws = [pickle.loads(read_msg(r2)) for w1, r2 in pipes]
    elif MODE == "step":
        for w1, r2 in pipes: os.write(w1, b"g")
        for w1, r2 in pipes: os.read(r2, 1)
    else:  # one message per call, the next call sent when the previous ends (pipeline 1)
        left = {r2: len(jobs[t][w]) for w, (w1, r2) in enumerate(pipes)}
        wr = {r2: w1 for w1, r2 in pipes}
        for r2, n in left.items():
            if n: os.write(wr[r2], b"g")
        active = [r for r, n in left.items() if n]
        while active:
            rs, _, _ = select.select(active, [], [])
            for r in rs:
                os.read(r, 1); left[r] -= 1
                if left[r]: os.write(wr[r], b"g")
                else: active.remove(r)
wall = time.perf_counter() - t0
for _ in range(W): os.wait()
print(f"floor mode={MODE} W={W}: wall {wall:.3f} s, efficiency {4.8/wall:.3f}")
