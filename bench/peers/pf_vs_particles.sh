#!/usr/bin/env bash
# The Nile filter, 2,000 particles, 100 steps: `statepipe pf` (auto engine,
# and forced onto worker processes) against `particles` in one Python
# process, interleaved, REPS times each. Prints one line per run and the
# medians. `particles` is installed into target/peers-venv on first use.
#
#   bash bench/peers/pf_vs_particles.sh [REPS]    (STATEPIPE=path skips the build)
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${1:-7}
VENV=target/peers-venv
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import particles" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check particles==0.4 numpy scipy \
    || { echo "cannot install particles from PyPI into $VENV" >&2; exit 1; }
fi
SP=${STATEPIPE:-target/release/statepipe}
[ -n "${STATEPIPE:-}" ] || cargo build -q --release -p statepipe
echo "host: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg), $(uname -r)"
"$VENV/bin/python" -c "import particles; print('particles', particles.__version__)" 2>/dev/null || true
tmp=$(mktemp -d)
for i in $(seq "$REPS"); do
  "$SP" pf --quiet --json "$tmp/auto.json" >/dev/null 2>"$tmp/auto.err"
  "$SP" pf --quiet --engine workers --json "$tmp/workers.json" >/dev/null 2>&1
  "$VENV/bin/python" bench/peers/particles_nile.py data/nile.csv 2000 2 | tail -1 >"$tmp/particles.json"
  python3 - "$tmp" "$i" <<'PY'
import json, sys
d, i = sys.argv[1], sys.argv[2]
a = json.load(open(f"{d}/auto.json")); w = json.load(open(f"{d}/workers.json"))
p = json.loads(open(f"{d}/particles.json").read())
print(json.dumps({"rep": int(i), "auto_s": a["wall_s"], "auto_engine": a["engine"],
                  "workers_s": w["wall_s"], "particles_s": p["wall_s"],
                  "same_bits": a["loglik"] == w["loglik"], "loglik": a["loglik"],
                  "particles_loglik": p["loglik"]}))
PY
done | tee "$tmp/runs.jsonl"
python3 - "$tmp/runs.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for k in ("auto_s", "workers_s", "particles_s"):
    v = sorted(r[k] for r in rows)
    print(f"{k:12} median {statistics.median(v):.4f} s  min {v[0]:.4f}  max {v[-1]:.4f}")
m = lambda k: statistics.median(r[k] for r in rows)
print(f"auto / particles = {m('auto_s') / m('particles_s'):.2f}x (target <= 1.0)")
print("same bits auto vs workers in every run:", all(r["same_bits"] for r in rows))
PY
rm -rf "$tmp"
