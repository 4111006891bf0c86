#!/usr/bin/env bash
# Drop this test run's hold on the shared dockerd that scripts/docker-up.sh started; stop that daemon (by
# its PID, and nothing else) only when no other live test run holds it. See docker-up.sh.
set -uo pipefail
PIDFILE=${AUTOMEDBENCH_DOCKERD_PIDFILE:-/tmp/automedbench-dockerd.pid}
HOLDERS=${PIDFILE%.pid}.holders
LOCK=$PIDFILE.lock
HOLDER_PID=${AUTOMEDBENCH_DOCKER_HOLDER_PID:-$PPID}
exec 9>"$LOCK"
flock 9
rm -f "$HOLDERS/$HOLDER_PID"
[ -f "$PIDFILE" ] || exit 0  # the engine was not started by docker-up.sh: never stopped here
left=0
for f in "$HOLDERS"/*; do
  [ -f "$f" ] || continue
  if kill -0 "$(cat "$f")" 2>/dev/null; then left=$((left + 1)); else rm -f "$f"; fi
done
if [ "$left" != 0 ]; then
  echo "docker-down: dockerd $(cat "$PIDFILE") still held by $left other test run(s); left running"
  exit 0
fi
pid=$(cat "$PIDFILE")
if kill -0 "$pid" 2>/dev/null; then
  kill -TERM "$pid"
  for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
  echo "docker-down: stopped dockerd $pid"
fi
rm -f "$PIDFILE"
rm -rf "$HOLDERS"
