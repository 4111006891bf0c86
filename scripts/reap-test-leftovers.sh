#!/usr/bin/env bash
# usage: reap-test-leftovers.sh MARK [WHAT]
# Stop every process still running that a test tier started: those whose environment holds
# AUTOMEDBENCH_TEST_RUN=MARK exactly (scripts/test.sh gives each tier's pytest a mark of its own, and every
# process a test starts without scrubbing its environment inherits it: `ray start` nodes with their
# raylets and workers, CLI subprocesses, detached helpers). A tier killed by its timeout skips its
# teardown, so a Ray cluster test could leave its nodes running. Nothing without this exact mark is touched (not `ray stop`, which would stop
# every Ray node on the machine, other checkouts' included). SIGTERM, then SIGKILL after
# $AUTOMEDBENCH_REAP_GRACE_S (default 5) seconds.
set -uo pipefail
mark=${1:?usage: reap-test-leftovers.sh MARK [WHAT]}
what=${2:-the tests}
unset AUTOMEDBENCH_TEST_RUN  # the greps below must not carry the mark themselves
grace=${AUTOMEDBENCH_REAP_GRACE_S:-5}
marked() {  # PIDs (other than this script's) whose environment carries the mark: one grep over all of them
  local env pid
  while IFS= read -r env; do
    pid=${env#/proc/}; pid=${pid%/environ}
    [ "$pid" = "$$" ] || [ "$pid" = "$BASHPID" ] || echo "$pid"
  done < <(grep -lzxF "AUTOMEDBENCH_TEST_RUN=$mark" /proc/[0-9]*/environ 2>/dev/null)
}
mapfile -t left < <(marked)
[ "${#left[@]}" -gt 0 ] || exit 0
echo "reap-test-leftovers: ${#left[@]} process(es) $what left running:"
for pid in "${left[@]}"; do
  printf '  %s %s\n' "$pid" "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-160)"
done
kill -TERM "${left[@]}" 2>/dev/null
deadline=$(( $(date +%s) + grace ))
while [ "$(date +%s)" -lt "$deadline" ]; do
  mapfile -t left < <(marked)
  [ "${#left[@]}" -gt 0 ] || exit 0
  sleep 0.5
done
mapfile -t left < <(marked)
kill -KILL "${left[@]}" 2>/dev/null
sleep 0.5
mapfile -t left < <(marked)
[ "${#left[@]}" -gt 0 ] && echo "reap-test-leftovers: still running: ${left[*]}"
exit 0
