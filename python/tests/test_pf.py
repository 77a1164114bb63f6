"""The particle filter against the exact Kalman likelihood, and the same
bits for any number of workers."""

import math

import pytest

import statepipe
from nile_pf import Nile, kalman, load_nile


def test_nile_within_three_standard_errors_of_kalman():
    y = load_nile()
    exact, means = kalman(y)
    assert exact == pytest.approx(-639.30, abs=0.01)
    r = statepipe.particle_filter(Nile(), y, 1600, islands=8, seed=3, workers=2)
    assert r.particles == 1600 and len(r.island_logliks) == 8
    assert math.isfinite(r.loglik_se) and r.loglik_se > 0
    assert abs(r.loglik - exact) < 3 * r.loglik_se, (r.loglik, r.loglik_se, exact)
    # The filtered means follow Kalman's closely.
    assert max(abs(a - b) for a, b in zip(r.filtered_means, means)) < 40


def test_same_bits_for_0_1_2_4_workers():
    y = load_nile()[:25]
    runs = [
        statepipe.particle_filter(Nile(), y, 240, islands=4, seed=11, workers=w)
        for w in (0, 1, 2, 4)
    ]
    for r in runs[1:]:
        assert r.loglik.hex() == runs[0].loglik.hex()
        assert r.island_logliks == runs[0].island_logliks
        assert r.filtered_means == runs[0].filtered_means


def test_islands_must_divide_particles():
    with pytest.raises(ValueError, match="divide"):
        statepipe.particle_filter(Nile(), [1.0], 10, islands=3)


def test_sv_example_tracks_the_simulated_volatility():
    from sv_pf import StochasticVolatility

    m = StochasticVolatility()
    x, y = m.simulate(40, 2)
    r = statepipe.particle_filter(m, y.tolist(), 400, islands=4, seed=2, workers=0)
    assert math.isfinite(r.loglik) and r.loglik_se > 0
    rms = math.sqrt(sum((a - b) ** 2 for a, b in zip(r.filtered_means, x)) / len(x))
    assert rms < m.sigma / math.sqrt(1 - m.phi**2)
