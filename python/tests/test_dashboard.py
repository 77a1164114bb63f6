"""The live dashboard of an engine and of the particle filter
(``dashboard="HOST:PORT"``): its URL, the JSON snapshot and the Prometheus
metrics it serves while the run goes on, its token, its errors, and that it
stops serving when the engine closes. No test depends on timing."""

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

import statepipe
from statepipe.pf import Bootstrap

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:  # pragma: no cover - the test venv installs it
    text_string_to_metric_families = None

needs_prometheus = pytest.mark.skipif(
    text_string_to_metric_families is None,
    reason="prometheus_client is not installed (pip install prometheus-client==0.23.1) to parse /metrics",
)

ANY = "127.0.0.1:0"


@pytest.fixture(autouse=True)
def _no_token(monkeypatch):
    """A token in the caller's environment would make every request 401."""
    monkeypatch.delenv("STATEPIPE_DASHBOARD_TOKEN", raising=False)


class Walk:
    def reset(self, rng):
        return 0.0

    def evolve(self, x, n, rng):
        return [(x + rng.normal(), x) for _ in range(n)]


class WalkSSM:
    """A random walk observed with unit noise, one particle at a time."""

    def prior(self, rng):
        return rng.normal()

    def transition(self, x, rng):
        return x + rng.normal()

    def log_obs(self, x, y):
        return -0.5 * (y - x) ** 2


class VectorisedWalkSSM:
    vectorised = True

    def prior(self, rng, size):
        return rng.normal(0.0, 1.0, size)

    def transition(self, x, rng):
        return x + rng.normal(0.0, 1.0, x.shape)

    def log_obs(self, x, y):
        return -0.5 * (y - x) ** 2


DATA = [0.1 * k for k in range(8)]


def get(url, path, headers=None):
    req = urllib.request.Request(url.rstrip("/") + path, headers=headers or {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, r.headers.get("content-type", ""), r.read().decode()


def snapshot(url):
    status, ctype, body = get(url, "/api/snapshot")
    assert status == 200 and ctype.startswith("application/json")
    return json.loads(body)


def metrics(url):
    _, _, text = get(url, "/metrics")
    return list(text_string_to_metric_families(text))


def value(families, name, **labels):
    """The value of metric ``name`` (a counter's ``name_total``) with
    ``labels``. The body is OpenMetrics-style text (a counter's TYPE line
    names it without ``_total``), which the Prometheus text parser reads as
    the typed family, empty, and each ``_total`` sample as a family of its
    own: look in all of them."""
    [family] = [f for f in families if f.name == name]
    want = (name, name + "_total") if family.type == "counter" else (name,)
    [s] = [s for f in families for s in f.samples if s.name in want and s.labels == labels]
    return s.value


def answers(url):
    """Whether anything accepts a connection at the URL's port."""
    host, port = url.split("//")[1].rstrip("/").rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            return True
    except OSError:
        return False


def url_in(err):
    [line] = [x for x in err.splitlines() if x.startswith("dashboard: http://")]
    return line.split(" ", 1)[1]


@needs_prometheus
def test_engine_on_workers_serves_its_run_until_closed(capsys):
    with statepipe.Engine(Walk(), workers=2, placement="workers", seed=1, dashboard=ANY) as e:
        url = e.dashboard_url
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        assert url_in(capsys.readouterr().err) == url
        s = snapshot(url)
        assert s["kind"] == "evolve" and "Walk" in s["title"]
        assert [w["id"] for w in s["data"]["workers"]] == [0, 1]
        assert all(w["alive"] for w in s["data"]["workers"])
        assert s["data"]["step"] == 0
        ids = e.reset(6)
        for k in range(3):
            out = e.evolve_many({i: 1 for i in ids})
            ids = [c for kids in out.values() for c, _ in kids]
            d = snapshot(url)["data"]
            assert d["step"] == k + 1 and d["totals"]["steps"] == k + 1
            assert len(d["step_times"]) == k + 1
        assert d["totals"]["states"] == 6
        assert sum(w["evolved"] for w in d["workers"]) == 18
        m = metrics(url)
        assert value(m, "statepipe_evolve_steps") == 3
        assert value(m, "statepipe_evolve_workers_alive") == 2
        assert value(m, "statepipe_evolve_evolved", worker="0") + value(m, "statepipe_evolve_evolved", worker="1") == 18
        status, ctype, page = get(url, "/")
        assert status == 200 and ctype.startswith("text/html") and "<html" in page.lower()
    assert e.dashboard_url is None
    assert not answers(url)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_engine_with_remote_workers_shows_them(capsys):
    addr = f"127.0.0.1:{_free_port()}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), STATEPIPE_SECRET="s3cret")
    env.pop("STATEPIPE_CONNECT", None)
    w = subprocess.Popen([sys.executable, "-m", "statepipe.worker", "--connect", addr], env=env)
    try:
        with statepipe.Engine(Walk(), workers=1, listen=addr, secret="s3cret", timeout=60, dashboard=ANY) as e:
            url = e.dashboard_url
            ids = e.reset([0.0, 1.0])
            e.evolve_many({i: 1 for i in ids})
            d = snapshot(url)["data"]
            assert d["step"] == 1 and len(d["workers"]) == 1
            assert d["workers"][0]["states"] == 2
        assert not answers(url)
        assert w.wait(timeout=60) == 0
    finally:
        w.kill()


@pytest.mark.parametrize(
    "args",
    [{"workers": 0}, {"workers": 2}, {"in_process": True}],
    ids=["in-process", "auto", "in_process"],
)
def test_every_engine_takes_a_dashboard(args):
    with statepipe.Engine(Walk(), dashboard=ANY, **args) as e:
        url = e.dashboard_url
        ids = e.reset(4)
        e.evolve_many({i: 1 for i in ids})
        s = snapshot(url)
        assert s["kind"] == "evolve" and s["data"]["pf"] is None
    assert e.dashboard_url is None and not answers(url)


def test_a_vectorised_in_process_engine_takes_a_dashboard():
    import numpy as np

    class Batch:
        def evolve(self, x, _inp, rng):
            return [(x, x)]

        def evolve_batch(self, states, inputs, rng):
            return np.arange(len(states)), states + 1, list(states)

    with statepipe.Engine(Batch(), dashboard=ANY) as e:
        assert e.placement == "in process (evolve_batch)"
        url = e.dashboard_url
        assert snapshot(url)["kind"] == "evolve"
    assert not answers(url)


def test_no_dashboard_by_default():
    with statepipe.Engine(Walk()) as e:
        assert e.dashboard_url is None


@pytest.mark.parametrize("addr", ["127.0.0.1", "127.0.0.1:99999", "not an address"])
def test_a_bad_address_says_what_to_give(addr):
    with pytest.raises(ValueError, match="HOST:PORT"):
        statepipe.Engine(Walk(), dashboard=addr)


def test_a_port_in_use_says_to_choose_another():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = "127.0.0.1:%d" % s.getsockname()[1]
        # Refused before any worker starts.
        with pytest.raises(OSError, match="port 0"):
            statepipe.Engine(Walk(), workers=2, placement="workers", dashboard=busy)


def test_a_dashboard_that_is_no_string_is_refused():
    with pytest.raises(TypeError, match="HOST:PORT"):
        statepipe.Engine(Walk(), dashboard=8787)


def test_with_a_token_every_request_needs_it(monkeypatch, capsys):
    monkeypatch.setenv("STATEPIPE_DASHBOARD_TOKEN", "t0ken")
    with statepipe.Engine(Walk(), dashboard=ANY) as e:
        err = capsys.readouterr().err
        assert "STATEPIPE_DASHBOARD_TOKEN" in err and "t0ken" not in err
        with pytest.raises(urllib.error.HTTPError) as no:
            get(e.dashboard_url, "/api/snapshot")
        assert no.value.code == 401
        _, _, body = get(e.dashboard_url, "/api/snapshot", {"Authorization": "Bearer t0ken"})
        assert json.loads(body)["kind"] == "evolve"


def _check_pf(pf, steps, particles):
    assert pf["particles"] == particles
    assert [k for k, _ in pf["loglik"]] == list(range(1, steps + 1))
    assert [k for k, _ in pf["ess"]] == list(range(1, steps + 1))
    assert all(0 < v <= particles * (1 + 1e-9) for _, v in pf["ess"])
    assert all(v < 0 for _, v in pf["loglik"])


@needs_prometheus
def test_particle_filter_on_a_kept_engine_shows_every_step():
    model, n = WalkSSM(), 40
    with statepipe.Engine(Bootstrap(model, DATA), workers=2, placement="workers", seed=4, dashboard=ANY) as e:
        r = statepipe.particle_filter(model, DATA, n, islands=4, seed=4, engine=e)
        s = snapshot(e.dashboard_url)
        assert s["title"] == f"pf: WalkSSM, {len(DATA)} observations"
        d = s["data"]
        assert d["total_steps"] == len(DATA)
        assert d["step"] == len(DATA) and len(d["workers"]) == 2
        _check_pf(d["pf"], len(DATA), n)
        assert d["pf"]["loglik"][-1][1] == pytest.approx(r.loglik)
        m = metrics(e.dashboard_url)
        assert value(m, "statepipe_evolve_total_steps") == len(DATA)
        assert value(m, "statepipe_evolve_pf_loglik") == pytest.approx(r.loglik)
        assert 0 < value(m, "statepipe_evolve_pf_ess") <= n


def test_particle_filter_in_process_shows_its_progress_while_it_runs(capsys):
    """The model itself reads the page during the last step (it runs in
    this process): every earlier step is there; the page closes with the
    filter."""
    seen = {}
    url = []

    class Peek(WalkSSM):
        def log_obs(self, x, y):
            if y == DATA[-1] and not seen:
                url.append(url_in(capsys.readouterr().err))
                seen.update(snapshot(url[0]))
            return super().log_obs(x, y)

    r = statepipe.particle_filter(Peek(), DATA, 40, islands=4, seed=2, dashboard=ANY)
    assert seen["kind"] == "evolve" and seen["title"] == f"pf: Peek, {len(DATA)} observations"
    d = seen["data"]
    assert d["total_steps"] == len(DATA)
    _check_pf(d["pf"], len(DATA) - 1, 40)
    assert r.placement == "in process"
    assert not answers(url[0])


def test_vectorised_particle_filter_shows_its_progress_while_it_runs(capsys):
    seen = {}
    url = []

    class Peek(VectorisedWalkSSM):
        def log_obs(self, x, y):
            if y == DATA[-1]:
                url.append(url_in(capsys.readouterr().err))
                seen.update(snapshot(url[0]))
            return super().log_obs(x, y)

    statepipe.particle_filter(Peek(), DATA, 400, islands=4, seed=2, dashboard=ANY)
    assert seen["title"] == f"pf: Peek, {len(DATA)} observations (vectorised)"
    assert seen["data"]["total_steps"] == len(DATA)
    _check_pf(seen["data"]["pf"], len(DATA) - 1, 400)
    assert not answers(url[0])


def test_particle_filter_dashboard_with_a_given_engine_is_refused():
    model = WalkSSM()
    with statepipe.Engine(Bootstrap(model, DATA)) as e:
        with pytest.raises(ValueError, match="give dashboard= to that Engine"):
            statepipe.particle_filter(model, DATA, 8, islands=2, engine=e, dashboard=ANY)
