"""A stochastic-volatility model filtered by statepipe.

x_t = mu + phi (x_{t-1} - mu) + sigma eta_t,  y_t = exp(x_t / 2) eps_t,
eta, eps ~ N(0, 1), x_1 from the stationary law. The returns are simulated
from the model (numpy, seeded), so the filtered log-volatility can be
compared with the truth. The model is vectorised: its methods take and
return numpy arrays of all the particles.

    python python/examples/sv_pf.py [--particles N] [--islands R] [--steps T]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import statepipe


class StochasticVolatility:
    """The model over arrays of particles (``x``: every particle's
    log-volatility)."""

    vectorised = True

    def __init__(self, mu: float = -1.0, phi: float = 0.95, sigma: float = 0.25) -> None:
        self.mu, self.phi, self.sigma = mu, phi, sigma

    def prior(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.normal(self.mu, self.sigma / math.sqrt(1 - self.phi**2), size)

    def transition(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.mu + self.phi * (x - self.mu) + self.sigma * rng.standard_normal(x.shape)

    def log_obs(self, x: np.ndarray, y: float) -> np.ndarray:
        return -0.5 * (math.log(2 * math.pi) + x + y * y * np.exp(-x))

    def simulate(self, steps: int, seed: int) -> "tuple[np.ndarray, np.ndarray]":
        g = np.random.default_rng(seed)
        x = np.empty(steps)
        x[0] = self.mu + self.sigma / math.sqrt(1 - self.phi**2) * g.standard_normal()
        for t in range(1, steps):
            x[t] = self.mu + self.phi * (x[t - 1] - self.mu) + self.sigma * g.standard_normal()
        return x, np.exp(x / 2) * g.standard_normal(steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--particles", type=int, default=4000)
    ap.add_argument("--islands", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    model = StochasticVolatility()
    x, y = model.simulate(a.steps, a.seed)
    t0 = time.perf_counter()
    r = statepipe.particle_filter(model, y.tolist(), a.particles, islands=a.islands, seed=a.seed)
    dt = time.perf_counter() - t0
    err = np.asarray(r.filtered_means) - x
    print(f"{a.particles} particles, {a.steps} steps, {r.placement}: {dt:.3f} s")
    print(f"log-likelihood {r.loglik:.3f} ± {r.loglik_se:.3f}")
    print(f"filtered log-volatility vs the truth: rms error {math.sqrt(float(np.mean(err**2))):.3f} "
          f"(the latent's stationary sd is {model.sigma / math.sqrt(1 - model.phi**2):.3f})")


if __name__ == "__main__":
    main()
