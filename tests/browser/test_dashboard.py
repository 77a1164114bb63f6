"""The dashboards in a real browser: Debian's Chromium driven by selenium.

Each test starts real `statepipe` processes with `--dashboard 127.0.0.1:0`,
reads the URL each prints, and checks what a person would see on the page:
worker lanes, a lost worker and its recovery, a distributed pipeline's
checkpoints and a member leaving it, the service's request counter. `/metrics` must parse with
prometheus_client's (strict) OpenMetrics parser.

Needs the `statepipe` binary (STATEPIPE_BIN, else target/debug/statepipe)
and chromium with chromedriver (`apt-get install chromium chromium-driver`;
.ci/run installs them). Without them the tests skip, saying which is missing.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("STATEPIPE_BIN", os.path.join(ROOT, "target", "debug", "statepipe"))
SECRET = "browser-test-secret"
# How long a page may take to show a thing before the test fails: generous,
# since CI's two CPUs are shared with the run under test. A bound, not a
# speed assertion.
PATIENCE = 90


def _find(*names):
    for n in names:
        p = shutil.which(n)
        if p:
            return p
    return None


CHROMIUM = os.environ.get("CHROMIUM") or _find("chromium", "chromium-browser", "google-chrome")
DRIVER = os.environ.get("CHROMEDRIVER") or _find("chromedriver")


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(BIN):
        pytest.skip(f"no statepipe binary at {BIN}: run `cargo build -p statepipe` first")
    if not CHROMIUM or not DRIVER:
        pytest.skip(
            "no chromium or chromedriver: install Debian's chromium and chromium-driver "
            "(apt-get install chromium chromium-driver)"
        )
    driver = make_driver()
    yield driver
    driver.quit()


def make_driver():
    """Headless Chromium at 1280×800 through chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,800"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(DRIVER), options=opts)


class Proc:
    """A statepipe process whose output (stdout and stderr together) is
    read on a thread, so it never blocks on a full pipe, and searched for
    lines."""

    def __init__(self, args, env=None):
        e = dict(os.environ, STATEPIPE_SECRET=SECRET)
        e.update(env or {})
        self.p = subprocess.Popen([BIN, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  env=e, text=True, start_new_session=True)
        self.lines = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.lines.append(None)
            self.cv.notify_all()

    def wait_line(self, pattern):
        """The first match of `pattern` in stderr, waiting for it."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + PATIENCE
        seen = 0
        with self.cv:
            while True:
                for line in self.lines[seen:]:
                    if line is None:
                        raise AssertionError(
                            f"the process ended before printing /{pattern}/:\n" + self.stderr())
                    m = rx.search(line)
                    if m:
                        return m
                seen = len(self.lines)
                left = deadline - time.monotonic()
                assert left > 0, f"no /{pattern}/ within {PATIENCE} s:\n" + self.stderr()
                self.cv.wait(left)

    def dashboard(self):
        return self.wait_line(r"dashboard: (http://\S+/)").group(1)

    def stderr(self):
        with self.cv:
            return "\n".join(l for l in self.lines if l is not None)

    def stop(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
        self.p.wait()


# Where each test leaves a screenshot of the page as it last saw it (kept
# as test output: CI's log names the folder).
SHOTS = os.environ.get("STATEPIPE_SCREENSHOTS", os.path.join(ROOT, "target", "browser-screenshots"))


@pytest.fixture
def procs():
    started = []
    yield started
    for p in started:
        p.stop()


@pytest.fixture(autouse=True)
def screenshot(request, browser, procs):
    """After each test, while its processes still run: the page as it is."""
    yield
    os.makedirs(SHOTS, exist_ok=True)
    browser.save_screenshot(os.path.join(SHOTS, request.node.name + ".png"))


def start(procs, args, **kw):
    p = Proc(args, **kw)
    procs.append(p)
    return p


def wait_for(what, fn):
    """Polls `fn` until it returns something true; fails after PATIENCE."""
    deadline = time.monotonic() + PATIENCE
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # the page may be between renders
            last = e
        time.sleep(0.25)
    raise AssertionError(f"the page never showed {what} (last: {last!r})")


def css(driver, selector):
    from selenium.webdriver.common.by import By
    return driver.find_elements(By.CSS_SELECTOR, selector)


def number(driver, selector):
    els = css(driver, selector)
    if not els:
        return None
    digits = re.sub(r"[^0-9]", "", els[0].text)
    return int(digits) if digits else None


def fetch(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


def parse_metrics(url):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
    return {f.name: f for f in text_string_to_metric_families(fetch(url + "metrics"))}


def open_page(driver, url, kind):
    driver.get(url)
    wait_for(f"a {kind} page", lambda: driver.execute_script("return document.body.dataset.kind") == kind)
    wait_for("a live stream", lambda: "live" in css(driver, "#status")[0].text.lower())


# A filter whose steps take a while even on a debug build on two CPUs: the
# pharmacokinetic model's cost is its RK4 substeps.
PF = ["pf", "--engine", "workers", "--workers", "3", "--no-pin", "--model", "pk",
      "--pk-hours", "48", "--pk-substeps", "20000", "--particles", "600", "--islands", "3",
      "--quiet", "--dashboard", "127.0.0.1:0"]


def test_pf_shows_one_lane_per_worker_and_metrics_parse(browser, procs):
    pf = start(procs, PF)
    url = pf.dashboard()
    open_page(browser, url, "evolve")
    lanes = wait_for("three worker lanes", lambda: len(css(browser, "#lanes .lane")) == 3 and
                     css(browser, "#lanes .lane"))
    assert sorted(l.get_attribute("data-worker") for l in lanes) == ["0", "1", "2"]
    wait_for("the step advancing", lambda: (number(browser, "#step") or 0) >= 2)
    families = parse_metrics(url)
    for name in ("statepipe_evolve_steps", "statepipe_evolve_busy_seconds",
                 "statepipe_dashboard_streams"):
        assert name in families, sorted(families)
    workers = {s.labels.get("worker") for s in families["statepipe_evolve_busy_seconds"].samples}
    assert len(workers) == 3, workers
    assert pf.p.wait(timeout=600) == 0, pf.stderr()


def worker_pids(pf):
    """The pids of the three worker processes `pf` started."""
    children = subprocess.run(["pgrep", "-P", str(pf.p.pid)], capture_output=True, text=True)
    pids = [int(x) for x in children.stdout.split()]
    assert len(pids) == 3, f"three worker processes, found {pids}"
    return pids


def test_a_killed_worker_shows_as_lost_then_recovered(browser, procs):
    pf = start(procs, PF)
    url = pf.dashboard()
    open_page(browser, url, "evolve")
    wait_for("step 2", lambda: (number(browser, "#step") or 0) >= 2)
    pids = worker_pids(pf)
    os.kill(pids[0], signal.SIGKILL)
    wait_for("the loss", lambda: css(browser, '#events li.event[data-kind="lost"]'))
    wait_for("the recovery", lambda: css(browser, '#events li.event[data-kind="recovered"]'))
    assert (number(browser, "#totals-losses") or 0) >= 1
    wait_for("the lost worker's lane marked", lambda: css(browser, "#lanes .lane.lost"))
    assert pf.p.wait(timeout=600) == 0, pf.stderr()


def test_a_worker_told_to_leave_shows_as_left_not_lost(browser, procs):
    pf = start(procs, PF)
    url = pf.dashboard()
    open_page(browser, url, "evolve")
    wait_for("step 2", lambda: (number(browser, "#step") or 0) >= 2)
    pids = worker_pids(pf)
    os.kill(pids[0], signal.SIGTERM)
    wait_for("the request to leave", lambda: css(browser, '#events li.event[data-kind="leaving"]'))
    wait_for("the departure", lambda: css(browser, '#events li.event[data-kind="left"]'))
    wait_for("the lane marked as left", lambda: css(browser, "#lanes .lane.left"))
    assert pf.p.wait(timeout=600) == 0, pf.stderr()


def test_a_distributed_pipelines_checkpoints_rise_on_the_page(browser, procs):
    ckpt = tempfile.mkdtemp(prefix="statepipe-browser-")
    try:
        coord = start(procs, ["run", "sharded", "--items", "400000000", "--coordinator", "127.0.0.1:0",
                              "--members", "2", "--checkpoint-dir", ckpt, "--checkpoint-every", "0.3",
                              "--dashboard", "127.0.0.1:0"])
        addr = coord.wait_line(r"--connect (\S+)").group(1)
        members = [start(procs, ["member", "--connect", addr, "--workers", "1", "--no-pin"])
                   for _ in range(2)]
        url = coord.dashboard()
        open_page(browser, url, "pipeline")
        wait_for("two members", lambda: len(css(browser, "#members tr.member")) == 2)
        first = wait_for("a first checkpoint", lambda: number(browser, "#checkpoint-count"))
        wait_for("more checkpoints", lambda: (number(browser, "#checkpoint-count") or 0) > first)
        families = parse_metrics(url)
        assert "statepipe_remote_checkpoints" in families, sorted(families)
        # A member asked to leave: its parts move to the other at a
        # checkpoint, listed as a rescale, not as a loss.
        members[0].p.send_signal(signal.SIGTERM)
        left = wait_for("the rescale listed", lambda: css(browser, '#restores li.item[data-kind="left"]'))
        assert "rescaled" in left[0].text and "leave" in left[0].text, left[0].text
        assert not css(browser, '#restores li.item[data-kind="lost"]')
        assert members[0].p.wait(timeout=PATIENCE) == 0, members[0].stderr()
        wait_for("the member shown as left", lambda: any(
            "left" in r.text for r in css(browser, "#members tr.member")))
        assert not any("lost" in r.text for r in css(browser, "#members tr.member"))
        rescales = parse_metrics(url)["statepipe_remote_rescales"]
        assert rescales.samples[0].value >= 1, rescales
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


def test_the_service_pages_request_counter_moves_under_load(browser, procs):
    data = tempfile.mkdtemp(prefix="statepipe-browser-serve-")
    try:
        serve = start(procs, ["serve", "--listen", "127.0.0.1:0", "--data", data,
                              "--dashboard", "127.0.0.1:0"])
        url = serve.dashboard()
        service = serve.wait_line(r"listening on (\S+) \(").group(1)
        open_page(browser, url, "service")
        stop = threading.Event()

        def load():
            while not stop.is_set():
                req = urllib.request.Request(f"http://{service}/item", method="POST",
                                             data=b'{"name": "a", "price": 1}',
                                             headers={"content-type": "application/json"})
                try:
                    urllib.request.urlopen(req, timeout=10).read()
                except OSError:
                    pass

        t = threading.Thread(target=load, daemon=True)
        t.start()
        try:
            first = wait_for("a request count", lambda: number(browser, "#request-count"))
            wait_for("the count moving", lambda: (number(browser, "#request-count") or 0) > first + 10)
        finally:
            stop.set()
            t.join()
        families = parse_metrics(url)
        assert "statepipe_serve_requests" in families, sorted(families)
        assert "statepipe_serve_request_seconds" in families, sorted(families)
    finally:
        shutil.rmtree(data, ignore_errors=True)
