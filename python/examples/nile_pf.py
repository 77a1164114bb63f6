"""The Nile local-level model filtered by statepipe, in numpy.

y_t = x_t + eps, eps ~ N(0, 15099); x_{t+1} = x_t + eta, eta ~ N(0, 1469.1);
x_1 ~ N(1000, 10^5) (Durbin & Koopman's variances). The model is
vectorised: each method takes and returns a numpy array of all the
particles, so the filter's step is a few numpy calls in this process.
Prints the particle filter's log-likelihood with its standard error next to
the exact Kalman value.

    python python/examples/nile_pf.py [--particles N] [--islands R] [--seed S]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import List, Tuple

import numpy as np

import statepipe

VAR_EPS, VAR_ETA, M0, P0 = 15099.0, 1469.1, 1000.0, 1e5


def load_nile(path: "str | None" = None) -> List[float]:
    """The annual flow volumes of data/nile.csv (year,volume)."""
    if path is None:
        here = Path(__file__).resolve()
        for base in [here.parents[2], *here.parents]:
            p = base / "data" / "nile.csv"
            if p.exists():
                path = str(p)
                break
        else:
            raise FileNotFoundError("data/nile.csv not found above " + str(here))
    lines = Path(path).read_text().splitlines()[1:]
    return [float(line.split(",")[1]) for line in lines if line.strip()]


class Nile:
    """The local-level model as a vectorised statepipe state-space model:
    ``x`` is the array of every particle's level."""

    vectorised = True

    def prior(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.normal(M0, math.sqrt(P0), size)

    def transition(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return x + rng.normal(0.0, math.sqrt(VAR_ETA), x.shape)

    def log_obs(self, x: np.ndarray, y: float) -> np.ndarray:
        d = y - x
        return -0.5 * (math.log(2 * math.pi * VAR_EPS) + d * d / VAR_EPS)


class NilePerParticle:
    """The same model one particle at a time (a float each): the per-state
    path, which also runs on worker processes."""

    def prior(self, rng: np.random.Generator) -> float:
        return M0 + math.sqrt(P0) * rng.standard_normal()

    def transition(self, x: float, rng: np.random.Generator) -> float:
        return x + math.sqrt(VAR_ETA) * rng.standard_normal()

    def log_obs(self, x: float, y: float) -> float:
        d = y - x
        return -0.5 * (math.log(2 * math.pi * VAR_EPS) + d * d / VAR_EPS)


def kalman(y: List[float]) -> Tuple[float, List[float]]:
    """The exact log-likelihood and filtered means of the local-level model."""
    m, p, ll, means = M0, P0, 0.0, []
    for obs in y:
        f = p + VAR_EPS
        v = obs - m
        ll += -0.5 * (math.log(2 * math.pi * f) + v * v / f)
        k = p / f
        m, p = m + k * v, p * (1 - k)
        means.append(m)
        p += VAR_ETA
    return ll, means


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--particles", type=int, default=8000)
    ap.add_argument("--islands", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    y = load_nile()
    exact, _ = kalman(y)
    t0 = time.perf_counter()
    r = statepipe.particle_filter(Nile(), y, a.particles, islands=a.islands, seed=a.seed)
    dt = time.perf_counter() - t0
    z = (r.loglik - exact) / r.loglik_se
    print(f"particles {a.particles} ({a.islands} islands) {r.placement}: {dt:.3f} s")
    print(f"log-likelihood {r.loglik:.3f} ± {r.loglik_se:.3f}  (exact Kalman {exact:.3f}; {z:+.2f} se)")
    if abs(z) > 3:
        raise SystemExit("the filter is more than 3 standard errors from the exact value")


if __name__ == "__main__":
    main()
