#!/usr/bin/env bash
# The benchmark's environment: a virtual environment under target/ with the
# peers from PyPI (pinned) and statepipe built into it (release profile).
# A peer that cannot be installed is reported; the benchmark then skips it.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
VENV=target/bench-pyenv
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || { echo "error: cannot create $VENV (python3 -m venv)" >&2; exit 1; }
"$VENV/bin/pip" install -q --disable-pip-version-check maturin==1.9.6 numpy==2.2.6 cloudpickle==3.1.1 \
  || { echo "error: cannot install maturin, numpy, cloudpickle from PyPI" >&2; exit 1; }
for peer in "distributed==2026.8.0 dask==2026.8.0" "ray==2.60.0" "particles==0.4"; do
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install -q --disable-pip-version-check $peer \
    || echo "WARNING: could not install $peer from PyPI; the benchmark will skip it"
done
VIRTUAL_ENV="$PWD/$VENV" PATH="$PWD/$VENV/bin:$PATH" CARGO_TARGET_DIR=target/python \
  maturin develop --release --locked -q -m python/Cargo.toml
echo "ready: $VENV/bin/python python/bench/bench_python.py --out bench/results/NAME"
