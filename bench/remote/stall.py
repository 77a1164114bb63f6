#!/usr/bin/env python3
"""A receiver stopped for 10 s: does its sender's memory stay flat?

One edge between two processes (a contender of `statepipe bench pipeline
--case remote`, statepipe's RawLink with 65,536 credits by default), a flood of
64-byte items. After 1 s the receiver is SIGSTOPped for STOP_S seconds (10),
then continued. Every 0.5 s: the sender's resident memory (VmRSS) and the
bytes its connection has had acknowledged (`ss -ti` bytes_acked). With credit
flow control the sender stops after the window and its memory stays flat.

usage: python3 bench/remote/stall.py [--bin target/release/statepipe]
       [--stop-s 10] [--peer statepipe]
"""
import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time


def port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return 0


def acked(dst):
    """bytes_acked of the connection to dst (the sender's side), or 0."""
    out = subprocess.run(["ss", "-tniH", "dst", dst], capture_output=True, text=True).stdout
    m = re.search(r"bytes_acked:(\d+)", out)
    return int(m.group(1)) if m else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/statepipe")
    ap.add_argument("--stop-s", type=float, default=10.0)
    ap.add_argument("--peer", default="statepipe")
    a = ap.parse_args()
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"no binary at {a.bin}: build it with cargo build --release --bin statepipe")
    addrs = [f"127.0.0.1:{port()}", f"127.0.0.1:{port()}"]
    load = {"Flood": {"items": 10**12}}

    def req(role, cpu):
        return json.dumps({"peer": a.peer, "role": role, "load": load, "addresses": addrs, "cpu": cpu})

    recv = subprocess.Popen([a.bin, "bench", "remote-child", req("Recv", 1)], stdout=subprocess.PIPE, text=True)
    if recv.stdout.readline().strip() != "ready":
        sys.exit("the receiver did not get ready")
    send = subprocess.Popen([a.bin, "bench", "remote-child", req("Send", 0)], stdout=subprocess.DEVNULL)
    rows = []
    try:
        t0 = time.monotonic()
        stopped_at = continued_at = None
        state = "running"
        while True:
            t = time.monotonic() - t0
            if stopped_at is None and t >= 1.0:
                os.kill(recv.pid, signal.SIGSTOP)
                stopped_at, state = t, "stopped"
            elif state == "stopped" and t >= 1.0 + a.stop_s:
                os.kill(recv.pid, signal.SIGCONT)
                continued_at, state = t, "running"
            rows.append((t, state, rss_kib(send.pid), acked(addrs[1])))
            if t >= a.stop_s + 3.0:
                break
            time.sleep(0.5 - (time.monotonic() - t0 - t) % 0.5)
    finally:
        for p in (recv, send):
            try:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
            except ProcessLookupError:
                pass
        recv.wait()
        send.wait()
    print(f"peer: {a.peer}; receiver stopped at t={stopped_at:.1f} s for {a.stop_s:g} s")
    print(f"{'t (s)':>6}  {'receiver':<8}  {'sender RSS KiB':>14}  {'MB acked':>9}")
    for t, st, r, b in rows:
        print(f"{t:6.1f}  {st:<8}  {r:14d}  {b / 1e6:9.1f}")
    during = [r for t, st, r, _ in rows if st == "stopped"]
    moved = [b for t, st, _, b in rows if st == "stopped"]
    print(f"while stopped: sender RSS {min(during)}..{max(during)} KiB "
          f"(growth {max(during) - during[0]} KiB), bytes acked grew {(moved[-1] - moved[0]) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
