#!/usr/bin/env bash
# Renders the kustomize base and every overlay and validates each against
# the Kubernetes API schemas of K8S_VERSION (default 1.30.0), strictly
# (unknown fields are errors), then checks what the schemas cannot
# (check.py). Offline: kubernetes-validate ships its schemas.
#
# Renderer: `kustomize build`, else `kubectl kustomize`. Validator:
# kubernetes-validate (pip install kubernetes-validate). Exits 3, saying
# which, when a tool is missing; 1 when a rendering is invalid.
set -euo pipefail
cd "$(dirname "$0")"
K8S_VERSION=${K8S_VERSION:-1.30.0}

if command -v kustomize >/dev/null 2>&1; then
  render() { kustomize build "$1"; }
elif command -v kubectl >/dev/null 2>&1 && kubectl kustomize --help >/dev/null 2>&1; then
  render() { kubectl kustomize "$1"; }
else
  echo "missing tool: kustomize or kubectl (to render the overlays)" >&2
  exit 3
fi
command -v kubernetes-validate >/dev/null 2>&1 \
  || { echo "missing tool: kubernetes-validate (pip install kubernetes-validate)" >&2; exit 3; }
python3 -c "import yaml" 2>/dev/null \
  || { echo "missing tool: python3 with PyYAML (a kubernetes-validate dependency)" >&2; exit 3; }

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for dir in base overlays/*/; do
  dir=${dir%/}
  file="$out/$(echo "$dir" | tr / -).yaml"
  render "$dir" >"$file"
  kubernetes-validate --kubernetes-version "$K8S_VERSION" --strict --quiet "$file"
  echo "$dir: valid against Kubernetes $K8S_VERSION ($(grep -c '^kind:' "$file") resources)"
  python3 check.py "$file" | sed "s|^$file|$dir|"
done
