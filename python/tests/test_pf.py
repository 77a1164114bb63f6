"""The particle filter against the exact Kalman likelihood: the vectorised
Nile model of the example, and a per-particle one (the same bits for any
number of workers and either placement)."""

import math

import numpy as np
import pytest

import statepipe
from nile_pf import Nile, NilePerParticle, kalman, load_nile


def _near_kalman(r, n, islands):
    y = load_nile()
    exact, means = kalman(y)
    assert exact == pytest.approx(-639.30, abs=0.01)
    assert r.particles == n and len(r.island_logliks) == islands
    assert math.isfinite(r.loglik_se) and r.loglik_se > 0
    assert abs(r.loglik - exact) < 3 * r.loglik_se, (r.loglik, r.loglik_se, exact)
    # The filtered means follow Kalman's closely.
    assert max(abs(a - b) for a, b in zip(r.filtered_means, means)) < 40


def test_vectorised_nile_within_three_standard_errors_of_kalman():
    r = statepipe.particle_filter(Nile(), load_nile(), 2000, islands=20, seed=3)
    assert r.placement == "in process (vectorised)"
    _near_kalman(r, 2000, 20)


def test_per_particle_nile_within_three_standard_errors_of_kalman():
    r = statepipe.particle_filter(NilePerParticle(), load_nile(), 1600, islands=8, seed=3, workers=2)
    _near_kalman(r, 1600, 8)


def test_vectorised_filter_is_reproducible():
    y = load_nile()[:30]
    a, b, c = (statepipe.particle_filter(Nile(), y, 400, islands=4, seed=s) for s in (5, 5, 6))
    assert a.loglik.hex() == b.loglik.hex() and a.filtered_means == b.filtered_means
    assert a.island_logliks == b.island_logliks
    assert a.loglik != c.loglik


def test_per_particle_same_bits_for_0_1_2_4_workers_and_either_placement():
    y = load_nile()[:25]
    m = NilePerParticle()
    runs = [statepipe.particle_filter(m, y, 240, islands=4, seed=11, workers=0)]
    runs += [statepipe.particle_filter(m, y, 240, islands=4, seed=11, workers=w, placement="workers") for w in (1, 2, 4)]
    runs += [statepipe.particle_filter(m, y, 240, islands=4, seed=11, workers=2)]
    for r in runs[1:]:
        assert r.loglik.hex() == runs[0].loglik.hex()
        assert r.island_logliks == runs[0].island_logliks
        assert r.filtered_means == runs[0].filtered_means
    assert runs[1].placement == "on 1 workers"


def test_systematic_rows_resample_each_row_as_one():
    g = np.random.default_rng(1)
    lw = g.normal(size=(3, 50))
    u = g.random(3)
    rows = statepipe.pf.systematic(lw, 50, u)
    for k in range(3):
        assert np.array_equal(rows[k], statepipe.pf.systematic(lw[k], 50, u[k]))
        assert rows[k].sum() == 50 and (rows[k] >= 0).all()


class Bad(Nile):
    def __init__(self, where):
        self.where = where

    def prior(self, rng, size):
        x = super().prior(rng, size)
        return x[:-1] if self.where == "prior" else x

    def transition(self, x, rng):
        x = super().transition(x, rng)
        return x.reshape(-1, 1) if self.where == "transition" else x

    def log_obs(self, x, y):
        lw = super().log_obs(x, y)
        return lw.sum() if self.where == "log_obs" else lw


@pytest.mark.parametrize("where", ["prior", "transition", "log_obs"])
def test_vectorised_wrong_shapes_are_clear_errors(where):
    with pytest.raises(ValueError, match=rf"the model's {where}\(.*\) returned shape"):
        statepipe.particle_filter(Bad(where), [1100.0, 1000.0], 40, islands=4)


def test_vectorised_model_refuses_workers():
    with pytest.raises(ValueError, match="runs in this process"):
        statepipe.particle_filter(Nile(), [1.0], 10, islands=2, workers=2)


def test_islands_must_divide_particles():
    with pytest.raises(ValueError, match="divide"):
        statepipe.particle_filter(Nile(), [1.0], 10, islands=3)


@pytest.mark.parametrize(
    "n, islands, says",
    [(0, 2, "each island needs at least one"), (10, 0, "at least 1"), (1, 2, "each island")],
)
def test_particles_and_islands_out_of_range_are_clear_errors(n, islands, says):
    for model in (Nile(), NilePerParticle()):
        with pytest.raises(ValueError, match=says):
            statepipe.particle_filter(model, [1.0], n, islands=islands)


def test_sv_example_tracks_the_simulated_volatility():
    from sv_pf import StochasticVolatility

    m = StochasticVolatility()
    x, y = m.simulate(40, 2)
    r = statepipe.particle_filter(m, y.tolist(), 400, islands=4, seed=2, workers=0)
    assert math.isfinite(r.loglik) and r.loglik_se > 0
    rms = math.sqrt(sum((a - b) ** 2 for a, b in zip(r.filtered_means, x)) / len(x))
    assert rms < m.sigma / math.sqrt(1 - m.phi**2)
