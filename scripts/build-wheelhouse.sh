#!/usr/bin/env bash
# Build a wheel of every distribution in this repository (the core, each plugins/<track>/ and each built-in
# distribution under core/<name>/: campaign, docker, models) into one folder, as a release would publish
# them. Then, in any venv:
#   pip install --find-links DIR 'automedbench[detection]'
# installs the core and that track (third-party dependencies come from the package index).
# Usage: scripts/build-wheelhouse.sh [DIR]   (default: dist/wheelhouse)
# NO_BUILD_ISOLATION=1 builds in $PYTHON's own environment (it must hold the build backend, setuptools>=68):
# the same wheels without pip setting up an isolated build environment per distribution (the tests use it).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist/wheelhouse}
mkdir -p "$out"
PY=${PYTHON:-python3}
dists=(.)
for dir in plugins/*/ core/*/; do
  [ -f "$dir/pyproject.toml" ] && dists+=("${dir%/}")
done
# setuptools' scratch folder keeps files a distribution no longer has (moved or deleted modules): start clean
for dir in "${dists[@]}"; do rm -rf "$dir/build"; done
echo "building ${#dists[@]} wheels into $out: ${dists[*]}"
isolation=()
[ "${NO_BUILD_ISOLATION:-0}" = 1 ] && isolation=(--no-build-isolation)
"$PY" -m pip wheel -q --disable-pip-version-check --no-deps "${isolation[@]}" -w "$out" "${dists[@]}"
ls "$out"
