"""The dashboard page in Chromium: first paint, update rate and the time an
update takes to render, on a real `statepipe pf` run with many workers.

    target/pyenv/bin/python tests/browser/page_bench.py --workers 200 \
        --json bench/results/dashboard-page-run1/run1.json

For each round it starts `statepipe pf --engine workers` with WORKERS
worker processes and `--dashboard 127.0.0.1:0`, loads the page in a fresh
headless Chromium tab once the URL is printed, waits for one lane per
worker, and then reads the page's own timings (window.statepipeTimings,
kept by app.js) for SECONDS:

- first render: from the start of navigation to the end of the frame that
  painted the first snapshot (target: at most 1 s on loopback); Chromium's
  first-contentful-paint is printed beside it;
- updates per second the page rendered (target: at least 2);
- `work`: an update's script time with the style and layout it causes;
  `frame`: the time to the end of the frame that paints it, which includes
  waiting for that frame (target: an update renders in at most 16 ms).

A benchmark, not a test: it asserts nothing and prints the figures next to
their targets, the host check first. Needs selenium, Debian's chromium and
chromium-driver (as the browser tests do) and a release build
(`cargo build --release -p statepipe`).
"""

import argparse
import http.server
import json
import os
import statistics
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_dashboard as t  # noqa: E402  (the browser tests' helpers)


def quantile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def host_facts():
    load = os.getloadavg()[0]
    cpus = len(os.sched_getaffinity(0))
    return {"cpus": cpus, "load_1min": round(load, 2)}


ASSETS = os.path.join(t.ROOT, "crates", "dashboard", "assets")


class Replay(http.server.ThreadingHTTPServer):
    """Serves the page's own files (crates/dashboard/assets, as the
    dashboard embeds them) and a recorded run's snapshots as the stream,
    4 per second, in a loop: the page's cost with the browser alone on the
    CPUs, as it is when the viewer's machine is not the cluster's."""

    daemon_threads = True

    def __init__(self, snaps):
        self.snaps = snaps
        self.stop = threading.Event()
        super().__init__(("127.0.0.1", 0), ReplayHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/"

    def close(self):
        self.stop.set()
        self.shutdown()
        self.server_close()


class ReplayHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        files = {"/": "index.html", "/assets/app.js": "app.js", "/assets/evolve.js": "evolve.js",
                 "/assets/pipeline.js": "pipeline.js", "/assets/service.js": "service.js",
                 "/assets/app.css": "app.css",
                 "/assets/vendor/uPlot.iife.min.js": "vendor/uPlot.iife.min.js",
                 "/assets/vendor/uPlot.min.css": "vendor/uPlot.min.css"}
        if self.path in files:
            name = files[self.path]
            kind = {"html": "text/html", "js": "text/javascript", "css": "text/css"}[name.rsplit(".", 1)[1]]
            with open(os.path.join(ASSETS, name), "rb") as f:
                body = f.read()
            self.send_response(200)
            self.send_header("content-type", kind + "; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/api/stream":
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-store")
            self.end_headers()
            snaps, i, t0 = self.server.snaps, 0, time.monotonic()
            first_up = snaps[0]["uptime_s"]
            while not self.server.stop.is_set():
                s = dict(snaps[i % len(snaps)])
                # Time goes on across loops of the recording.
                s["uptime_s"] = first_up + (time.monotonic() - t0)
                try:
                    self.wfile.write(b"data: " + json.dumps(s).encode() + b"\n\n")
                    self.wfile.flush()
                except OSError:
                    return
                i += 1
                time.sleep(0.25)
        elif self.path == "/api/snapshot":
            body = json.dumps(self.server.snaps[-1]).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404)

    def handle(self):
        try:
            super().handle()
        except OSError:
            pass  # the browser went away mid-answer


def record(args, workers, seconds):
    """Snapshots of a live run, 4 per second for `seconds` once every
    worker has joined."""
    proc = t.Proc(args)
    snaps = []
    try:
        url = proc.dashboard()
        get = lambda: json.loads(urllib.request.urlopen(url + "api/snapshot", timeout=30).read())  # noqa: E731
        t.wait_for("every worker joined", lambda: len(get()["data"]["workers"]) >= workers)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            snaps.append(get())
            time.sleep(0.25)
    finally:
        proc.stop()
    return snaps


def measure(driver, url, workers, seconds, proc=None):
    """Loads `url` in a fresh tab state and reads the page's timings."""
    try:
        driver.get(url)
        t.wait_for("one lane per worker",
                   lambda: len(t.css(driver, "#lanes .lane")) >= workers)
        # The first render of this page load (relative to its navigation).
        first = driver.execute_script(
            "const p = performance.getEntriesByName('first-contentful-paint');"
            "return [window.statepipeTimings.firstRender, p.length ? p[0].startTime : null];")
        start = driver.execute_script("return performance.now()")
        time.sleep(seconds)
        got = driver.execute_script(
            "const s = arguments[0];"
            "return window.statepipeTimings.updates.filter(u => u.at >= s);", start)
        end = driver.execute_script("return performance.now()")
        lanes = len(t.css(driver, "#lanes .lane"))
        ended = proc is not None and proc.p.poll() is not None
    finally:
        if proc is not None:
            proc.stop()
    return {
        "first_render_ms": first[0],
        "first_contentful_paint_ms": first[1],
        "updates": len(got),
        "window_s": (end - start) / 1e3,
        "updates_per_s": len(got) / ((end - start) / 1e3),
        "work_ms": [u["work"] for u in got],
        "frame_ms": [u["frame"] for u in got],
        "lanes": lanes,
        "run_ended_during_window": ended,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(t.ROOT, "target", "release", "statepipe"))
    ap.add_argument("--workers", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0, help="timings read per round")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    t.BIN = a.bin
    if not os.path.exists(a.bin):
        sys.exit(f"no statepipe binary at {a.bin}: run `cargo build --release -p statepipe`")
    if not t.CHROMIUM or not t.DRIVER:
        sys.exit("no chromium or chromedriver: apt-get install chromium chromium-driver")
    # Steps long enough that the run outlives the window on two CPUs; one
    # island per worker so that every worker holds states.
    args = ["pf", "--engine", "workers", "--workers", str(a.workers), "--no-pin",
            "--model", "pk", "--pk-substeps", "4000", "--islands", str(a.workers),
            "--particles", str(a.workers * 50), "--quiet", "--dashboard", "127.0.0.1:0"]
    host = host_facts()
    print(f"host: {host['cpus']} usable CPU(s); 1-min load average {host['load_1min']}")
    print("command: statepipe " + " ".join(args))
    driver = t.make_driver()
    rounds, live = [], []
    try:
        # The page on the same two CPUs as the run's workers: context only.
        proc = t.Proc(args)
        res = measure(driver, proc.dashboard(), a.workers, a.seconds, proc)
        live.append(res)
        print(f"live, beside the run's {a.workers} busy workers: first render "
              f"{res['first_render_ms']:.0f} ms, {res['updates_per_s']:.2f} updates/s, work p50 "
              f"{statistics.median(res['work_ms']):.1f} ms, frame p50 "
              f"{statistics.median(res['frame_ms']):.1f} ms")
        snaps = record(args, a.workers, 5)
        kb = statistics.median(len(json.dumps(s)) for s in snaps) / 1024
        print(f"recorded {len(snaps)} snapshots of the run ({kb:.0f} KB each); "
              "the page replays them with the CPUs to itself:")
        server = Replay(snaps)
        for r in range(a.rounds):
            res = measure(driver, server.url, a.workers, a.seconds)
            rounds.append(res)
            print(f"round {r + 1}: first render {res['first_render_ms']:.0f} ms, "
                  f"{res['updates_per_s']:.2f} updates/s, work p50 "
                  f"{statistics.median(res['work_ms']):.1f} ms p99 {quantile(res['work_ms'], .99):.1f} ms, "
                  f"frame p50 {statistics.median(res['frame_ms']):.1f} ms, {res['lanes']} lanes")
        server.close()
    finally:
        driver.quit()
    work = [w for r in rounds for w in r["work_ms"]]
    frame = [f for r in rounds for f in r["frame_ms"]]
    firsts = [r["first_render_ms"] for r in rounds]
    rates = [r["updates_per_s"] for r in rounds]
    summary = {
        "first_render_ms_median": statistics.median(firsts),
        "first_render_ms_max": max(firsts),
        "updates_per_s_min": min(rates),
        "work_ms_p50": statistics.median(work),
        "work_ms_p99": quantile(work, .99),
        "work_ms_max": max(work),
        "frame_ms_p50": statistics.median(frame),
        "frame_ms_p99": quantile(frame, .99),
    }
    verdict = lambda ok: "met" if ok else "NOT met"  # noqa: E731
    print(f"first render: median {summary['first_render_ms_median']:.0f} ms, max "
          f"{summary['first_render_ms_max']:.0f} ms (target ≤ 1000 ms: "
          f"{verdict(summary['first_render_ms_max'] <= 1000)})")
    print(f"updates: at least {summary['updates_per_s_min']:.2f} per second in every round "
          f"(target ≥ 2: {verdict(summary['updates_per_s_min'] >= 2)})")
    print(f"an update with {a.workers} workers: work p50 {summary['work_ms_p50']:.1f} ms, "
          f"p99 {summary['work_ms_p99']:.1f} ms, max {summary['work_ms_max']:.1f} ms "
          f"(target ≤ 16 ms: median {verdict(summary['work_ms_p50'] <= 16)}, "
          f"p99 {verdict(summary['work_ms_p99'] <= 16)}); to the end of its frame "
          f"p50 {summary['frame_ms_p50']:.1f} ms, p99 {summary['frame_ms_p99']:.1f} ms")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bench": "dashboard-page", "host": host, "command": args,
                       "workers": a.workers, "live": live, "replayed_rounds": rounds,
                       "summary": summary}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
