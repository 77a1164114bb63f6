"""Where a step's time goes on worker processes, for cheap Python models:
the master's CPU (the caller's Python driver plus the Rust master's
threads) and the workers' CPU, per state, over a run of steps.

Two workloads, neither sleeping, so overhead is all there is:

- ``nile``: the per-particle Nile bootstrap filter (2,000 states, one
  evolve call each, with ``expected_cost``), as ``statepipe.particle_filter``
  runs it;
- ``chunks``: the chunked filter of bench_python.py without its sleep (400
  states of 5 particles, numpy arrays in and out, with ``expected_cost``).

Prints one JSON line per run. ``--profile`` adds the master's top Python
functions (cProfile; the Rust master's threads are not in it).

    python python/bench/worker_overhead.py [--workers 2] [--steps 20] [--reps 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import sys
import time
from pathlib import Path
from typing import Any, List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import statepipe  # noqa: E402
from statepipe.pf import Bootstrap, _run  # noqa: E402


def _cpu(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def _data() -> List[float]:
    root = Path(__file__).resolve().parents[2]
    lines = (root / "data" / "nile.csv").read_text().splitlines()[1:]
    return [float(line.split(",")[1]) for line in lines if line.strip()]


class FastChunks:
    """bench_python's ChunkModel without its sleep (defined here, so it
    travels to the workers by value)."""

    def __init__(self, y: List[float]) -> None:
        self.y = y

    def expected_cost(self, inp: Any) -> float:
        return float(inp[1].sum()) + 0.25

    def evolve(self, states: Any, inp: Any, rng: Any) -> List[Any]:
        from bench_python import M0, P0, VAR_ETA, log_obs

        t, counts, c = inp
        g = np.random.default_rng([1, t, int(counts.sum()), len(counts)])
        k = int(counts.sum())
        if states is None:
            kids = M0 + np.sqrt(P0) * g.standard_normal(k)
        else:
            kids = np.repeat(states, counts) + np.sqrt(VAR_ETA) * g.standard_normal(k)
        return [(kids, log_obs(kids, self.y[t]))]


def run(workload: str, workers: int, steps: int, profile: bool) -> dict:
    import bench_python  # the benchmark's models
    from bench_python import Nile, chunked_filter

    y = _data()[:steps]
    if workload == "nile":
        e = statepipe.Engine(Bootstrap(Nile(), y), workers=workers, seed=1, placement="workers")
        states = 2000

        def go() -> None:
            _run(e, len(y), states, 20, 1)

    else:
        bench_python.STEPS = steps
        e = statepipe.Engine(FastChunks(y), workers=workers, seed=1, placement="workers")
        states = bench_python.PARTICLES // bench_python.CHUNK
        step = bench_python.engine_step(e)

        def go() -> None:
            chunked_filter(step, y, 1)

    try:
        prof = cProfile.Profile() if profile else None
        w0 = sum(_cpu(p) for p in e.pids())
        t0, c0 = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        go()
        if prof:
            prof.disable()
        wall, master = time.perf_counter() - t0, time.process_time() - c0
        wcpu = sum(_cpu(p) for p in e.pids()) - w0
    finally:
        e.close()
    n = states * steps
    r: dict[str, Any] = {
        "workload": workload, "workers": workers, "steps": steps, "states": states,
        "wall_ms_per_step": wall / steps * 1e3,
        "master_cpu_us_per_state": master / n * 1e6,
        "workers_cpu_us_per_state": wcpu / n * 1e6,
    }
    if prof:
        st = pstats.Stats(prof)
        rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:8]  # type: ignore[attr-defined]
        r["master_top_python"] = [
            {"fn": f"{k[0].split('/')[-1]}:{k[1]}({k[2]})", "tottime_us_per_state": v[2] / n * 1e6}
            for k, v in rows
        ]
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workloads", default="nile,chunks")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    print(json.dumps({"host": platform.node(), "cpus": os.cpu_count(), "load": os.getloadavg(),
                      "python": platform.python_version()}))
    for _ in range(a.reps):
        for w in a.workloads.split(","):
            print(json.dumps(run(w, a.workers, a.steps, a.profile)), flush=True)


if __name__ == "__main__":
    main()
