#!/usr/bin/env bash
# Builds the LMAX Disruptor 4 peer with Maven and runs it on the topologies of
# `statepipe bench ring`. Writes the shared bench JSON (impl "lmax").
#
#   bench/java/run.sh [--quick] [--samples N] [--wait busy-spin|yielding|blocking]
#                     [--only 1p1c,3p1c/batch,latency] [--json FILE]
#
# Default JSON path: bench/java/results.json. Needs a JDK 17+ and Maven 3.6+; the first
# build downloads com.lmax:disruptor:4.0.0 and the Maven plugins, later builds work offline.
# Extra JVM flags: JAVA_OPTS="...". Not run by CI.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
json="$here/results.json"
args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --json) json="${2:?--json needs a path}"; shift 2 ;;
        --json=*) json="${1#--json=}"; shift ;;
        *) args+=("$1"); shift ;;
    esac
done

# Offline first (works after the first fetch), online if something is missing.
(cd "$here" && { mvn -q -B -o package 2>/dev/null || mvn -q -B package; })

# shellcheck disable=SC2086
exec java ${JAVA_OPTS:--Xms256m -Xmx1g} -jar "$here/target/statepipe-bench-lmax.jar" \
    --json "$json" ${args[@]+"${args[@]}"}
