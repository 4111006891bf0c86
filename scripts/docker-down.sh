#!/usr/bin/env bash
# Stop the dockerd that scripts/docker-up.sh started (by its PID), and nothing else.
set -uo pipefail
PIDFILE=${AUTOMEDBENCH_DOCKERD_PIDFILE:-/tmp/automedbench-dockerd.pid}
[ -f "$PIDFILE" ] || exit 0
pid=$(cat "$PIDFILE")
if kill -0 "$pid" 2>/dev/null; then
  kill -TERM "$pid"
  for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  echo "docker-down: stopped dockerd $pid"
fi
rm -f "$PIDFILE"
