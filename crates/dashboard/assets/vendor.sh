#!/usr/bin/env bash
# vendor.sh — fetch uPlot from the npm registry, verify it, and copy the
# files the dashboard serves into assets/vendor/ (checked in; the page never
# uses a CDN). Re-run after changing UPLOT_VERSION and UPLOT_SHA512.
#
#   bash crates/dashboard/assets/vendor.sh
set -euo pipefail

UPLOT_VERSION="1.6.32"
# npm "integrity" of uplot-1.6.32.tgz (sha512, base64).
UPLOT_SHA512="KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw=="
URL="https://registry.npmjs.org/uplot/-/uplot-${UPLOT_VERSION}.tgz"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dest="${here}/vendor"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

curl --fail --silent --show-error --location --output "${work}/uplot.tgz" "${URL}"

got="$(openssl dgst -sha512 -binary "${work}/uplot.tgz" | base64 | tr -d '\n')"
if [[ "${got}" != "${UPLOT_SHA512}" ]]; then
    echo "vendor.sh: sha512 mismatch for ${URL}" >&2
    echo "  expected ${UPLOT_SHA512}" >&2
    echo "  got      ${got}" >&2
    exit 1
fi

tar -xzf "${work}/uplot.tgz" -C "${work}"
mkdir -p "${dest}"
cp "${work}/package/dist/uPlot.iife.min.js" "${dest}/uPlot.iife.min.js"
cp "${work}/package/dist/uPlot.min.css" "${dest}/uPlot.min.css"
cp "${work}/package/LICENSE" "${dest}/LICENSE-uPlot"
printf '%s\n' "${UPLOT_VERSION}" > "${dest}/VERSION"
echo "vendored uPlot ${UPLOT_VERSION} into ${dest}"
