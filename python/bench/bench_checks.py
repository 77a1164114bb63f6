"""The Python front benchmark's two checks beside its timings
(``bench_python.py`` reports them): the per-call overhead of a Python
model against the Rust engine with a no-op evolve, in process, and the
Nile filter's log-likelihood bits on 1, 2 and 4 workers."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any, Dict

EXAMPLES = str(Path(__file__).resolve().parents[1] / "examples")
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)

from nile_pf import NilePerParticle as Nile  # noqa: E402  (the per-state path)
from nile_pf import load_nile  # noqa: E402


class Noop:
    """A model whose evolve does nothing but return its state."""

    def evolve(self, x, i, rng):
        return [(x, None)]


def overhead(n: int = 2000, steps: int = 20) -> Dict[str, float]:
    """Per evolve call of a no-op model, in process: the Rust engine's; a
    Python model's through the public ``Engine.evolve_many`` (what a user
    pays: the inputs pickled, the outputs unpickled, the dict built); and
    through the native layer alone with the inputs pickled in advance.
    Best of three runs of each, interleaved."""
    import pickle

    import statepipe
    from statepipe import _native

    state, inp = pickle.dumps(1.0, 5), pickle.dumps(None, 5)
    rust = min(_native.bench_rust_noop(n, steps, state, inp) for _ in range(3)) / (n * steps)
    api, native = math.inf, math.inf
    for _ in range(3):
        with statepipe.Engine(Noop(), workers=0) as e:
            ids = e.reset([1.0] * n)
            t0 = time.perf_counter()
            for _s in range(steps):
                out = e.evolve_many({i: None for i in ids})
                ids = [kids[0][0] for kids in out.values()]
            api = min(api, time.perf_counter() - t0)
        with statepipe.Engine(Noop(), workers=0) as e:
            ids = e.reset([1.0] * n)
            inputs = [inp] * n
            t0 = time.perf_counter()
            for _s in range(steps):
                raw = e._native.evolve_many(ids, inputs)
                ids = [kids[0][0] for _, kids in raw]
            native = min(native, time.perf_counter() - t0)
    py, nat = api / (n * steps), native / (n * steps)
    return {
        "rust_us_per_call": rust * 1e6,
        "python_us_per_call": py * 1e6,
        "python_overhead_us": (py - rust) * 1e6,
        "native_layer_us_per_call": nat * 1e6,
        "native_layer_overhead_us": (nat - rust) * 1e6,
    }


def same_bits() -> Dict[str, Any]:
    """The Nile filter (2,000 particles, 8 islands) on 1, 2 and 4 workers:
    its log-likelihoods in hex, and whether they are the same bits."""
    import statepipe

    y = load_nile()
    r = {
        w: statepipe.particle_filter(Nile(), y, 2000, islands=8, seed=1, workers=w, placement="workers").loglik
        for w in (1, 2, 4)
    }
    return {"logliks": {str(w): v.hex() for w, v in r.items()}, "identical": len({v.hex() for v in r.values()}) == 1}
