"""The engine's operations, its random numbers, and every error a user can
meet: a raising model, a wrong return, an unpicklable model, a worker that
cannot import the model's module, a wrong secret, Ctrl-C."""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import statepipe


class Walk:
    def reset(self, rng):
        return 0.0

    def evolve(self, x, n, rng):
        return [(x + rng.normal(), x) for _ in range(n)]


class Fails:
    """Raises on the state whose value is `bad`."""

    def evolve(self, x, _inp, rng):
        if x == 3:
            raise ValueError(f"no good: {x}")
        return [(x + 1, x)]


class WrongReturn:
    def __init__(self, ret):
        self.ret = ret

    def evolve(self, x, _inp, rng):
        return self.ret


class NoDraws:
    def evolve(self, x, _inp, rng):
        return [(x, x)]


@pytest.fixture(
    params=[{"workers": 0}, {"workers": 2, "placement": "workers"}, {"workers": 2}],
    ids=["in-process", "2-workers", "2-auto"],
)
def workers(request):
    """The engine's placement arguments: in process, on 2 workers, or
    chosen by the first step (a model this cheap stays in process)."""
    return request.param


def test_reset_evolve_fetch_drop(workers):
    with statepipe.Engine(Walk(), **workers, seed=5) as e:
        ids = e.reset([1.0, 2.0, 3.0])
        assert len(set(ids)) == 3
        out = e.evolve_many({ids[0]: 2, ids[1]: 0, ids[2]: 1})
        assert [len(out[i]) for i in ids] == [2, 0, 1]
        assert [o for _, o in out[ids[0]]] == [1.0, 1.0]
        kids = [c for c, _ in out[ids[0]]] + [c for c, _ in out[ids[2]]]
        states = e.fetch(kids)
        assert all(isinstance(s, float) for s in states)
        e.drop(kids[:1])
        with pytest.raises(statepipe.StatepipeError, match="unknown state"):
            e.fetch(kids[:1])
        assert e.step == 1


def test_reset_with_a_count_uses_the_models_reset(workers):
    with statepipe.Engine(Walk(), **workers) as e:
        ids = e.reset(4)
        assert e.fetch(ids) == [0.0] * 4


def test_results_do_not_depend_on_workers_and_numpy_states_travel():
    class Arr:
        def evolve(self, x, _i, rng):
            return [(x + rng.standard_normal(3), float(x.sum()))]

    res = []
    for w in (0, 1, 3):
        with statepipe.Engine(Arr(), workers=w, seed=9, placement="workers" if w else "auto") as e:
            ids = e.reset([np.zeros(3) for _ in range(6)])
            for _ in range(3):
                out = e.evolve_many({i: None for i in ids})
                ids = [out[i][0][0] for i in ids]
            res.append(np.stack(e.fetch(ids)))
    assert all(np.array_equal(r, res[0]) for r in res)


def test_rng_is_a_numpy_generator_made_on_demand():
    seen = []

    class Peek:
        def evolve(self, x, _i, rng):
            seen.append((type(rng).__name__, isinstance(rng.generator, np.random.Generator), rng.words))
            return [(x, rng.integers(0, 1 << 30))]

    with statepipe.Engine(Peek(), workers=0, seed=1) as e:
        ids = e.reset([0, 0])
        out = e.evolve_many({i: None for i in ids})
    assert [s[:2] for s in seen] == [("Rng", True), ("Rng", True)]
    assert seen[0][2] != seen[1][2]
    assert out[ids[0]][0][1] != out[ids[1]][0][1]


def test_model_exception_names_state_step_and_traceback(workers):
    with statepipe.Engine(Fails(), **workers) as e:
        ids = e.reset([10, 11])
        e.evolve_many({i: None for i in ids})
        out = e.evolve_many({i: None for i in e.reset([0, 1])})
        assert len(out) == 2
        ids = e.reset([1, 2, 3, 4])
        with pytest.raises(statepipe.ModelError) as info:
            e.evolve_many({i: None for i in ids})
        err = info.value
        assert err.state == ids[2]
        assert err.step == 3
        assert "ValueError: no good: 3" in err.worker_traceback
        assert "in evolve" in err.worker_traceback
        assert f"state #{ids[2]:016x} at step 3" in str(err)
        # Nothing is lost: the failing state under its new id, unevolved,
        # and the others evolved, with their new ids and outputs.
        assert list(err.kept) == [ids[2]]
        assert e.fetch([err.kept[ids[2]]]) == [3]
        assert sorted(err.results) == sorted([ids[0], ids[1], ids[3]])
        assert [o for p in (ids[0], ids[1], ids[3]) for _, o in err.results[p]] == [1, 2, 4]
        children = [c for kids in err.results.values() for c, _ in kids]
        assert sorted(e.fetch(children)) == [2, 3, 5]
        # The worker was not dropped: the engine goes on.
        ids = e.reset([7])
        assert e.evolve_many({ids[0]: None})[ids[0]][0][1] == 7


@pytest.mark.parametrize(
    "ret, match",
    [(5, "not int"), ([(1, 2, 3)], "item 0 is \\(1, 2, 3\\)"), ([1], "item 0 is 1")],
)
def test_wrong_return_type_is_a_clear_model_error(workers, ret, match):
    with statepipe.Engine(WrongReturn(ret), **workers) as e:
        ids = e.reset([0])
        with pytest.raises(statepipe.ModelError, match="evolve must return a list of \\(state, output\\) pairs") as info:
            e.evolve_many({ids[0]: None})
        assert info.value.state == ids[0]
        assert "TypeError" in info.value.worker_traceback
        import re

        assert re.search(match, info.value.worker_traceback)


def test_a_model_without_evolve_is_refused():
    with pytest.raises(TypeError, match="evolve"):
        statepipe.Engine(object())


def test_unpicklable_model_is_a_clear_error():
    class Locked(NoDraws):
        def __init__(self):
            self.lock = threading.Lock()

    with pytest.raises(statepipe.ModelPickleError, match="cannot pickle the model 'Locked'"):
        statepipe.Engine(Locked(), workers=1)
    # In process nothing is pickled.
    with statepipe.Engine(Locked(), workers=0) as e:
        e.reset([1])


def test_worker_that_cannot_import_the_models_module(tmp_path, monkeypatch):
    mod = tmp_path / "private_model_mod.py"
    mod.write_text("class M:\n    def evolve(self, x, i, rng):\n        return [(x, x)]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import private_model_mod

    model = private_model_mod.M()
    sys.path.remove(str(tmp_path))
    with pytest.raises(statepipe.WorkerError) as info:
        statepipe.Engine(model, workers=1, timeout=30, placement="workers")
    msg = str(info.value)
    assert "cannot unpickle the model" in msg and "private_model_mod" in msg
    assert "ModuleNotFoundError" in msg


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(addr, secret):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("STATEPIPE_CONNECT", None)
    return subprocess.Popen(
        [sys.executable, "-m", "statepipe.worker", "--connect", addr],
        env=dict(env, STATEPIPE_SECRET=secret),
        stderr=subprocess.PIPE,
        text=True,
    )


def test_remote_worker_with_the_right_secret():
    addr = f"127.0.0.1:{_free_port()}"
    w = _worker(addr, "s3cret")
    try:
        with statepipe.Engine(Walk(), workers=1, listen=addr, secret="s3cret", seed=2, timeout=60) as e:
            ids = e.reset([0.0])
            out = e.evolve_many({ids[0]: 1})
        with statepipe.Engine(Walk(), workers=0, seed=2) as local:
            lid = local.reset([0.0])
            assert local.evolve_many({lid[0]: 1})[lid[0]][0][1] == out[ids[0]][0][1]
        assert w.wait(timeout=60) == 0
    finally:
        w.kill()


def test_wrong_secret_fails_on_both_sides():
    addr = f"127.0.0.1:{_free_port()}"
    w = _worker(addr, "wrong")
    try:
        # Long enough for the worker to start and try, however loaded the host.
        with pytest.raises(statepipe.StatepipeError, match="0 of 1 workers joined"):
            statepipe.Engine(Walk(), workers=1, listen=addr, secret="right", timeout=10)
        _, err = w.communicate(timeout=60)
        assert w.returncode == 1
        assert "wrong secret" in err
    finally:
        w.kill()


def test_listen_needs_a_secret(monkeypatch):
    monkeypatch.delenv("STATEPIPE_SECRET", raising=False)
    with pytest.raises(ValueError, match="secret"):
        statepipe.Engine(Walk(), workers=1, listen="127.0.0.1:1")


@pytest.mark.parametrize("timeout", [-1, 0, float("nan"), float("inf")])
def test_a_timeout_that_is_no_duration_is_refused(timeout):
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        statepipe.Engine(Walk(), workers=2, placement="workers", timeout=timeout)


def test_worker_command_without_a_master_says_what_to_give():
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATEPIPE_")}
    r = subprocess.run([sys.executable, "-m", "statepipe.worker"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--connect" in r.stderr


CTRL_C = textwrap.dedent(
    """
    import sys, time, statepipe
    class Slow:
        def evolve(self, x, i, rng):
            time.sleep(60)
            return [(x, x)]
    e = statepipe.Engine(Slow(), workers=2, placement="workers")
    try:
        ids = e.reset([0, 1, 2, 3])
        print(" ".join(map(str, e.pids())), flush=True)
        e.evolve_many({i: None for i in ids})
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
    """
)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie waiting to be reaped is dead too.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_ctrl_c_in_the_caller_stops_the_workers(tmp_path):
    script = tmp_path / "slow.py"
    script.write_text(CTRL_C)
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pids = [int(x) for x in p.stdout.readline().split()]
        assert len(pids) == 2
        time.sleep(1.0)  # let evolve_many start (not a timed assertion: any delay works)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 3, err
        assert "interrupted" in out
        for pid in pids:
            for _ in range(100):
                if not _alive(pid):
                    break
                time.sleep(0.1)
            assert not _alive(pid), f"worker {pid} outlived Ctrl-C"
    finally:
        p.kill()


CTRL_C_WAITING = textwrap.dedent(
    """
    import sys, statepipe
    class Walk:
        def evolve(self, x, i, rng):
            return [(x, x)]
    print("waiting", flush=True)
    try:
        # No worker ever comes; the wait is 600 s.
        statepipe.Engine(Walk(), workers=2, listen="127.0.0.1:0", secret="s", timeout=600)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
    """
)


def test_ctrl_c_while_waiting_for_remote_workers_interrupts_the_wait(tmp_path):
    script = tmp_path / "waiting.py"
    script.write_text(CTRL_C_WAITING)
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "waiting"
        time.sleep(1.0)  # let the wait start (not a timed assertion: any delay works)
        p.send_signal(signal.SIGINT)
        # Well within the 600 s wait: the wait itself was ended.
        out, err = p.communicate(timeout=120)
        assert p.returncode == 3, err
        assert "interrupted" in out
    finally:
        p.kill()


CTRL_C_REMOTE = textwrap.dedent(
    """
    import sys, time, statepipe
    class Slow:
        def evolve(self, x, i, rng):
            time.sleep(600)
            return [(x, x)]
    e = statepipe.Engine(Slow(), workers=1, listen=sys.argv[1], secret="s", timeout=60)
    try:
        ids = e.reset([0, 1])
        print("evolving", flush=True)
        e.evolve_many({i: None for i in ids})
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
    """
)


def test_ctrl_c_during_a_step_on_remote_workers_ends_it_and_lets_them_go(tmp_path):
    addr = f"127.0.0.1:{_free_port()}"
    script = tmp_path / "remote.py"
    script.write_text(CTRL_C_REMOTE)
    w = _worker(addr, "s")
    p = subprocess.Popen(
        [sys.executable, str(script), addr], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout.readline().strip() == "evolving", p.stderr.read()
        time.sleep(1.0)  # let the step start (not a timed assertion: any delay works)
        p.send_signal(signal.SIGINT)
        # Well within the worker's 600 s call: the step itself was ended.
        out, err = p.communicate(timeout=120)
        assert p.returncode == 3, err
        assert "interrupted" in out
        # The worker, let go in the middle of its call, exits saying so.
        _, werr = w.communicate(timeout=120)
        assert w.returncode != 0
        assert "master" in werr, werr
    finally:
        p.kill()
        w.kill()


class VecWalk:
    """Per state: ``evolve``; vectorised: ``evolve_batch``."""

    def evolve(self, x, n, rng):
        return [(x + rng.normal(), float(x)) for _ in range(n)]

    def evolve_batch(self, xs, ns, rng):
        parents = np.repeat(np.arange(len(xs)), ns)
        kids = xs[parents] + rng.normal(size=len(parents))
        return parents, kids, xs[parents]


def test_vectorised_in_process_engine():
    with statepipe.Engine(VecWalk(), workers=0, seed=4) as e:
        ids = e.reset(np.array([0.0, 10.0, 20.0]))
        out = e.evolve_many({ids[0]: 2, ids[1]: 0, ids[2]: 1})
        assert [len(out[i]) for i in ids] == [2, 0, 1]
        assert [o for _, o in out[ids[0]]] == [0.0, 0.0] and out[ids[2]][0][1] == 20.0
        kids = [c for c, _ in out[ids[0]] + out[ids[2]]]
        again = e.evolve_many({kids[0]: 1})
        assert len(again[kids[0]]) == 1
        assert len(e.fetch(kids[1:])) == 2
        e.drop(kids[1:2])
        with pytest.raises(statepipe.StatepipeError, match="unknown"):
            e.fetch(kids[1:2])
    # The same seed gives the same numbers.
    def run():
        with statepipe.Engine(VecWalk(), workers=0, seed=4) as e:
            ids = e.reset(np.zeros(5))
            out = e.evolve_many({i: 1 for i in ids})
            return e.fetch([out[i][0][0] for i in ids])
    assert np.array_equal(run(), run())
    # vectorised=False takes the per-state path.
    with statepipe.Engine(VecWalk(), workers=0, vectorised=False) as e:
        assert isinstance(e._native, statepipe._native.NativeEngine)


def test_the_package_docstring_example_runs():
    import doctest

    r = doctest.testmod(statepipe, verbose=False)
    assert r.attempted > 0 and r.failed == 0
