#!/usr/bin/env python3
"""How long a distributed pipeline takes to stop after a member dies or falls silent.

A coordinator (`statepipe run counts --items 20000000 --coordinator ... --members 2
--checkpoint-dir D --metrics M`) and two members, all real processes on this
host. Once a checkpoint is committed, the second member is SIGKILLed (its
connections close) or SIGSTOPped (it falls silent: no heartbeat). The time from
the signal until the coordinator's `restores` counter (its /metrics) counts the
stopped attempt is the stop time; the run then finishes from the checkpoint and
its digest is compared with a one-process run's.

usage: python3 bench/remote/detect.py [--bin target/release/statepipe] [--runs 3]
"""
import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

EXAMPLE, ITEMS = "counts", "20000000"


def port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def restores(metrics):
    try:
        text = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=1).read().decode()
    except OSError:
        return None
    m = re.search(r"^statepipe_remote_restores_total (\d+)", text, re.M)
    return int(m.group(1)) if m else None


def digest(text):
    m = re.search(r"^digest: .*$", text, re.M)
    return m.group(0) if m else None


def one(binary, sig, env):
    co_addr, metrics = f"127.0.0.1:{port()}", f"127.0.0.1:{port()}"
    with tempfile.TemporaryDirectory() as d:
        co = subprocess.Popen(
            [binary, "run", EXAMPLE, "--items", ITEMS, "--coordinator", co_addr, "--members", "2",
             "--checkpoint-dir", d, "--checkpoint-every", "0.5", "--metrics", metrics],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        time.sleep(0.3)
        ms = [subprocess.Popen([binary, "member", "--connect", co_addr, "--no-pin"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
              for _ in range(2)]
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(d, "COORDINATOR")):
            if time.monotonic() > deadline:
                sys.exit("no checkpoint was committed in 60 s")
            time.sleep(0.01)
        before = restores(metrics)
        t0 = time.monotonic()
        os.kill(ms[1].pid, sig)
        stop = None
        while time.monotonic() - t0 < 30:
            r = restores(metrics)
            if r is not None and before is not None and r > before:
                stop = time.monotonic() - t0
                break
            time.sleep(0.005)
        if sig == signal.SIGSTOP:
            os.kill(ms[1].pid, signal.SIGKILL)
        out, _ = co.communicate(timeout=300)
        for m in ms:
            m.kill()
            m.wait()
        return stop, digest(out), co.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/statepipe")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    env = dict(os.environ, STATEPIPE_SECRET=os.environ.get("STATEPIPE_SECRET", "detect"), RUST_BACKTRACE="0")
    want = digest(subprocess.run([a.bin, "run", EXAMPLE, "--items", ITEMS], capture_output=True,
                                 text=True, env=env).stdout)
    print(f"one process: {want}")
    print(f"{'signal':<8} {'run':>3}  {'stopped after (s)':>17}  {'exit':>4}  digest")
    for sig in (signal.SIGKILL, signal.SIGSTOP):
        for i in range(a.runs):
            stop, d, rc = one(a.bin, sig, env)
            same = "identical" if d == want else f"DIFFERS: {d}"
            s = f"{stop:.3f}" if stop is not None else "never"
            print(f"{sig.name:<8} {i + 1:>3}  {s:>17}  {rc:>4}  {same}", flush=True)


if __name__ == "__main__":
    main()
