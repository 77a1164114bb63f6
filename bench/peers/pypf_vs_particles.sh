#!/usr/bin/env bash
# The Nile filter, 2,000 particles, 100 steps, in one Python process each:
# statepipe's Python front (the vectorised model, `statepipe.particle_filter`,
# 20 islands) against `particles` (bootstrap, systematic resampling),
# interleaved, REPS times each. Two timings per system and rep, taken the
# same way for both:
#   - filter: inside the process, around the filter call, the second of two
#     runs in the process (imports and data loading excluded);
#   - process: the whole process (interpreter start, imports, one filter).
# Prints one line per rep and the medians with min/max. Needs the package
# built into target/pyenv (bash scripts/test does it); `particles` is
# installed into target/peers-venv on first use.
#
#   bash bench/peers/pypf_vs_particles.sh [REPS]
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${1:-7}
PY=target/pyenv/bin/python
VENV=target/peers-venv
"$PY" -c "import statepipe" 2>/dev/null \
  || { echo "statepipe is not built into $PY: run bash scripts/test (or maturin develop) first" >&2; exit 1; }
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import particles" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check particles==0.4 numpy scipy \
    || { echo "cannot install particles from PyPI into $VENV" >&2; exit 1; }
fi
echo "host: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
"$PY" -c "import numpy, platform; print('statepipe python', platform.python_version(), 'numpy', numpy.__version__)"
"$VENV/bin/python" -c "import numpy, particles, platform; print('particles', particles.__version__, 'python', platform.python_version(), 'numpy', numpy.__version__)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
now() { date +%s.%N; }
for i in $(seq "$REPS"); do
  "$PY" bench/peers/statepipe_nile.py data/nile.csv 2000 2 | tail -1 >"$tmp/sp.json"
  "$VENV/bin/python" bench/peers/particles_nile.py data/nile.csv 2000 2 | tail -1 >"$tmp/pa.json"
  t0=$(now); "$PY" bench/peers/statepipe_nile.py data/nile.csv 2000 1 >/dev/null; t1=$(now)
  "$VENV/bin/python" bench/peers/particles_nile.py data/nile.csv 2000 1 >/dev/null; t2=$(now)
  python3 - "$tmp" "$i" "$t0" "$t1" "$t2" <<'PY'
import json, sys
d, i, t0, t1, t2 = sys.argv[1], int(sys.argv[2]), *map(float, sys.argv[3:])
s = json.load(open(f"{d}/sp.json")); p = json.load(open(f"{d}/pa.json"))
print(json.dumps({"rep": i, "statepipe_filter_s": s["wall_s"], "particles_filter_s": p["wall_s"],
                  "statepipe_process_s": t1 - t0, "particles_process_s": t2 - t1,
                  "statepipe_loglik": s["loglik"], "statepipe_loglik_se": s["loglik_se"],
                  "particles_loglik": p["loglik"], "placement": s["placement"]}))
PY
done | tee "$tmp/runs.jsonl"
echo "host after: load $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp/runs.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for k in ("statepipe_filter_s", "particles_filter_s", "statepipe_process_s", "particles_process_s"):
    v = sorted(r[k] for r in rows)
    print(f"{k:20} median {statistics.median(v):.4f} s  min {v[0]:.4f}  max {v[-1]:.4f}")
m = lambda k: statistics.median(r[k] for r in rows)
print(f"filter:  statepipe / particles = {m('statepipe_filter_s') / m('particles_filter_s'):.2f}x (target <= 1.0)")
print(f"process: statepipe / particles = {m('statepipe_process_s') / m('particles_process_s'):.2f}x")
exact = -639.30
print("statepipe log-likelihood within 3 se of the exact -639.30 in every run:",
      all(abs(r["statepipe_loglik"] - exact) < 3 * r["statepipe_loglik_se"] for r in rows))
PY
