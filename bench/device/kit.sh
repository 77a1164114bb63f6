#!/usr/bin/env bash
# Builds what a bare, offline many-core machine needs to run the many-core
# benchmarks (run.sh) into .device-kit/ at the repository root (ignored by
# git; carry it there). Run from the repository root, here, with network.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
kit=.device-kit
echo "kit: building statepipe and the serve peers (release)"
cargo build --release --locked -p statepipe
cargo build --release --locked --manifest-path bench/serve-peers/Cargo.toml
command -v wrk > /dev/null || { echo "kit: installing wrk"; apt-get install -y wrk; }
command -v oha > /dev/null || { echo "kit: installing oha"; cargo install oha --locked; }
rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/lib" "$kit/serve-peers"
cp target/release/statepipe "$kit/bin/"
cp bench/serve-peers/target/release/serve-peer "$kit/serve-peers/"
cp "$(command -v wrk)" "$(command -v oha)" "$kit/bin/"
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
ldd --version | head -1 > "$kit/glibc.txt"
du -sh "$kit"
echo "kit: ready; carry .device-kit and run: bash bench/device/run.sh [pf] [cluster] [serve] [ring]"
