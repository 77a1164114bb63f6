#!/usr/bin/env bash
# Builds and runs the Go peer of the thread-ring case of `statepipe bench pipeline`:
# 503 goroutines passing a token over unbuffered channels. Prints one JSON document on
# stdout (impl "go", case "thread-ring/503", unit "ns/hop"), progress on stderr.
#
#   bench/go/run.sh [--quick] [--hops N] [--samples N] [--json FILE]
#
# Defaults: 2,000,000 hops x 5 samples (about 1 s a sample at 100 ns/hop);
# --quick: 200,000 hops x 3 samples. --json FILE also writes the document to FILE.
# Needs Go 1.21+ (no modules are downloaded). Without Go it says so and exits 0.
# GOMAXPROCS=1 bench/go/run.sh runs the ring on one OS thread. Not run by CI.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
hops=2000000
samples=5
json=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) hops=200000; samples=3; shift ;;
        --hops) hops="${2:?--hops needs a number}"; shift 2 ;;
        --hops=*) hops="${1#--hops=}"; shift ;;
        --samples) samples="${2:?--samples needs a number}"; shift 2 ;;
        --samples=*) samples="${1#--samples=}"; shift ;;
        --json) json="${2:?--json needs a path}"; shift 2 ;;
        --json=*) json="${1#--json=}"; shift ;;
        -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done

go_bin="$(command -v go || true)"
if [ -z "$go_bin" ] && [ -x /usr/local/go/bin/go ]; then
    go_bin=/usr/local/go/bin/go
fi
if [ -z "$go_bin" ]; then
    echo "bench/go: Go is not installed (no 'go' on PATH nor /usr/local/go/bin/go): skipping the Go thread-ring peer" >&2
    exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# GOTOOLCHAIN=local: never download another toolchain; the module has no dependencies.
(cd "$here" && GOTOOLCHAIN=local GOFLAGS=-buildvcs=false "$go_bin" build -o "$tmp/thread_ring" .)

"$tmp/thread_ring" -hops "$hops" -samples "$samples" > "$tmp/out.json"
cat "$tmp/out.json"
if [ -n "$json" ]; then
    cp "$tmp/out.json" "$json"
fi
