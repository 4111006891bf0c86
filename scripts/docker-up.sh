#!/usr/bin/env bash
# Make a docker engine and the docker sandbox's images available for the tests (CI runs this as root).
# Installs docker.io and debootstrap where missing (root + apt only), starts dockerd if no engine answers
# (its PID goes to $PIDFILE so scripts/docker-down.sh stops exactly that one), then builds the images,
# which are kept between runs (`automedbench images build` skips an image whose recipe is unchanged).
# Never fails its caller: where no engine can start it says why, and the docker tests skip.
# Set AUTOMEDBENCH_DOCKER=0 to skip all of it.
set -uo pipefail
cd "$(dirname "$0")/.."
PIDFILE=${AUTOMEDBENCH_DOCKERD_PIDFILE:-/tmp/automedbench-dockerd.pid}
LOG=${AUTOMEDBENCH_DOCKERD_LOG:-/tmp/automedbench-dockerd.log}
say() { echo "docker-up: $*"; }
engine_up() { command -v docker >/dev/null 2>&1 && docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

[ "${AUTOMEDBENCH_DOCKER:-1}" = 0 ] && { say "skipped (AUTOMEDBENCH_DOCKER=0)"; exit 0; }
if ! engine_up; then
  if [ "$(id -u)" != 0 ]; then say "no docker engine answers and not root: docker tests will skip"; exit 0; fi
  if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
      say "installing docker.io and debootstrap"
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap) \
        >/dev/null 2>&1 || say "apt-get install failed"
    fi
  fi
  command -v dockerd >/dev/null 2>&1 || { say "no dockerd: docker tests will skip"; exit 0; }
  say "starting dockerd (log $LOG)"
  dockerd --host unix:///var/run/docker.sock >"$LOG" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 60); do engine_up && break; sleep 0.5; done
  engine_up || { say "dockerd did not come up: $(tail -3 "$LOG" | tr '\n' ' ')"; exit 0; }
fi
say "engine $(docker version --format '{{.Server.Version}}')"
# Containers a crashed run left behind (the sandbox labels its own).
stale=$(docker ps -aq --filter label=org.automedbench.role)
[ -n "$stale" ] && docker rm -f $stale >/dev/null && say "removed $(echo "$stale" | wc -w) stale container(s)"
started=$(date +%s)
if .venv/bin/automedbench images build; then
  say "images ready in $(( $(date +%s) - started )) s"
else
  say "image build failed: docker tests will skip"
fi
exit 0
