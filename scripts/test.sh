#!/usr/bin/env bash
# Set up .venv with everything the tests need, then run the whole test suite.
# This is the README's test command, and exactly what .ci/run runs.
# Every plugin under plugins/*/ is installed (with its `test` extra when it has one), its optional
# setup.sh runs as root first (system packages such as a JRE), and its tests/ folder joins the run.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each checkout stages into its own data folder: test runs of two checkouts never share (or delete) data.
export AUTOMEDBENCH_DATA=${AUTOMEDBENCH_DATA:-$PWD/.data}
say() { printf '[test.sh %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

PY=${PYTHON:-python3}
apt_ok=0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then apt_ok=1; fi
apt_updated=0
apt_install() {  # apt_install PKG... : best effort, once per package set
  [ "$apt_ok" = 1 ] || return 1
  if [ "$apt_updated" = 0 ]; then apt-get update -qq >/dev/null 2>&1 || true; apt_updated=1; fi
  apt-get install -y -qq "$@" >/dev/null 2>&1
}
if ! command -v bwrap >/dev/null 2>&1; then
  # bubblewrap makes the local sandbox real; without it the isolation tests skip with the reason.
  say "installing bubblewrap"; apt_install bubblewrap || echo "note: bubblewrap not installed"
fi
if ! command -v slirp4netns >/dev/null 2>&1; then
  # slirp4netns gives a network-enabled task its own namespace with outbound access but no host loopback;
  # without it such tasks share the host's network (a declared gap) and the namespace tests skip.
  say "installing slirp4netns"; apt_install slirp4netns || echo "note: slirp4netns not installed"
fi
if ! command -v chromium >/dev/null 2>&1; then
  # headless Chromium renders the leaderboard's HTML report in a test; without it that test skips.
  say "installing chromium"; apt_install chromium || echo "note: chromium not installed"
fi
for setup in plugins/*/setup.sh; do
  [ -f "$setup" ] || continue
  if [ "$(id -u)" = 0 ]; then say "plugin set-up: $setup"; bash "$setup" || echo "note: $setup failed"
  else echo "note: $setup needs root; skipped"; fi
done
[ -x .venv/bin/python ] || { say "creating .venv"; "$PY" -m venv .venv; }
PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
[ -d /opt/wheels ] && PIP+=(--find-links /opt/wheels)
# CPU torch first (MONAI is the reference Dice in the tests); a bare `torch` would pull a CUDA build.
say "installing CPU torch 2.13.0"
"${PIP[@]}" "torch==2.13.0"
plugin_args=()
for dir in plugins/*/; do
  dir=${dir%/}
  [ -f "$dir/pyproject.toml" ] || continue
  if grep -qE '^test *=' "$dir/pyproject.toml"; then plugin_args+=(-e "$dir[test]"); else plugin_args+=(-e "$dir"); fi
done
# The built-in distributions beside the core (core/<name>/: campaign, docker, models), editable like the
# tracks, with the extras that bring their SDKs. Not through the root's extras of the same names: pip
# refuses an editable and a folder reference to one distribution in one command.
declare -A builtin_extras=([docker]="[sdk]" [models]="[openai,anthropic]")
builtin_args=()
for dir in core/*/; do
  dir=${dir%/}
  [ -f "$dir/pyproject.toml" ] && builtin_args+=(-e "$dir${builtin_extras[$(basename "$dir")]:-}")
done
say "installing the core, ${#builtin_args[@]} built-in and ${#plugin_args[@]} plugin arguments: ${builtin_args[*]} ${plugin_args[*]}"
"${PIP[@]}" -e ".[dev,reference]" "${builtin_args[@]}" "${plugin_args[@]}"
# Ray for the sweep's --executor ray test (skips when the install fails).
say "installing ray"
"${PIP[@]}" "ray>=2.60" || echo "note: ray not installed"
# The wheelhouse script must keep building every distribution here (tests/test_install_tracks.py installs
# tracks alone from it, and from an editable clone, in fresh venvs; marked slow).
say "ruff"
.venv/bin/ruff check core plugins tests benchmarks
# A docker engine (started here if need be, or held if another checkout's test run started it; stopped
# below once no test run holds it) and images for the docker sandbox tests.
say "docker engine and images"
bash scripts/docker-up.sh
test_dirs=(tests)
for dir in plugins/*/tests; do [ -d "$dir" ] && test_dirs+=("$dir"); done
say "pytest ${test_dirs[*]}"
rc=0
.venv/bin/python -m pytest -q "${test_dirs[@]}" "$@" || rc=$?
bash scripts/docker-down.sh
say "done (pytest exit $rc)"
exit $rc
