"""Where ``Engine(model, workers=N)`` runs: the first step in process, then
in process or on workers as the Rust ``Auto`` engine decides, with the same
bits either way; ``placement=`` forces a side."""

import logging
import time

import numpy as np
import pytest

import statepipe


class Cheap:
    """A walk whose call costs microseconds."""

    def evolve(self, x, _inp, rng):
        y = x + rng.standard_normal(2)
        return [(y, float(y.sum()))]


class Sleepy(Cheap):
    """The same walk, sleeping 20 ms a call: a step of 8 states takes at
    least 160 ms in process, against about 80 ms on 2 workers, whatever the
    machine's speed, so the engine moves (no timing is asserted)."""

    def evolve(self, x, _inp, rng):
        time.sleep(0.02)
        return super().evolve(x, _inp, rng)


def _walk(engine, steps=3, n=8):
    ids = engine.reset([np.zeros(2) for _ in range(n)])
    outs = []
    for _ in range(steps):
        out = engine.evolve_many({i: None for i in ids})
        outs.append([o for i in ids for _, o in out[i]])
        ids = [out[i][0][0] for i in ids]
    return np.stack(engine.fetch(ids)), outs


def test_a_cheap_model_stays_in_process():
    # Two steps of two states: the one step left must save the workers'
    # start (over 0.1 s), which two calls of microseconds cannot.
    with statepipe.Engine(Cheap(), workers=2, seed=1, steps=2) as e:
        assert e.placement.startswith("undecided")
        _walk(e, steps=2, n=2)
        assert e.placement.startswith("in process on 1 thread"), e.placement
        assert e.workers == 0 and e.pids() == [] and e.stats() == ""


def test_a_costly_model_moves_to_workers_with_the_same_bits(caplog):
    with caplog.at_level(logging.INFO, logger="statepipe"):
        with statepipe.Engine(Sleepy(), workers=2, seed=7) as e:
            moved = _walk(e)
            assert e.placement.startswith("on 2 workers"), e.placement
            assert e.workers == 2 and len(e.pids()) == 2
    assert any(r.getMessage().startswith("statepipe engine: on 2 workers") for r in caplog.records)
    with statepipe.Engine(Sleepy(), workers=0, seed=7) as e:
        here = _walk(e)
        assert e.placement == "in process"
    with statepipe.Engine(Sleepy(), workers=2, seed=7, placement="workers") as e:
        assert e.placement == "on 2 workers" and len(e.pids()) == 2
        there = _walk(e)
    for other in (here, there):
        assert np.array_equal(moved[0], other[0])
        assert moved[1] == other[1]


def test_placement_process_forces_in_process():
    with statepipe.Engine(Sleepy(), workers=2, placement="process") as e:
        _walk(e, steps=1, n=2)
        assert e.placement == "in process" and e.pids() == []


def test_bad_placement_arguments_are_refused():
    with pytest.raises(ValueError, match="placement must be one of"):
        statepipe.Engine(Cheap(), workers=2, placement="gpu")
    with pytest.raises(ValueError, match="needs workers >= 1"):
        statepipe.Engine(Cheap(), workers=0, placement="workers")
    with pytest.raises(ValueError, match="steps must be >= 0"):
        statepipe.Engine(Cheap(), workers=2, steps=-1)


def test_a_move_whose_workers_cannot_start_says_why_and_closes():
    e = statepipe.Engine(Sleepy(), workers=2, python="/nonexistent/python3")
    ids = e.reset([np.zeros(2) for _ in range(4)])
    with pytest.raises(statepipe.StatepipeError, match="/nonexistent/python3"):
        e.evolve_many({i: None for i in ids})
    with pytest.raises(statepipe.StatepipeError, match="closed"):
        e.evolve_many({i: None for i in ids})
    e.close()


class CostRaises(Cheap):
    def expected_cost(self, inp):
        if inp == "bad":
            raise ValueError("no cost for bad")
        return 1.0


def test_expected_cost_runs_in_the_caller_and_its_error_loses_nothing():
    with statepipe.Engine(CostRaises(), workers=1, placement="workers", seed=3) as e:
        ids = e.reset([np.zeros(2), np.ones(2)])
        with pytest.raises(ValueError, match="no cost for bad"):
            e.evolve_many({ids[0]: None, ids[1]: "bad"})
        # Nothing moved: both states are still there, and evolve.
        assert [s.tolist() for s in e.fetch(ids)] == [[0.0, 0.0], [1.0, 1.0]]
        out = e.evolve_many({i: None for i in ids})
        assert all(len(out[i]) == 1 for i in ids)
