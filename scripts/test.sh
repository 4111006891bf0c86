#!/usr/bin/env bash
# Set up .venv with everything the tests need, then run the whole test suite.
# This is the README's test command, and exactly what .ci/run runs.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ "$(id -u)" = 0 ] && ! command -v bwrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  # bubblewrap makes the local sandbox real; without it the isolation tests skip with the reason.
  (apt-get update -qq && apt-get install -y -qq bubblewrap) >/dev/null 2>&1 || echo "note: bubblewrap not installed"
fi
if [ "$(id -u)" = 0 ] && ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  # headless Chromium renders the leaderboard's HTML report in a test; without it that test skips.
  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 || echo "note: chromium not installed"
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
[ -d /opt/wheels ] && PIP+=(--find-links /opt/wheels)
# CPU torch first (MONAI is the reference Dice in the tests); a bare `torch` would pull a CUDA build.
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" -e ".[dev,reference,openai,anthropic,docker]" -e plugins/segmentation -e "plugins/vqa[parquet]"
# Ray for the sweep's --executor ray test (skips when the install fails).
"${PIP[@]}" "ray>=2.9" || echo "note: ray not installed"
.venv/bin/ruff check core plugins tests benchmarks
# A docker engine (started here if need be, stopped again below) and images for the docker sandbox tests.
bash scripts/docker-up.sh
rc=0
.venv/bin/python -m pytest -q "$@" || rc=$?
bash scripts/docker-down.sh
exit $rc
