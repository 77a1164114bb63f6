"""Workers joining and leaving mid-run: ``Engine.add_workers``,
``Engine.retire_workers``, remote workers joining a ``listen=`` engine, and
SIGTERM to a worker (a graceful leave). Every run gives the bits of the
same run with no worker coming or going."""

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

import statepipe


class Walk:
    def evolve(self, x, n, rng):
        return [(x + rng.normal(), x) for _ in range(n)]


N = 200  # states: enough that a newcomer's share is worth moving at once


def _reference(steps, seed):
    """The fault-free run: every step's outputs and the final states."""
    with statepipe.Engine(Walk(), workers=0, seed=seed) as e:
        ids = e.reset([float(k) for k in range(N)])
        outs = []
        for _ in range(steps):
            out = e.evolve_many({i: 1 for i in ids})
            outs.append(out)
            ids = [c for kids in out.values() for c, _ in kids]
        return outs, e.fetch(ids)


def _wait_exits(e, n, deadline_s=60):
    """Waits for ``n`` of the engine's worker processes to exit; their
    ``{pid: code}``."""
    got = {}
    deadline = time.monotonic() + deadline_s
    while len(got) < n:
        got.update(e.exited_workers())
        assert time.monotonic() < deadline, f"{n} retired workers did not exit within {deadline_s} s: {got}"
        time.sleep(0.05)
    return got


def test_retiring_and_adding_workers_mid_run_changes_nothing():
    steps = 8
    want, want_states = _reference(steps, seed=4)
    with statepipe.Engine(Walk(), workers=3, placement="workers", seed=4) as e:
        ids = e.reset([float(k) for k in range(N)])
        first = set(e.pids())
        for step in range(steps):
            if step == 2:
                assert e.retire_workers(1) == [2]
                assert e.retire_workers([0]) == [0]
                assert e.staying_workers() == [1]
                codes = _wait_exits(e, 2)
                assert set(codes.values()) == {0}, f"a retired worker did not exit 0: {codes}"
                assert set(codes) <= first and len(e.pids()) == 1
                assert e.workers == 1 and e.placement == "on 1 workers"
            if step == 4:
                e.add_workers(2)
                assert e.staying_workers() == [1, 3, 4]
                assert e.workers == 3
                before = e.worker_stats()
            out = e.evolve_many({i: 1 for i in ids})
            assert out == want[step], f"step {step}"
            ids = [c for kids in out.values() for c, _ in kids]
            if step == 4:
                # The step right after they were admitted: each newcomer got
                # states (by the start-of-step rebalance or by stealing).
                after = e.worker_stats()
                for w in (3, 4):
                    assert after[w]["evolved"] > before[w]["evolved"], f"worker {w} got no work: {after}"
        assert e.fetch(ids) == want_states
        stats = e.worker_stats()
        assert [w["left"] for w in stats] == [1, 0, 1, 0, 0]
        assert len(e.pids()) == 3


def test_retire_refuses_what_it_cannot_do():
    with statepipe.Engine(Walk(), workers=2, placement="workers") as e:
        e.reset([0.0, 1.0])
        with pytest.raises(ValueError, match="retire from 1 to 1"):
            e.retire_workers(2)
        with pytest.raises(statepipe.StatepipeError, match="no worker 5"):
            e.retire_workers([5])
        with pytest.raises(statepipe.StatepipeError, match="keep at least one"):
            e.retire_workers([0, 1])
        assert e.staying_workers() == [0, 1]
    with statepipe.Engine(Walk(), workers=0) as e:
        with pytest.raises(statepipe.StatepipeError, match='placement="workers"'):
            e.retire_workers(1)
        with pytest.raises(statepipe.StatepipeError, match='placement="workers"'):
            e.add_workers(1)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(addr, secret):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), STATEPIPE_SECRET=secret)
    env.pop("STATEPIPE_CONNECT", None)
    return subprocess.Popen(
        [sys.executable, "-m", "statepipe.worker", "--connect", addr], env=env, stderr=subprocess.PIPE, text=True
    )


def test_sigterm_to_a_worker_is_a_graceful_leave_and_remote_workers_join_a_listening_engine():
    steps = 40
    want, _ = _reference(steps, seed=6)
    addr = f"127.0.0.1:{_free_port()}"
    workers = [_worker(addr, "s3cret"), _worker(addr, "s3cret")]
    try:
        with statepipe.Engine(Walk(), workers=2, listen=addr, secret="s3cret", seed=6, timeout=60) as e:
            ids = e.reset([float(k) for k in range(N)])
            deadline = time.monotonic() + 120
            for step in range(steps):
                if step == 2:
                    workers[0].send_signal(signal.SIGTERM)
                if step == 3:
                    workers.append(_worker(addr, "s3cret"))
                out = e.evolve_many({i: 1 for i in ids})
                assert out == want[step], f"step {step}"
                ids = [c for kids in out.values() for c, _ in kids]
                left = workers[0].poll() is not None
                joined = len(e.worker_stats()) == 3
                if left and joined:
                    break
                assert time.monotonic() < deadline, "the leave or the join did not happen within 120 s"
                time.sleep(0.1)  # a step of this model is short: give the joiner time
            else:
                pytest.fail(f"after {steps} steps: left {left}, joined {joined}")
            _, err = workers[0].communicate(timeout=60)
            assert workers[0].returncode == 0, f"the worker sent SIGTERM exited {workers[0].returncode}: {err}"
            assert e.fetch(ids) == _states_at(step, seed=6)
            # The first two joined in either order; the third joined last.
            left = [w["left"] for w in e.worker_stats()]
            assert sorted(left[:2]) == [0, 1] and left[2] == 0, left
            assert e.staying_workers() == [left.index(0), 2]
        for w in workers[1:]:
            assert w.wait(timeout=60) == 0
    finally:
        for w in workers:
            w.kill()


def _states_at(step, seed):
    """The fault-free run's states after step ``step`` (from 0)."""
    with statepipe.Engine(Walk(), workers=0, seed=seed) as e:
        ids = e.reset([float(k) for k in range(N)])
        for _ in range(step + 1):
            out = e.evolve_many({i: 1 for i in ids})
            ids = [c for kids in out.values() for c, _ in kids]
        return e.fetch(ids)
