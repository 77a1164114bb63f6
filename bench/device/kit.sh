#!/usr/bin/env bash
# Builds what a bare, offline many-core machine needs to run the many-core
# benchmarks (run.sh) into .device-kit/ at the repository root (ignored by
# git; carry it there). Run from the repository root, here, with network.
# With --keep-awake it also builds statepipe with
# bench/device/keep-awake.patch applied (pool threads kept
# awake through a filter's run), which run.sh's pf part then measures
# beside the plain build: about 5 minutes more here, 15 s more there.
set -euo pipefail
variant=${1:-}
[ -z "$variant" ] || [ "$variant" = --keep-awake ] || { echo "usage: kit.sh [--keep-awake]" >&2; exit 2; }
root=$(git rev-parse --show-toplevel)
cd "$root"
kit=.device-kit
echo "kit: building statepipe and the serve peers (release)"
cargo build --release --locked -p statepipe
cargo build --release --locked --manifest-path bench/serve-peers/Cargo.toml
command -v wrk > /dev/null || { echo "kit: installing wrk"; apt-get install -y wrk; }
command -v oha > /dev/null || { echo "kit: installing oha"; cargo install oha --locked; }
if [ -n "$variant" ]; then
  echo "kit: building the keep-awake variant (a worktree of HEAD with the patch, target/keep-awake)"
  wt=$(mktemp -d)
  git worktree add --quiet --detach "$wt" HEAD
  (cd "$wt" && git apply "$root/bench/device/keep-awake.patch" &&
    CARGO_TARGET_DIR="$root/target/keep-awake" cargo build --release --locked -p statepipe)
  git worktree remove --force "$wt"
fi
rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/lib" "$kit/serve-peers"
# GAPBS's bfs, the Graph500 peer of run.sh's apps part, where GAPBS_SRC
# names a checkout of its repository (https://github.com/sbeamer/gapbs;
# not part of this one): built there with its own Makefile.
if [ -n "${GAPBS_SRC:-}" ]; then
  echo "kit: building GAPBS's bfs in $GAPBS_SRC"
  make -C "$GAPBS_SRC" bfs
  cp "$GAPBS_SRC/bfs" "$kit/bin/gapbs-bfs"
fi
cp target/release/statepipe "$kit/bin/"
[ -z "$variant" ] || cp target/keep-awake/release/statepipe "$kit/bin/statepipe-keep-awake"
cp bench/serve-peers/target/release/serve-peer "$kit/serve-peers/"
# mke2fs: run.sh's serve part makes a loop-mounted ext4 where target/ is
# on no block device (the overload run caps that disk's writes).
cp "$(command -v wrk)" "$(command -v oha)" "$(command -v mke2fs)" "$kit/bin/"
strip "$kit"/bin/* "$kit/serve-peers/serve-peer"
# The shared libraries a stock glibc system may lack (wrk's LuaJIT,
# OpenSSL): carried, found through LD_LIBRARY_PATH by run.sh. glibc itself
# stays the machine's (these binaries need no newer one than this host's).
for b in "$kit"/bin/* "$kit/serve-peers/serve-peer"; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$kit/lib/"; done
git rev-parse HEAD > "$kit/commit.txt"
git status --short > "$kit/status.txt"
ldd --version | sed -n 1p > "$kit/glibc.txt"  # sed reads it all: no SIGPIPE under pipefail
du -sh "$kit"
echo "kit: ready; carry .device-kit and run: bash bench/device/run.sh [pf] [cluster] [serve] [ring] [apps]"
