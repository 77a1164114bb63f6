"""A statepipe worker: ``statepipe-worker`` or ``python -m statepipe.worker``.

Serves one master: the one named by ``--connect`` (or ``STATEPIPE_CONNECT``)
with the secret of ``--secret`` (or ``STATEPIPE_SECRET``), until the master
shuts it down or goes away. The model's code comes from the master
(cloudpickled); modules it imports must be importable here.

SIGTERM (a Kubernetes pod's end, a scale-in, ``kill PID``) is a graceful
leave: the worker tells its master, its states move to the other workers
when the step in progress ends, and it exits 0. A second SIGTERM exits at
once (status 143), as a crash the master recovers from.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="statepipe-worker", description=__doc__.split("\n\n")[0])
    p.add_argument("--connect", help="the master's HOST:PORT (default: $STATEPIPE_CONNECT)")
    p.add_argument("--secret", help="the shared secret (default: $STATEPIPE_SECRET; prefer the variable)")
    p.add_argument("--pin", type=int, help="pin the worker to this CPU")
    p.add_argument("--sys-path", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    # Ctrl-C ends a worker at once (the master sees the connection close).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if a.sys_path:
        sys.path[:0] = [d for d in a.sys_path.split(os.pathsep) if d not in sys.path]
    from . import _native

    try:
        if a.connect is None and "STATEPIPE_CONNECT" in os.environ:
            _native.serve_worker(leave_on_sigterm=True)
        elif a.connect is None:
            p.error("give --connect HOST:PORT (or set STATEPIPE_CONNECT)")
        else:
            if a.secret is None and "STATEPIPE_SECRET" not in os.environ:
                p.error("give the master's secret: set STATEPIPE_SECRET (or --secret)")
            _native.serve_worker(a.connect, a.secret, a.pin, False, leave_on_sigterm=True)
    except _native.StatepipeError as e:
        print(f"statepipe-worker: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
