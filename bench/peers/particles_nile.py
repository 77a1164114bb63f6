"""The Nile local-level filter in `particles` (N. Chopin's SMC library),
one Python process, as its documentation writes a bootstrap filter: the
peer `statepipe pf` is timed against.

Prints one JSON line per repetition: the filter's wall time (after the
imports and the data are loaded) and its log-likelihood estimate.

    python bench/peers/particles_nile.py data/nile.csv [N] [REPS]
"""
import json
import sys
import time

import numpy as np
import particles
from particles import distributions as dists
from particles import state_space_models as ssm


class LocalLevel(ssm.StateSpaceModel):
    """y_t = x_t + eps, eps ~ N(0, 15099); x_{t+1} = x_t + eta,
    eta ~ N(0, 1469.1); x_1 ~ N(1000, 1e5) (Durbin and Koopman)."""

    default_params = {"var_eps": 15099.0, "var_eta": 1469.1, "m0": 1000.0, "p0": 1e5}

    def PX0(self):
        return dists.Normal(loc=self.m0, scale=np.sqrt(self.p0))

    def PX(self, t, xp):
        return dists.Normal(loc=xp, scale=np.sqrt(self.var_eta))

    def PY(self, t, xp, x):
        return dists.Normal(loc=x, scale=np.sqrt(self.var_eps))


def main():
    path = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    rows = [l.strip().split(",") for l in open(path) if l.strip()]
    y = np.array([float(r[-1]) for r in rows if r[-1].replace(".", "", 1).isdigit()])
    model = LocalLevel()
    for rep in range(reps):
        fk = ssm.Bootstrap(ssm=model, data=y)
        alg = particles.SMC(fk=fk, N=n, resampling="systematic", ESSrmin=1.0)
        t0 = time.perf_counter()
        alg.run()
        wall = time.perf_counter() - t0
        print(json.dumps({"peer": "particles", "rep": rep, "n": n, "wall_s": wall,
                          "loglik": float(alg.logLt), "steps": len(y)}))


if __name__ == "__main__":
    main()
