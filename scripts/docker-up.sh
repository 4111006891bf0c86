#!/usr/bin/env bash
# Make a docker engine and the docker sandbox's images available for the tests (CI runs this as root).
# Installs docker.io and debootstrap where missing (root + apt only), starts dockerd if no engine answers,
# then builds the images, which are kept between runs (`automedbench images build` skips an image whose
# recipe is unchanged). Never fails its caller: where no engine can start it says why, and the docker
# tests skip. Set AUTOMEDBENCH_DOCKER=0 to skip all of it.
#
# Several checkouts on one host share one daemon, reference-counted: the daemon this script started has
# its PID in $PIDFILE, and every test run using it holds a file in $HOLDERS naming the PID of the process
# that holds it (the caller, scripts/test.sh). scripts/docker-down.sh drops the caller's hold and stops
# the daemon only when no live holder is left. A daemon this script did not start is held (so that stale
# containers are only cleared when no other test run is using the engine) but never stopped.
# Everything runs under flock($LOCK), so two test runs starting or stopping at once cannot race.
set -uo pipefail
cd "$(dirname "$0")/.."
PIDFILE=${AUTOMEDBENCH_DOCKERD_PIDFILE:-/tmp/automedbench-dockerd.pid}
HOLDERS=${PIDFILE%.pid}.holders
LOCK=$PIDFILE.lock
LOG=${AUTOMEDBENCH_DOCKERD_LOG:-/tmp/automedbench-dockerd.log}
DOCKERD=${AUTOMEDBENCH_DOCKERD:-dockerd}          # the tests put fakes here
DOCKER=${AUTOMEDBENCH_DOCKER_CLI:-docker}
HOLDER_PID=${AUTOMEDBENCH_DOCKER_HOLDER_PID:-$PPID}
say() { echo "docker-up: $*"; }
# With $AUTOMEDBENCH_DOCKER_STATUS set (scripts/test.sh runs this in the background), the outcome is written
# there at the end, atomically: "ready", or "unavailable: why". The docker tests wait for that file.
STATUS=${AUTOMEDBENCH_DOCKER_STATUS:-}
outcome="unavailable: scripts/docker-up.sh stopped early (see its log)"
report() {
  [ -n "$STATUS" ] || return 0
  printf '%s\n' "$outcome" >"$STATUS.tmp.$$" && mv -f "$STATUS.tmp.$$" "$STATUS"
}
trap report EXIT
skip() { outcome="unavailable: $1"; say "$1: docker tests will skip"; exit 0; }
engine_up() { command -v "$DOCKER" >/dev/null 2>&1 && "$DOCKER" version --format '{{.Server.Version}}' >/dev/null 2>&1; }
ours_alive() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }
live_holders() {  # holders whose process still runs; stale ones (a crashed test run) are removed
  local f n=0
  for f in "$HOLDERS"/*; do
    [ -f "$f" ] || continue
    if kill -0 "$(cat "$f")" 2>/dev/null; then n=$((n + 1)); else rm -f "$f"; fi
  done
  echo "$n"
}

[ "${AUTOMEDBENCH_DOCKER:-1}" = 0 ] && { outcome="unavailable: AUTOMEDBENCH_DOCKER=0"; say "skipped (AUTOMEDBENCH_DOCKER=0)"; exit 0; }
exec 9>"$LOCK"
flock 9
others=$(live_holders)
if ! engine_up; then
  [ "$(id -u)" = 0 ] || skip "no docker engine answers and not root"
  if ! command -v "$DOCKERD" >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    say "installing docker.io and debootstrap"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap) \
      >/dev/null 2>&1 || say "apt-get install failed"
  fi
  command -v "$DOCKERD" >/dev/null 2>&1 || skip "no dockerd"
  say "starting dockerd (log $LOG)"
  "$DOCKERD" --host unix:///var/run/docker.sock >"$LOG" 2>&1 9>&- &
  echo $! >"$PIDFILE"
  for _ in $(seq 60); do engine_up && break; sleep 0.5; done
  engine_up || skip "dockerd did not come up: $(tail -3 "$LOG" | tr '\n' ' ')"
fi
mkdir -p "$HOLDERS"
echo "$HOLDER_PID" >"$HOLDERS/$HOLDER_PID"
if ours_alive; then
  say "holding the shared dockerd $(cat "$PIDFILE") ($((others + 1)) holder(s))"
fi
say "engine $("$DOCKER" version --format '{{.Server.Version}}')"
# Containers a crashed run left behind (the sandbox labels its own) — only when no other test run holds
# the engine, since another run's live containers carry the same label.
if [ "$others" = 0 ]; then
  stale=$("$DOCKER" ps -aq --filter label=org.automedbench.role)
  [ -n "$stale" ] && "$DOCKER" rm -f $stale >/dev/null && say "removed $(echo "$stale" | wc -w) stale container(s)"
fi
flock -u 9
[ "${AUTOMEDBENCH_DOCKER_IMAGES:-1}" = 0 ] && { outcome=ready; exit 0; }
started=$(date +%s)
# Only the agent images the docker tests use (AUTOMEDBENCH_TEST_IMAGE_TRACKS, space-separated; "all" builds
# every track's): a track without its image runs on the default agent image.
track_args=()
if [ "${AUTOMEDBENCH_TEST_IMAGE_TRACKS:-segmentation}" != all ]; then
  for t in ${AUTOMEDBENCH_TEST_IMAGE_TRACKS:-segmentation}; do track_args+=(--track "$t"); done
fi
if .venv/bin/automedbench images build "${track_args[@]}"; then
  say "images ready in $(( $(date +%s) - started )) s"
  outcome=ready
else
  skip "image build failed (automedbench images build)"
fi
exit 0
