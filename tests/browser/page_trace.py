"""What one update of the dashboard page costs the browser, counted: layouts,
style recalculations, frames, objects laid out, and main-thread CPU time by
phase, per update, from a Chrome trace of the page replaying a 200-worker
run (the replay of tests/browser/page_bench.py).

    target/pyenv/bin/python tests/browser/page_trace.py --save /tmp/snaps.json
    target/pyenv/bin/python tests/browser/page_trace.py --snapshots /tmp/snaps.json

The counts hardly move with the host's load, unlike the timings, so they
are what to compare between versions of the page on a busy machine; CPU
times are thread time (not wall) but still grow with contention. Without
--snapshots it records them from a live `statepipe pf` run first (a release
build, as page_bench.py needs). A benchmark's helper, not a test: it asserts
nothing.
"""

import argparse
import collections
import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import page_bench as pb  # noqa: E402
import test_dashboard as t  # noqa: E402

CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "blink", "cc", "v8.execute"]
PHASES = ["ProxyMain::BeginMainFrame", "UpdateLayoutTree", "Layout", "PrePaint", "Paint", "Layerize", "FunctionCall"]


def trace_socket(driver):
    """A DevTools socket to the page (selenium's CDP calls do not stream the
    trace's events)."""
    import websocket  # selenium's own dependency

    addr = driver.capabilities["goog:chromeOptions"]["debuggerAddress"]
    pages = json.loads(urllib.request.urlopen(f"http://{addr}/json", timeout=30).read())
    url = next(p for p in pages if p["type"] == "page")["webSocketDebuggerUrl"]
    return websocket.create_connection(url, max_size=None, suppress_origin=True, timeout=60)


def summarize(events, n):
    """Per update: counts of the main thread's lifecycle events and the CPU
    time of each phase."""
    frames = [e for e in events if e["name"] == "ProxyMain::BeginMainFrame" and e.get("ph") == "X"]
    main = collections.Counter(e["tid"] for e in frames).most_common(1)[0][0] if frames else None
    count, cpu, dirty = collections.Counter(), collections.Counter(), 0
    for e in events:
        if e.get("ph") != "X" or e.get("tid") != main:
            continue
        count[e["name"]] += 1
        cpu[e["name"]] += e.get("tdur", 0) / 1000
        if e["name"] == "Layout":
            dirty += e.get("args", {}).get("beginData", {}).get("dirtyObjects", 0)
    print(f"per update: {count['ProxyMain::BeginMainFrame'] / n:.2f} frames, {count['Layout'] / n:.2f} layouts "
          f"({count['Blink.ForcedStyleAndLayout.UpdateTime'] / n:.2f} forced), "
          f"{count['UpdateLayoutTree'] / n:.2f} style recalcs, {dirty / n:.0f} objects laid out")
    print("main-thread CPU per update (ms): " + ", ".join(f"{p} {cpu[p] / n:.2f}" for p in PHASES))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--snapshots", help="a JSON list of snapshots to replay (from --save)")
    ap.add_argument("--save", help="record a live run's snapshots here, then trace them")
    ap.add_argument("--bin", default=os.path.join(t.ROOT, "target", "release", "statepipe"))
    ap.add_argument("--workers", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=12.0, help="traced span")
    ap.add_argument("--scroll", help="CSS selector of an element to scroll into view first")
    a = ap.parse_args()
    if a.snapshots:
        with open(a.snapshots) as f:
            snaps = json.load(f)
    else:
        t.BIN = a.bin
        if not os.path.exists(a.bin):
            sys.exit(f"no statepipe binary at {a.bin}: run `cargo build --release -p statepipe`")
        args = ["pf", "--engine", "workers", "--workers", str(a.workers), "--no-pin", "--model", "pk",
                "--pk-substeps", "4000", "--islands", str(a.workers), "--particles", str(a.workers * 50),
                "--quiet", "--dashboard", "127.0.0.1:0"]
        snaps = pb.record(args, a.workers, 5)
        if a.save:
            with open(a.save, "w") as f:
                json.dump(snaps, f)
    server = pb.Replay(snaps)
    driver = t.make_driver()
    try:
        driver.get(server.url)
        t.wait_for("one lane per worker", lambda: len(t.css(driver, "#lanes .lane")) >= a.workers)
        if a.scroll:
            driver.execute_script("document.querySelector(arguments[0]).scrollIntoView()", a.scroll)
        time.sleep(3)
        ws = trace_socket(driver)
        ws.send(json.dumps({"id": 1, "method": "Tracing.start", "params": {
            "transferMode": "ReportEvents", "traceConfig": {"includedCategories": CATEGORIES}}}))
        start = driver.execute_script("return performance.now()")
        time.sleep(a.seconds)
        n = driver.execute_script(
            "return window.statepipeTimings.updates.filter(u => u.at >= arguments[0]).length", start)
        ws.send(json.dumps({"id": 2, "method": "Tracing.end"}))
        events = []
        while True:
            m = json.loads(ws.recv())
            if m.get("method") == "Tracing.dataCollected":
                events.extend(m["params"]["value"])
            elif m.get("method") == "Tracing.tracingComplete":
                break
        ws.close()
    finally:
        driver.quit()
        server.close()
    print(f"{n} updates in {a.seconds:.0f} s")
    summarize(events, max(1, n))


if __name__ == "__main__":
    main()
