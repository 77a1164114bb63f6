"""Interleaved A/B of the array frame: the bench's chunked filter at W
workers (statepipe only), with statepipe._codec as it is and with every
value pickled, as before the frame (`dumps` replaced by pickle.dumps in the
caller and, through the sitecustomize.py beside this file, in every
worker).

    PYTHONPATH=bench/results/python-run5 target/bench-pyenv/bin/python \
        bench/results/python-run5/codec_ab.py 50 3
"""
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
ROOT = HERE.parents[3]
W, ROUNDS = int(sys.argv[1]), int(sys.argv[2])
for r in range(ROUNDS):
    for arm in ("pickle-only", "frame"):
        env = dict(os.environ, PYTHONPATH=f"{HERE.parent}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
        if arm == "pickle-only":
            env["STATEPIPE_AB_PICKLE_ONLY"] = "1"
        else:
            env.pop("STATEPIPE_AB_PICKLE_ONLY", None)
        out = subprocess.run(
            [sys.executable, str(ROOT / "python/bench/bench_python.py"), "--one", "statepipe", str(W)],
            env=env, capture_output=True, text=True, check=True, cwd=ROOT,
        ).stdout
        line = next(x for x in out.splitlines() if x.startswith("RESULT "))
        print(f"round {r} {arm:<11} {line[7:]}", flush=True)
