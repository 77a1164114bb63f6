"""Network links with delay, jitter and loss, emulated in user space.

    python3 link.py PARAMS_FILE NAME...

For each NAME it creates two TAP devices, NAMEa and NAMEb, in the network
namespace it runs in, prints `ready`, and from then on copies every
Ethernet frame from one to the other: the pair behaves as a cable (the
caller moves one end to another namespace and the other into a bridge).
Each frame is dropped with probability `loss`, else delivered after
`delay_ms` plus a uniform jitter in [-jitter_ms, +jitter_ms] (at least 0),
in order per direction (a frame never overtakes the one before it, as on a
link whose jitter is queueing). Both directions of every link get the same
parameters, read from PARAMS_FILE (`delay_ms jitter_ms loss`, e.g.
`2 1 0.005`) at start and whenever the file's modification time changes.

On SIGUSR1 it prints `frames: F forwarded, D dropped` (counts since start)
to stdout. `tc qdisc ... netem` does this in the kernel where the kernel
has netem; run.sh uses this where it does not. Exits on SIGTERM or SIGINT.
"""

import collections
import fcntl
import os
import random
import selectors
import signal
import struct
import sys
import time

TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
MAX_FRAME = 65536
MAX_QUEUED = 10_000  # frames per direction; beyond that, drop (a full queue)


def tap(name):
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI))
    return fd


class Params:
    def __init__(self, path):
        self.path = path
        self.mtime = None
        self.delay = self.jitter = self.loss = 0.0

    def refresh(self):
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            return
        if mtime == self.mtime:
            return
        self.mtime = mtime
        with open(self.path, encoding="utf-8") as f:
            delay_ms, jitter_ms, loss = (float(x) for x in f.read().split())
        self.delay, self.jitter, self.loss = delay_ms / 1e3, jitter_ms / 1e3, loss


def main():
    params = Params(sys.argv[1])
    params.refresh()
    rng = random.Random(int(os.environ.get("LINK_SEED", "1")))
    sel = selectors.DefaultSelector()
    # One queue per direction: (deliver at, frame), deliver-at nondecreasing.
    queues = []
    for name in sys.argv[2:]:
        a, b = tap(name + "a"), tap(name + "b")
        for src, dst in ((a, b), (b, a)):
            q = collections.deque()
            queues.append((dst, q))
            sel.register(src, selectors.EVENT_READ, (dst, q))
    counts = {"forwarded": 0, "dropped": 0}

    def report(_sig, _frame):
        print(f"frames: {counts['forwarded']} forwarded, {counts['dropped']} dropped", flush=True)

    signal.signal(signal.SIGUSR1, report)
    print("ready", flush=True)

    while True:
        now = time.monotonic()
        wait = 0.05  # look at the parameters file at least this often
        for _, q in queues:
            if q:
                wait = min(wait, max(0.0, q[0][0] - now))
        for key, _ in sel.select(wait):
            dst, q = key.data
            while True:
                try:
                    frame = os.read(key.fd, MAX_FRAME)
                except BlockingIOError:
                    break
                if (params.loss and rng.random() < params.loss) or len(q) >= MAX_QUEUED:
                    counts["dropped"] += 1
                    continue
                counts["forwarded"] += 1
                at = time.monotonic() + max(
                    0.0, params.delay + rng.uniform(-params.jitter, params.jitter)
                )
                if q:
                    at = max(at, q[-1][0])
                q.append((at, frame))
        now = time.monotonic()
        for dst, q in queues:
            while q and q[0][0] <= now:
                try:
                    os.write(dst, q.popleft()[1])
                except (BlockingIOError, OSError):
                    pass  # the device is down or full: the frame is lost
        params.refresh()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
