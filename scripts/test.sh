#!/usr/bin/env bash
# Set up .venv with everything the tests need, then run the whole test suite in two tiers.
# This is the README's test command, and exactly what .ci/run runs.
# Every plugin under plugins/*/ is installed (with its `test` extra when it has one), its optional
# setup.sh runs as root first (system packages such as a JRE), and its tests/ folder joins the run.
#
# Phases, each timed (a summary is printed at the end):
#   installs      system packages (root + apt), .venv and pip; skipped when nothing they depend on changed
#   ruff
#   docker        engine + images (scripts/docker-up.sh), in the BACKGROUND while the fast tier runs
#   fast tier     every test not marked `slow` or `docker` (pytest -m "not slow and not docker")
#   slow tier     the rest (-m "slow or docker"); docker tests wait for the background build
# The two -m expressions are complements: every collected test runs in exactly one tier. Both tiers run
# (a failing fast tier does not hide the slow tier's result) and the script fails if either fails.
# Tiers run on pytest-xdist workers (one per core, at most 4; AUTOMEDBENCH_TEST_WORKERS=N sets it, 0 turns
# it off; the fast tier takes one more, AUTOMEDBENCH_FAST_WORKERS=N / AUTOMEDBENCH_SLOW_WORKERS=N set a tier's
# alone), whole files per worker. Arguments are passed to both tiers' pytest.
# Bounds: AUTOMEDBENCH_FAST_TIMEOUT (s, default 2400) and AUTOMEDBENCH_SLOW_TIMEOUT (default 2700); the
# docker build gets AUTOMEDBENCH_DOCKER_TIMEOUT (default 2400) and a docker test waits for it that long.
# After each tier, processes it started and left running (a timed-out tier skips teardown) are stopped by
# scripts/reap-test-leftovers.sh: only those carrying that tier's AUTOMEDBENCH_TEST_RUN mark.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each checkout stages into its own data folder: test runs of two checkouts never share (or delete) data.
export AUTOMEDBENCH_DATA=${AUTOMEDBENCH_DATA:-$PWD/.data}
# Bytecode caches are written (__pycache__, ignored by git) even where the caller's environment says
# PYTHONDONTWRITEBYTECODE: uv installs no .pyc, and without them every process compiles what it imports from
# source, every time (torch 5.2 -> 2.1 CPU-s, inspect_ai 3.1 -> 1.8, ray 0.8 -> 0.5 per process), and each
# slow-tier worker re-does pytest's assertion rewriting of ~300 test modules (9.7 -> 3.1 CPU-s of collection).
# BENCHMARKS.md, "A fresh clone's first test run".
unset PYTHONDONTWRITEBYTECODE
say() { printf '[test.sh %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
STARTED=$(date +%s)
PHASES=()
phase_start() { PHASE=$1; PHASE_T=$(date +%s); say "== $PHASE"; }
phase_end() {  # phase_end OUTCOME [END-EPOCH-SECONDS]
  local took=$(( ${2:-$(date +%s)} - PHASE_T ))
  PHASES+=("$(printf '%-28s %6d s  %s' "$PHASE" "$took" "$1")")
  say "== $PHASE: $took s ($1)"
}

phase_start "installs"
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
plugin_args=()
for dir in plugins/*/; do
  dir=${dir%/}
  [ -f "$dir/pyproject.toml" ] || continue
  if grep -qE '^test *=' "$dir/pyproject.toml"; then plugin_args+=(-e "$dir[test]"); else plugin_args+=(-e "$dir"); fi
done
# The built-in distributions beside the core (core/<name>/: campaign, docker, models, testkit), editable like
# the tracks, with the extras that bring their SDKs. Not through the root's extras of the same names (nor
# `dev`, which holds the test kit: the root comes with `tools`): pip refuses an editable and a folder
# reference to one distribution in one command.
declare -A builtin_extras=([docker]="[sdk]" [models]="[openai,anthropic]" [inspect]="[inspect]")
builtin_args=()
for dir in core/*/; do
  dir=${dir%/}
  [ -f "$dir/pyproject.toml" ] && builtin_args+=(-e "$dir${builtin_extras[$(basename "$dir")]:-}")
done
# pip takes a minute even when everything is installed: skip it while nothing it reads has changed (the
# distributions' pyproject files, this script, the interpreter, the local wheels) and the venv imports.
stamp=.venv/.test-installs
want=$( { .venv/bin/python -VV; cat pyproject.toml core/*/pyproject.toml plugins/*/pyproject.toml scripts/test.sh
          cat scripts/uv-from-pip-config.py
          ls /opt/wheels 2>/dev/null || true; } | sha256sum | cut -c1-32)
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && .venv/bin/python -c 'import automedbench, pytest, xdist' 2>/dev/null; then
  say "pip: nothing changed since the last install (remove $stamp to force)"
else
  rm -f "$stamp"
  PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
  [ -d /opt/wheels ] && PIP+=(--find-links /opt/wheels)
  # CPU torch pinned (MONAI is the reference Dice in the tests): a bare `torch` would pull a CUDA build.
  everything=("torch==2.13.0" -e ".[tools,reference]" "${builtin_args[@]}" "${plugin_args[@]}")
  say "installing CPU torch 2.13.0, the core, ${#builtin_args[@]} built-in and ${#plugin_args[@]} plugin arguments: ${builtin_args[*]} ${plugin_args[*]}"
  # uv first: the same requirements in one resolve, installed in parallel from its cache (13 s against pip's
  # ~100 s here, caches warm). It reads no pip configuration, so scripts/uv-from-pip-config.py passes the machine's on
  # (index, extra indexes, find-links, constraints). pip is the fallback: same set, one step at a time.
  installed=0
  if "${PIP[@]}" uv >/dev/null 2>&1 && .venv/bin/python scripts/uv-from-pip-config.py >.venv/.uv-args; then
    mapfile -t uv_args <.venv/.uv-args
    if .venv/bin/uv pip install -q --python .venv/bin/python "${uv_args[@]}" "${everything[@]}" "setuptools>=68" wheel "ray>=2.60"; then
      installed=1
    else
      echo "note: uv could not install the set; pip installs it instead"
    fi
  else
    echo "note: uv not available; pip installs instead"
  fi
  if [ "$installed" = 0 ]; then
    # Every distribution here builds with setuptools: installed once in the venv, the 13 editable builds reuse
    # it instead of each making its own isolated build environment (25 s -> 7 s here).
    "${PIP[@]}" "torch==2.13.0"
    "${PIP[@]}" "setuptools>=68" wheel
    "${PIP[@]}" --no-build-isolation "${everything[@]}"
    # Ray for the sweep's --executor ray test (skips when the install fails).
    say "installing ray"
    "${PIP[@]}" "ray>=2.60" || echo "note: ray not installed"
  fi
  # Bytecode for what the tracks' sandboxed reference solutions import that no harness process imports first: a
  # sandbox cannot write it (read-only venv), so each sandboxed `import torch, transformers` compiled both (6.7 ->
  # 2.9 CPU-s) and loading a checkpoint ~630 modules more (sympy, mpmath, tokenizers, ...: one import writes those;
  # the classification demo's classifier 10.4 -> 6.0 CPU-s a process). Once per install; the rest: see above.
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  precompile=(); for pkg in torch transformers; do [ -d "$site/$pkg" ] && precompile+=("$site/$pkg"); done
  if [ "${#precompile[@]}" -gt 0 ]; then
    say "compiling the bytecode of ${#precompile[@]} packages the sandboxed solutions import"
    .venv/bin/python -m compileall -q -j 0 "${precompile[@]}" >/dev/null 2>&1 || true
    .venv/bin/python -c 'from transformers import modeling_utils, image_processing_utils, AutoModel, AutoImageProcessor' >/dev/null 2>&1 || true
  fi
  echo "$want" >"$stamp"
fi
# The wheelhouse script must keep building every distribution here (tests/test_install_tracks.py installs
# tracks alone from it, and from an editable clone, in fresh venvs; marked slow).
phase_end done

phase_start "ruff"
.venv/bin/ruff check core plugins tests benchmarks
phase_end passed

# A docker engine (started here if need be, or held if another checkout's test run started it; stopped
# below once no test run holds it) and images for the docker sandbox tests, built while the fast tier runs.
# docker-up.sh writes "ready" or "unavailable: why" to the status file; docker tests wait for it.
export AUTOMEDBENCH_DOCKER_HOLDER_PID=$$
# The run's scratch (and pytest's temporary folders, below) outside /tmp: every local-plain sandbox call scans /tmp
# for daemon sockets to cover (sandboxes/plainns.py, up to 50 000 entries), and a tier's folders there (staged
# demos, runs) made each call cost the whole budget, 0.15-0.3 CPU-s instead of 0.035 (a sandbox-heavy set of five
# files in a fresh /tmp holding a test run's 61 000 entries: 59.3 -> 52.0 CPU-s)
work=$(mktemp -d -p /var/tmp automedbench-test.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$work"' EXIT
export AUTOMEDBENCH_DOCKER_STATUS=$work/docker-status
# the demos staged by the fast tier, copied by the slow one rather than generated again (~14 CPU-s: the test kit's
# amb_data_root, BENCHMARKS.md "Test time, round 15")
export AUTOMEDBENCH_TEST_DEMOS=$work/demos
export AUTOMEDBENCH_DOCKER_WAIT=${AUTOMEDBENCH_DOCKER_TIMEOUT:-2400}
docker_log=$work/docker-up.log
docker_t=$(date +%s)
say "docker engine and images: building in the background (log shown when done)"
( rc=0
  timeout --kill-after=30 "$AUTOMEDBENCH_DOCKER_WAIT" bash scripts/docker-up.sh >"$docker_log" 2>&1 || rc=$?
  echo "$rc $(date +%s)" >"$work/docker-end" ) &
docker_pid=$!
docker_done() {  # wait for the background build once; print its log and time
  [ -n "${docker_pid:-}" ] || return 0
  wait "$docker_pid" || true
  docker_pid=
  local rc ended
  read -r rc ended <"$work/docker-end" || { rc=?; ended=$(date +%s); }
  [ -f "$AUTOMEDBENCH_DOCKER_STATUS" ] || echo "unavailable: scripts/docker-up.sh ended with exit $rc" >"$AUTOMEDBENCH_DOCKER_STATUS"
  sed 's/^/  | /' "$docker_log"
  PHASE="docker engine + images" PHASE_T=$docker_t phase_end "$(cat "$AUTOMEDBENCH_DOCKER_STATUS"), in the background" "$ended"
}

test_dirs=(tests)
for dir in plugins/*/tests; do [ -d "$dir" ] && test_dirs+=("$dir"); done
workers=${AUTOMEDBENCH_TEST_WORKERS:-$(nproc 2>/dev/null || echo 1)}
[ "$workers" -gt 4 ] && workers=4
xdist_for() {  # xdist_for N : pytest-xdist's arguments for N workers in $xdist (none for 0 or 1)
  xdist=()
  # whole files in collection order (tests/conftest.py puts the longest first), not xdist's default by test count
  if [ "$1" -gt 1 ]; then xdist=(-n "$1" --dist loadfile --no-loadscope-reorder); fi
}
tier() {  # tier NAME TIMEOUT MARK-EXPRESSION PYTEST-ARGS... : one bounded pytest run; its outcome in $tier_rc
  local name=$1 limit=$2 expr=$3
  shift 3
  phase_start "$name"
  say "pytest -m \"$expr\" ${xdist[*]} (at most $limit s)"
  tier_rc=0
  # every process this tier starts inherits the mark; what is still running after it is stopped (below)
  local mark="${name// /-}-$$-$(date +%s%N)"
  # pytest's temporary files in a folder of this run's own (removed with $work at exit): with the default
  # numbered folders under /tmp/pytest-of-$USER, shared by every checkout on the host, a tier would delete the
  # oldest of them on start and exit (other test runs' staged demos and red-team runs, ~500k entries each),
  # inside its own time
  AUTOMEDBENCH_TEST_RUN=$mark timeout --kill-after=30 "$limit" \
    .venv/bin/python -m pytest -m "$expr" "${xdist[@]}" --basetemp "$work/${name// /-}" "$@" || tier_rc=$?
  echo  # pytest's progress line may be cut short by the timeout
  # a tier killed by its timeout skips its teardown (a Ray cluster test's `ray start` nodes); a finished
  # tier should leave nothing, and anything it did leave is named here too
  bash scripts/reap-test-leftovers.sh "$mark" "the $name"
  case $tier_rc in
    0) phase_end passed ;;
    5) tier_rc=0; phase_end "no tests selected" ;;
    124|137) phase_end "TIMED OUT after $limit s" ;;
    *) phase_end "FAILED (pytest exit $tier_rc)" ;;
  esac
}
# The fast tier's tests wait more than they compute (sandbox and process starts, polling): with 3 workers on 2
# cores, 1.2 cores were busy on average. One worker more than the cores: 332 -> 287 s here (4 workers: 303 s).
# AUTOMEDBENCH_FAST_WORKERS=N sets it. The slow tier keeps one per core (3 there measured slower: 539 vs 490 s).
fast_workers=${AUTOMEDBENCH_FAST_WORKERS:-$(( workers > 1 ? workers + 1 : workers ))}
[ "$fast_workers" -gt 4 ] && fast_workers=4
xdist_for "$fast_workers"
tier "fast tier" "${AUTOMEDBENCH_FAST_TIMEOUT:-2400}" "not slow and not docker" -q "${test_dirs[@]}" "$@"
fast_rc=$tier_rc
# The slow tier: clusters, fresh-venv installs, full-size layouts, long sandbox runs, and the docker tests
# (which wait for the background build; report it first if it is done).
if ! kill -0 "$docker_pid" 2>/dev/null; then docker_done; fi
xdist_for "${AUTOMEDBENCH_SLOW_WORKERS:-$workers}"
tier "slow tier" "${AUTOMEDBENCH_SLOW_TIMEOUT:-2700}" "slow or docker" -q -rs --durations=15 "${test_dirs[@]}" "$@"
slow_rc=$tier_rc
docker_done
bash scripts/docker-down.sh

say "phase times:"
printf '  %s\n' "${PHASES[@]}"
say "total $(( $(date +%s) - STARTED )) s; fast tier exit $fast_rc, slow tier exit $slow_rc"
[ "$fast_rc" = 0 ] && [ "$slow_rc" = 0 ]
