"""The Nile local-level filter through statepipe's Python front, in one
process: the vectorised model of python/examples/nile_pf.py run by
``statepipe.particle_filter`` (20 islands, as ``statepipe pf``). The
counterpart of particles_nile.py, timed the same way.

Prints one JSON line per repetition: the filter's wall time (after the
imports and the data are loaded) and its log-likelihood estimate.

    python bench/peers/statepipe_nile.py data/nile.csv [N] [REPS]
"""
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "examples"))

import statepipe  # noqa: E402
from nile_pf import Nile  # noqa: E402


def main():
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    rows = [l.strip().split(",") for l in open(path) if l.strip()]
    y = [float(r[-1]) for r in rows if r[-1].replace(".", "", 1).isdigit()]
    model = Nile()
    for rep in range(reps):
        t0 = time.perf_counter()
        r = statepipe.particle_filter(model, y, n, islands=20, seed=1 + rep)
        wall = time.perf_counter() - t0
        print(json.dumps({"peer": "statepipe-python", "rep": rep, "n": n, "wall_s": wall,
                          "loglik": r.loglik, "loglik_se": r.loglik_se, "steps": len(y),
                          "placement": r.placement}))


if __name__ == "__main__":
    main()
