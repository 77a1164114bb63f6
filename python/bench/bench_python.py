"""Python front benchmark: statepipe against Dask, Ray and `particles`.

The workload is the Nile-shaped bootstrap filter (2,000 particles, 20
steps, systematic resampling every step) whose propagation sleeps 6 ms per
child, i.e. 30 ms per batch of 5 states: each step is 12 s of work, so the
ideal wall time on W workers is 20 * 12 / W seconds. Every system runs the
same filter, the same data, the same sleep:

- statepipe: the same chunked filter as Dask and Ray below, each chunk
  of particles a state on ``Engine(workers=W)`` (one evolve call per
  chunk, kept on the workers);
- statepipe-pf: ``statepipe.particle_filter`` (one state and one evolve
  call per particle, 6 ms each: five times the calls of the others);
- Dask (distributed.LocalCluster, one single-threaded worker process per
  slot): the particles in chunks of 5 parents kept on the workers as
  futures; each step one task per chunk takes the chunk's future and its
  children counts and returns the new chunk (kept there) and its weights
  (gathered), as Dask's docs recommend for state that stays on workers;
- Ray, two idioms, the better one compared against: ``ray`` (actors): W
  actors, each holding the chunks assigned to it round-robin, called once
  per step with its chunks' counts (Ray's pattern for stateful workers:
  the schedule is fixed, nothing rebalances); ``ray-tasks``: one task per
  chunk per step over object references, each taking its chunk's
  reference and returning the new chunk (a reference, kept by Ray) and its
  weights (fetched), so Ray's scheduler balances the tasks as it does for
  any task graph (Ray's pattern for passing state between tasks);
- floor (not a peer: what this host allows): the same chunks on W
  forked processes with no engine at all. Each step's chunks are dealt
  longest first to the processes in advance (the filter is run once
  beforehand to know them), every process holds its chunks' states from
  the start, and a step is one byte to each process and one byte back;
  a process runs its chunks' evolve (the model's own code and sleep) in
  order. No system can beat it here: what it loses against the ideal is
  the workload's imbalance and the model's CPU time on this host's CPUs;
- particles: its SMC driver (``particles.SMC``, bootstrap Feynman-Kac,
  systematic resampling) with the transition mapped over chunks of 5 on a
  ``multiprocessing.Pool`` of W processes (the states go back and forth
  every step: `particles` keeps them in the driver).

It reports, per system and worker count, the wall time of the filter
(cluster start excluded, reported apart), the efficiency (ideal / wall)
and the overhead per step ((wall - ideal) / steps), as a table and JSON.
It also measures the per-call overhead of a Python model against the Rust
engine with a no-op evolve (in process): through the public
``Engine.evolve_many`` a user calls (inputs pickled, outputs unpickled),
and through the native layer alone with inputs pickled in advance; and it
checks that the Nile filter
gives the same log-likelihood bits on 1, 2 and 4 workers.

    python python/bench/bench_python.py [--workers 10,50] [--reps 1] [--out DIR]

Peers missing from the environment are reported as skipped, with the pip
command that installs them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

import numpy as np

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "examples"))

from nile_pf import M0, P0, VAR_EPS, VAR_ETA, load_nile  # noqa: E402
from nile_pf import NilePerParticle as Nile  # noqa: E402  (the per-state path)
from statepipe.pf import systematic  # noqa: E402  (the package's own resampling, for every system)

from bench_checks import overhead, same_bits  # noqa: E402  (beside this file)

PARTICLES, STEPS, CHUNK = 2000, 20, 5
SLEEP_PER_CHILD = 0.030 / CHUNK


# -- the host's CPU time ------------------------------------------------------
def host_busy_s() -> float:
    """CPU-seconds every CPU of the host has spent not idle since boot
    (/proc/stat: user, nice, system, irq, softirq, steal); NaN elsewhere.
    Its change over a run, divided by the CPU count, is the shortest wall
    time the host's CPUs allow for the work done in it."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return math.nan
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + (v[7] if len(v) > 7 else 0)
    return busy / os.sysconf("SC_CLK_TCK")


def timed(run: Callable[[], Any]) -> "tuple[Any, float, float]":
    """``run()``'s result, its wall seconds and the host's busy CPU-seconds
    over it (see :func:`host_busy_s`)."""
    t0, b0 = time.perf_counter(), host_busy_s()
    r = run()
    return r, time.perf_counter() - t0, host_busy_s() - b0


def model_cpu_per_call(calls: int = 200) -> float:
    """CPU seconds of one chunk evolve of the workload alone (its sleep
    excluded), in this process: what every system pays per call."""
    y = load_nile()[:STEPS]
    states = np.full(CHUNK, 1000.0)
    counts = np.ones(CHUNK, dtype=np.int64)
    global SLEEP_PER_CHILD
    saved, SLEEP_PER_CHILD = SLEEP_PER_CHILD, 0.0
    try:
        c0 = time.process_time()
        for i in range(calls):
            evolve_chunk(states, counts, i % STEPS, y[i % STEPS], i)
        return (time.process_time() - c0) / calls
    finally:
        SLEEP_PER_CHILD = saved


# -- the workload, shared by every system -------------------------------------
def log_obs(x: np.ndarray, y: float) -> np.ndarray:
    d = y - x
    return -0.5 * (math.log(2 * math.pi * VAR_EPS) + d * d / VAR_EPS)


def evolve_chunk(states: "np.ndarray | None", counts: np.ndarray, t: int, y: float, seed: int):
    """Children of a chunk of particles (None: from the prior) and their
    log-weights; sleeps 6 ms per child."""
    g = np.random.default_rng([seed, t, int(counts.sum()), len(counts)])
    k = int(counts.sum())
    if states is None:
        kids = M0 + math.sqrt(P0) * g.standard_normal(k)
    else:
        kids = np.repeat(states, counts) + math.sqrt(VAR_ETA) * g.standard_normal(k)
    time.sleep(SLEEP_PER_CHILD * k)
    return kids, log_obs(kids, y)


def lse(v: np.ndarray) -> float:
    m = float(np.max(v))
    return m + math.log(float(np.sum(np.exp(v - m))))


def chunked_filter(step_fn: Callable[[int, List[np.ndarray]], List[np.ndarray]], y: List[float], seed: int) -> float:
    """The driver shared by Dask and Ray: chunks of CHUNK parents at t = 0;
    each chunk's children stay in the chunk. `step_fn(t, counts per chunk)`
    evolves every chunk and returns its children's log-weights."""
    nchunks = PARTICLES // CHUNK
    counts = [np.ones(CHUNK, dtype=np.int64) for _ in range(nchunks)]
    loglik = 0.0
    g = np.random.default_rng(seed)
    for t in range(STEPS):
        lws = step_fn(t, counts)
        sizes = [len(w) for w in lws]
        allw = np.concatenate(lws)
        loglik += lse(allw) - math.log(PARTICLES)
        c = systematic(allw, PARTICLES, float(g.random()))
        counts = np.split(c, np.cumsum(sizes)[:-1])
    return loglik


# -- statepipe ----------------------------------------------------------------
class SleepyNile(Nile):
    def transition(self, x, rng):  # type: ignore[override]
        time.sleep(SLEEP_PER_CHILD)
        return super().transition(x, rng)

    def prior(self, rng):  # type: ignore[override]
        time.sleep(SLEEP_PER_CHILD)
        return super().prior(rng)


def run_statepipe(w: int, y: List[float]) -> Dict[str, Any]:
    import statepipe

    t0 = time.perf_counter()
    e = statepipe.Engine(statepipe.pf.Bootstrap(SleepyNile(), y), workers=w, seed=1, placement="workers")
    start = time.perf_counter() - t0
    try:
        r, wall, busy = timed(lambda: statepipe.particle_filter(SleepyNile(), y, PARTICLES, islands=1, seed=1, engine=e))
    finally:
        e.close()
    return {"wall_s": wall, "host_busy_s": busy, "start_s": start, "loglik": r.loglik}


class ChunkModel:
    """The chunked filter's evolve for statepipe: a state is a chunk of
    particles (None before the prior), the input its children counts, the
    output the children's log-weights; the chunk's children are its one
    child state."""

    def __init__(self, y: List[float]) -> None:
        self.y = y

    def expected_cost(self, inp) -> float:
        return float(inp[1].sum()) + 0.25

    def evolve(self, states, inp, rng):
        t, counts, c = inp
        kids, lw = evolve_chunk(states, counts, t, self.y[t], c)
        return [(kids, lw)]


def engine_step(e: Any) -> Callable[[int, List[np.ndarray]], List[np.ndarray]]:
    """The chunked filter's step on a statepipe engine of :class:`ChunkModel`
    (or one with its inputs and outputs): resets PARTICLES / CHUNK chunks,
    then each call evolves every chunk and returns its children's weights."""
    ids = e.reset([None] * (PARTICLES // CHUNK))

    def step(t: int, counts: List[np.ndarray]) -> List[np.ndarray]:
        nonlocal ids
        parents = ids
        out = e.evolve_many({i: (t, counts[c], c) for c, i in enumerate(ids)})
        ids = [out[i][0][0] for i in ids]
        return [out[p][0][1] for p in parents]

    return step


def run_statepipe_chunks(w: int, y: List[float]) -> Dict[str, Any]:
    import statepipe

    t0 = time.perf_counter()
    e = statepipe.Engine(ChunkModel(y), workers=w, seed=1, placement="workers")
    start = time.perf_counter() - t0
    try:
        step = engine_step(e)
        ll, wall, busy = timed(lambda: chunked_filter(step, y, 1))
    finally:
        e.close()
    return {"wall_s": wall, "host_busy_s": busy, "start_s": start, "loglik": ll}


# -- Dask ---------------------------------------------------------------------
def _dask_step(chunk, counts, t, y, seed):
    states = None if chunk is None else chunk[0]
    return evolve_chunk(states, counts, t, y, seed)


def _weights(chunk):
    return chunk[1]


def run_dask(w: int, y: List[float]) -> Dict[str, Any]:
    from distributed import Client, LocalCluster

    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    start = time.perf_counter() - t0
    try:
        futs: List[Any] = [None] * (PARTICLES // CHUNK)

        def step(t: int, counts: List[np.ndarray]) -> List[np.ndarray]:
            for c, cnt in enumerate(counts):
                futs[c] = client.submit(_dask_step, futs[c], cnt, t, y[t], c, pure=False)
            return client.gather([client.submit(_weights, f, pure=False) for f in futs])

        ll, wall, busy = timed(lambda: chunked_filter(step, y, 1))
    finally:
        client.close()
        cluster.close()
    return {"wall_s": wall, "host_busy_s": busy, "start_s": start, "loglik": ll}


# -- Ray ----------------------------------------------------------------------
def run_ray(w: int, y: List[float]) -> Dict[str, Any]:
    import ray

    @ray.remote(num_cpus=0)
    class Shard:
        def __init__(self) -> None:
            self.chunks: Dict[int, Any] = {}

        def step(self, t: int, yt: float, counts: Dict[int, np.ndarray]) -> Dict[int, np.ndarray]:
            out = {}
            for c, cnt in counts.items():
                kids, lw = evolve_chunk(self.chunks.get(c), cnt, t, yt, c)
                self.chunks[c] = kids
                out[c] = lw
            return out

    t0 = time.perf_counter()
    ray.init(num_cpus=w, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    shards = [Shard.remote() for _ in range(w)]
    ray.get([s.__ray_ready__.remote() for s in shards])
    start = time.perf_counter() - t0
    try:
        nchunks = PARTICLES // CHUNK

        def step(t: int, counts: List[np.ndarray]) -> List[np.ndarray]:
            calls = [
                shards[k].step.remote(t, y[t], {c: counts[c] for c in range(k, nchunks, w)}) for k in range(w)
            ]
            merged: Dict[int, np.ndarray] = {}
            for d in ray.get(calls):
                merged.update(d)
            return [merged[c] for c in range(nchunks)]

        ll, wall, busy = timed(lambda: chunked_filter(step, y, 1))
    finally:
        ray.shutdown()
    return {"wall_s": wall, "host_busy_s": busy, "start_s": start, "loglik": ll}


def _ray_warm() -> None:
    time.sleep(0.5)


def _ray_chunk(chunk, counts, t, y, seed):
    """The chunk's step as a Ray task: (the new chunk, its weights)."""
    return evolve_chunk(chunk, counts, t, y, seed)


def run_ray_tasks(w: int, y: List[float]) -> Dict[str, Any]:
    import ray

    # num_cpus=1 per task on a cluster of w CPUs: w tasks at a time.
    step_task = ray.remote(num_returns=2)(_ray_chunk)
    t0 = time.perf_counter()
    ray.init(num_cpus=w, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    # Start the w worker processes before the clock, as the actors' run does:
    # w tasks that overlap, so each needs a worker of its own.
    ray.get([ray.remote(_ray_warm).remote() for _ in range(w)])
    start = time.perf_counter() - t0
    try:
        chunks: List[Any] = [None] * (PARTICLES // CHUNK)

        def step(t: int, counts: List[np.ndarray]) -> List[np.ndarray]:
            weights = []
            for c, cnt in enumerate(counts):
                chunks[c], lw = step_task.remote(chunks[c], cnt, t, y[t], c)
                weights.append(lw)
            return ray.get(weights)

        ll, wall, busy = timed(lambda: chunked_filter(step, y, 1))
    finally:
        ray.shutdown()
    return {"wall_s": wall, "host_busy_s": busy, "start_s": start, "loglik": ll}


# -- particles ----------------------------------------------------------------
_POOL: Any = None


def _transition_chunk(args):
    xp, seed = args
    g = np.random.default_rng(seed)
    time.sleep(SLEEP_PER_CHILD * len(xp))
    return xp + math.sqrt(VAR_ETA) * g.standard_normal(len(xp))


def _prior_chunk(args):
    n, seed = args
    g = np.random.default_rng(seed)
    time.sleep(SLEEP_PER_CHILD * n)
    return M0 + math.sqrt(P0) * g.standard_normal(n)


def run_particles(w: int, y: List[float]) -> Dict[str, Any]:
    import multiprocessing as mp

    import particles
    from particles import distributions as dists
    from particles import state_space_models as ssm

    class PooledLocalLevel(ssm.StateSpaceModel):
        def PX0(self):
            return dists.Normal(loc=M0, scale=math.sqrt(P0))

        def PX(self, t, xp):
            return dists.Normal(loc=xp, scale=math.sqrt(VAR_ETA))

        def PY(self, t, xp, x):
            return dists.Normal(loc=x, scale=math.sqrt(VAR_EPS))

    class PooledBootstrap(ssm.Bootstrap):
        """The bootstrap filter with the transition mapped over chunks of
        CHUNK particles on the pool (the prior too)."""

        def M0(self, N):
            parts = _POOL.map(_prior_chunk, [(min(CHUNK, N - i), i) for i in range(0, N, CHUNK)])
            return np.concatenate(parts)

        def M(self, t, xp):
            parts = _POOL.map(_transition_chunk, [(xp[i:i + CHUNK], 1000 * t + i) for i in range(0, len(xp), CHUNK)])
            return np.concatenate(parts)

    global _POOL
    t0 = time.perf_counter()
    _POOL = mp.get_context("fork").Pool(w)
    _POOL.map(abs, range(w))
    start = time.perf_counter() - t0
    try:
        fk = PooledBootstrap(ssm=PooledLocalLevel(), data=np.asarray(y))
        alg = particles.SMC(fk=fk, N=PARTICLES, resampling="systematic", ESSrmin=1.0, store_history=False)
        _, wall, busy = timed(alg.run)
    finally:
        _POOL.terminate()
        _POOL = None
    return {"wall_s": wall, "host_busy_s": busy, "start_s": start, "loglik": float(alg.logLt)}


# -- the floor -----------------------------------------------------------------
def run_floor(w: int, y: List[float]) -> Dict[str, Any]:
    """The filter's chunks on `w` forked processes with the schedule known
    in advance and no data moved (see the module's docstring)."""
    import heapq

    global SLEEP_PER_CHILD
    nchunks = PARTICLES // CHUNK
    states: List[Any] = [None] * nchunks
    # jobs[t][k]: process k's calls of step t, longest first.
    jobs: List[List[List[tuple]]] = []

    def record(t: int, counts: List[np.ndarray]) -> List[np.ndarray]:
        """One step of the filter, run here, its calls dealt to the processes."""
        ks = [int(c.sum()) for c in counts]
        loads = [(0, k) for k in range(w)]
        per: List[List[tuple]] = [[] for _ in range(w)]
        for c in sorted(range(nchunks), key=lambda c: (-ks[c], c)):
            load, k = heapq.heappop(loads)
            per[k].append((states[c], counts[c], t, y[t], c))
            heapq.heappush(loads, (load + ks[c], k))
        jobs.append(per)
        out = [evolve_chunk(states[c], counts[c], t, y[t], c) for c in range(nchunks)]
        states[:] = [o[0] for o in out]
        return [o[1] for o in out]

    saved, SLEEP_PER_CHILD = SLEEP_PER_CHILD, 0.0
    try:
        loglik = chunked_filter(record, y, 1)
    finally:
        SLEEP_PER_CHILD = saved
    t0 = time.perf_counter()
    pipes, pids = [], []
    for k in range(w):
        go_r, go_w = os.pipe()
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the process: its calls, step by step
            code = 0
            try:
                os.close(go_w)
                os.close(done_r)
                for t in range(STEPS):
                    if os.read(go_r, 1) != b"g":
                        break
                    for job in jobs[t][k]:
                        evolve_chunk(*job)
                    os.write(done_w, b"d")
            except BaseException:  # noqa: BLE001 - the parent sees the pipe close
                code = 1
            os._exit(code)
        os.close(go_r)
        os.close(done_w)
        pipes.append((go_w, done_r))
        pids.append(pid)
    start = time.perf_counter() - t0

    def run() -> None:
        for t in range(STEPS):
            for go, _ in pipes:
                os.write(go, b"g")
            for _, done in pipes:
                if os.read(done, 1) != b"d":
                    raise RuntimeError(f"a floor process died in step {t}")

    try:
        _, wall, busy = timed(run)
    finally:
        for go, done in pipes:
            os.close(go)
            os.close(done)
        for pid in pids:
            os.waitpid(pid, 0)
    return {"wall_s": wall, "host_busy_s": busy, "start_s": start, "loglik": loglik}


SYSTEMS: Dict[str, Callable[[int, List[float]], Dict[str, Any]]] = {
    "statepipe": run_statepipe_chunks,
    "statepipe-pf": run_statepipe,
    "dask": run_dask,
    "ray": run_ray,
    "ray-tasks": run_ray_tasks,
    "particles": run_particles,
    "floor": run_floor,
}
PIP = {"dask": "distributed==2026.8.0", "ray": "ray==2.60.0", "ray-tasks": "ray==2.60.0", "particles": "particles==0.4"}
IMPORT = {
    "dask": "distributed", "ray": "ray", "ray-tasks": "ray", "particles": "particles", "statepipe": "statepipe",
    "statepipe-pf": "statepipe", "floor": "numpy",
}


def run_one(system: str, w: int, budget: float) -> Dict[str, Any]:
    """One run in a process of its own (a peer's runtime never outlives its
    run), stopped after `budget` seconds."""
    import subprocess

    try:
        p = subprocess.run(
            [sys.executable, str(HERE), "--one", system, str(w)],
            capture_output=True, text=True, timeout=budget,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"over budget: stopped after {budget:.0f} s", "over_budget_s": budget}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"error": f"exit {p.returncode}: {p.stderr.strip()[-400:]}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", default="10,50")
    ap.add_argument("--systems", default="statepipe,statepipe-pf,dask,ray,ray-tasks,particles,floor")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--out", help="directory for results.json and table.txt")
    ap.add_argument("--skip-checks", action="store_true", help="skip the overhead and determinism measurements")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds one run may take before it is stopped and recorded as over budget")
    ap.add_argument("--one", nargs=2, metavar=("SYSTEM", "WORKERS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        # From this file imported as a module, not as __main__: the task
        # functions and models then pickle by reference, defined in an
        # importable module as Dask's and Ray's docs recommend, rather than
        # by value with their globals.
        import bench_python as module

        r = module.SYSTEMS[a.one[0]](int(a.one[1]), load_nile()[:STEPS])
        print("RESULT " + json.dumps(r), flush=True)
        return
    load = os.getloadavg()
    host = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": load,
    }
    print(f"host: {host}")
    if load[0] > (os.cpu_count() or 1):
        print(f"WARNING: load average {load[0]:.1f} above the CPU count: wall times are inflated")
    systems = []
    for s in a.systems.split(","):
        try:
            __import__(IMPORT[s])
            systems.append(s)
        except ImportError as e:
            print(f"SKIPPED {s}: {e}; install it with: pip install {PIP.get(s, s)}")
    workers = [int(w) for w in a.workers.split(",")]
    results: Dict[str, Any] = {"host": host, "particles": PARTICLES, "steps": STEPS, "sleep_per_child_s": SLEEP_PER_CHILD, "runs": []}
    # Interleaved: each repetition runs every system at every worker count.
    for rep in range(a.reps):
        for w in workers:
            for s in systems:
                print(f"rep {rep} {s} on {w} workers ...", flush=True)
                r = run_one(s, w, a.budget)
                r.update(system=s, workers=w, rep=rep)
                print(f"  {r}", flush=True)
                results["runs"].append(r)
    rows = []
    for w in workers:
        ideal = STEPS * PARTICLES * SLEEP_PER_CHILD / w
        for s in systems:
            runs = [r for r in results["runs"] if r["system"] == s and r["workers"] == w]
            walls = [r["wall_s"] for r in runs if "wall_s" in r]
            if not walls:
                over = [r["over_budget_s"] for r in runs if "over_budget_s" in r]
                err = runs[-1].get("error", "no run") if runs else "no run"
                if over:
                    err += f" (efficiency < {ideal / max(over):.3f})"
                rows.append({"system": s, "workers": w, "error": err})
                continue
            med = statistics.median(walls)
            busy = [r["host_busy_s"] for r in runs if "host_busy_s" in r]
            cpus = os.cpu_count() or 1
            busy_med = statistics.median(busy) if busy else math.nan
            rows.append({
                "system": s, "workers": w, "ideal_s": ideal, "wall_s_median": med,
                "wall_s_min": min(walls), "wall_s_max": max(walls), "reps": len(walls),
                "efficiency": ideal / med, "overhead_per_step_ms": (med - ideal) / STEPS * 1e3,
                # The host's CPUs were busy this share of the run; at ~1 the
                # run was CPU-bound and the wall time cannot be below
                # host_busy_s / cpus on this host.
                "host_busy_s_median": busy_med, "host_busy_share": busy_med / (med * cpus),
            })
    results["summary"] = rows
    if not a.skip_checks:
        results["overhead"] = overhead()
        results["same_bits_1_2_4_workers"] = same_bits()
    results["model_cpu_s_per_call"] = model_cpu_per_call()
    lines = [f"{'system':<12} {'workers':>7} {'ideal s':>8} {'wall s':>8} {'min-max':>13} {'eff':>6} {'ovh/step ms':>12} {'CPUs busy':>9}"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['system']:<10} {r['workers']:>7} {r['error']}")
            continue
        lines.append(
            f"{r['system']:<12} {r['workers']:>7} {r['ideal_s']:>8.2f} {r['wall_s_median']:>8.2f} "
            f"{r['wall_s_min']:>6.2f}-{r['wall_s_max']:<6.2f} {r['efficiency']:>6.3f} {r['overhead_per_step_ms']:>12.1f}"
            f" {100 * r['host_busy_share']:>8.0f}%"
        )
    cpus = os.cpu_count() or 1
    per_call = results["model_cpu_s_per_call"]
    model_floor = STEPS * (PARTICLES // CHUNK) * per_call / cpus
    lines.append(
        f"the model alone: {per_call * 1e3:.3f} ms CPU per chunk call (its sleep excluded), "
        f"{model_floor:.2f} s of the {cpus} CPUs per run; 'CPUs busy': the host's CPUs' busy share "
        f"during the filter (near 100%: CPU-bound here, so the wall time is set by the CPUs, not the sleeps)"
    )
    for w in workers:
        sp = next((r for r in rows if r["system"] == "statepipe" and r["workers"] == w and "error" not in r), None)
        peers = [r for r in rows if r["system"] in ("dask", "ray", "ray-tasks") and r["workers"] == w and "error" not in r]
        if sp and peers:
            best = min(peers, key=lambda r: r["wall_s_median"])
            lines.append(f"{w} workers: statepipe is {best['wall_s_median'] / sp['wall_s_median']:.2f}x the speed of {best['system']}")
        fl = next((r for r in rows if r["system"] == "floor" and r["workers"] == w and "error" not in r), None)
        if fl and sp:
            lines.append(
                f"{w} workers: the floor's efficiency is {fl['efficiency']:.3f} (no engine beats it on this host); "
                f"statepipe reaches {sp['efficiency'] / fl['efficiency']:.3f} of it"
                + (f"; the floor is {best['wall_s_median'] / fl['wall_s_median']:.2f}x the speed of {best['system']}"
                   if peers else "")
            )
    if "overhead" in results:
        o = results["overhead"]
        lines.append(
            f"per evolve call, in process: Rust {o['rust_us_per_call']:.2f} us, a Python model through "
            f"Engine.evolve_many {o['python_us_per_call']:.2f} us (overhead {o['python_overhead_us']:.2f} us); "
            f"through the native layer, inputs pickled in advance, {o['native_layer_us_per_call']:.2f} us "
            f"(overhead {o['native_layer_overhead_us']:.2f} us)"
        )
        b = results["same_bits_1_2_4_workers"]
        lines.append(f"Nile log-likelihood on 1, 2, 4 workers identical: {b['identical']} ({b['logliks']['1']})")
    lines.append(f"load average at the end: {os.getloadavg()}")
    table = "\n".join(lines)
    print(table)
    if a.out:
        out = Path(a.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
        (out / "table.txt").write_text(table + "\n")


if __name__ == "__main__":
    main()
