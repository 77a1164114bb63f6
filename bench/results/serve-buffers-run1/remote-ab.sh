#!/usr/bin/env bash
# `statepipe run counts` over a coordinator and two member processes on
# this host, for two binaries, interleaved: the M items/s the coordinator
# reports. Usage: remote-ab.sh BIN_A BIN_B ROUNDS [ITEMS]
set -euo pipefail
a=$1 b=$2 rounds=${3:-3} items=${4:-5000000}
export STATEPIPE_SECRET=remote-ab
one() {
  local bin=$1 out err addr=""
  out=$(mktemp) err=$(mktemp)
  "$bin" run counts --items "$items" --coordinator 127.0.0.1:0 --members 2 > "$out" 2> "$err" &
  local co=$!
  # The address it listens at, from its first line.
  for _ in $(seq 100); do
    addr=$(grep -o -- '--connect [0-9.:]*' "$err" | cut -d' ' -f2 || true)
    [ -n "$addr" ] && break
    sleep 0.05
  done
  "$bin" member --connect "$addr" --no-pin > /dev/null 2>&1 &
  "$bin" member --connect "$addr" --no-pin > /dev/null 2>&1 &
  wait "$co"
  wait
  grep -o '[0-9.]* M items/s' "$out" || { echo "failed:"; cat "$err"; }
  rm -f "$out" "$err"
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="$a $b"; else order="$b $a"; fi
  for bin in $order; do
    echo "round $r $(basename "$bin"): $(one "$bin")"
  done
done
