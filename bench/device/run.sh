#!/usr/bin/env bash
# The many-core benchmarks, on a machine without network, from the kit
# kit.sh built (.device-kit/, carried beside the working tree). Results go
# to target/device-out, and where $OUT is set (a device call), the .txt
# summaries and one results.tgz of everything to $OUT (a device call
# brings back at most 8 files). Each part is named on the command line:
#   pf       statepipe bench pf --no-peer: 1 thread against all, per size
#            (and the same with the keep-awake build, if the kit has one)
#   cluster  statepipe bench cluster --faults --chaos (200 workers)
#   serve    statepipe bench serve at k = 1, 4 and 8 server CPUs
#   ring     statepipe bench ring
#   apps     statepipe bench apps --case graph500/ at scales 20 to 26 (the
#            BFS against the rayon peers, with peak RSS), and GAPBS's bfs
#            at each scale where the kit has it (GAPBS_SRC for kit.sh)
# Run from the repository root.
set -uo pipefail
kit=$PWD/.device-kit
out=target/device-out
rm -rf "$out"; mkdir -p "$out"
[ -x "$kit/bin/statepipe" ] || { echo "no kit at $kit: run bench/device/kit.sh first and carry .device-kit" >&2; exit 1; }
export PATH=$kit/bin:$PATH LD_LIBRARY_PATH=$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
sp=$kit/bin/statepipe
{
  echo "kit commit: $(cat "$kit/commit.txt")"; cat "$kit/status.txt"
  echo "kit built on: $(cat "$kit/glibc.txt")"; echo "here: $(ldd --version | sed -n 1p)"
  nproc; uname -r; grep -m1 'model name' /proc/cpuinfo; free -g | head -2
  # The serve part's overload run caps writes to the disk under target/
  # (tmpfs or overlay takes no cap: it falls back to a CPU quota).
  echo "target/ is on: $(df -T target 2> /dev/null | awk 'NR == 2 {print $1, $2}')"
  for b in "$kit"/bin/* "$kit/serve-peers/serve-peer"; do
    ldd "$b" | grep -q 'not found' && { echo "MISSING libraries for $b:"; ldd "$b" | grep 'not found'; }
  done
} 2>&1 | tee "$out/host.txt"
part() { echo "== $1 ($(date +%T))"; }
# What is done so far goes to $OUT however the script ends: run under
# `timeout`, which signals the whole process group, a part cut short
# ends, the TERM trap exits, and the EXIT trap copies.
bring_back() {
  [ -n "${OUT:-}" ] || return 0
  cp "$out"/*.txt "$OUT"/ 2> /dev/null
  tar czf "$OUT/results.tgz" -C target device-out
}
trap bring_back EXIT
trap 'exit 143' TERM INT
for p in "$@"; do
  case $p in
    pf)
      part pf
      "$sp" bench pf --no-peer --samples 5 --json "$out/pf.json" > "$out/pf.txt" 2> "$out/pf.stderr"
      sed -n '/^targets:/,/^(run took/p' "$out/pf.txt"
      # 16 islands go by island on 16 threads (one each), 20 by block:
      # the two ways of spreading the work between steps, same run.
      "$sp" bench pf --no-peer --samples 5 --particles 200000 --islands 16 \
        --json "$out/pf-islands16.json" > "$out/pf-islands16.txt" 2> "$out/pf-islands16.stderr"
      sed -n '/^targets:/,/^(run took/p' "$out/pf-islands16.txt"
      if [ -x "$kit/bin/statepipe-keep-awake" ]; then
        part "pf, keep-awake build"
        "$kit/bin/statepipe-keep-awake" bench pf --no-peer --samples 5 --json "$out/pf-keep-awake.json" \
          > "$out/pf-keep-awake.txt" 2> "$out/pf-keep-awake.stderr"
        sed -n '/^targets:/,/^(run took/p' "$out/pf-keep-awake.txt"
      fi ;;
    cluster)
      part cluster
      "$sp" bench cluster --workers 0 --steal-workers 0 --no-roundtrips --faults --chaos \
        --samples 3 --step-log "$out/cluster-steps.txt" --json "$out/cluster.json" \
        > "$out/cluster.txt" 2> "$out/cluster.stderr"
      sed -n '/^targets/,/^(run took/p' "$out/cluster.txt" ;;
    serve)
      part serve
      # The overload run caps the writes of the disk under --data; where
      # target/ is on no block device (tmpfs, overlay), a loop-mounted
      # ext4 gives it one (as root, with the kit's mke2fs), else that run
      # falls back to a CPU quota.
      data=(); mnt=target/serve-disk
      case $(df --output=source target 2> /dev/null | tail -1) in
        /dev/*) ;;
        *)
          if truncate -s 4G target/serve-disk.img && mke2fs -q -t ext4 -F target/serve-disk.img &&
            mkdir -p "$mnt" && mount -o loop target/serve-disk.img "$mnt"; then
            data=(--data "$mnt/bench-serve")
            echo "serve: data on a loop-mounted ext4 ($(df --output=source "$mnt" | tail -1))"
          else
            echo "serve: no loop-mounted disk; the overload run falls back to a CPU quota"
          fi ;;
      esac
      "$sp" bench serve --server-cpus '0;0-3;0-7' --samples 1 --window 3 --peers axum,actix-web,statepipe-append,statepipe-adaptive \
        --peer "$kit/serve-peers/serve-peer" "${data[@]}" --json "$out/serve.json" > "$out/serve.txt" 2> "$out/serve.stderr"
      grep -A10 '^targets' "$out/serve.txt"
      grep -E '^ *overload' "$out/serve.txt"
      if mountpoint -q "$mnt"; then umount "$mnt"; rm -f target/serve-disk.img; fi ;;
    ring)
      part ring
      "$sp" bench ring --json "$out/ring.json" > "$out/ring.txt" 2> "$out/ring.stderr"
      tail -40 "$out/ring.txt" ;;
    apps)
      part apps
      for scale in 20 22 24 26; do
        "$sp" bench apps --case graph500/ --scale "$scale" --roots 16 --samples 3 \
          --json "$out/apps-scale$scale.json" > "$out/apps-scale$scale.txt" 2> "$out/apps-scale$scale.stderr"
        grep -E '^graph500/' "$out/apps-scale$scale.txt"
        if [ -x "$kit/bin/gapbs-bfs" ]; then
          OMP_NUM_THREADS=$(nproc) "$kit/bin/gapbs-bfs" -g "$scale" -k 16 -n 16 > "$out/gapbs-scale$scale.txt" 2>&1
          echo "gapbs scale $scale: $(grep -E 'Average Time' "$out/gapbs-scale$scale.txt")"
        fi
      done ;;
    *) echo "unknown part $p (pf, cluster, serve, ring, apps)" >&2; exit 2 ;;
  esac
done
part finished
