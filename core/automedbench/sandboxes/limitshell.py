"""A call's cgroups and rlimits set by a shell that then execs the call, so the harness starts it without fork().

A Popen with `preexec_fn` must fork() the harness: the kernel copies the page tables of every mapping, and the
child tears them down again at exec. In a process holding torch and MONAI (a test worker, a harness that scored
a surface-metric task in-process) that is 33-40 CPU-ms a call, 8 with torch alone, 2-3 in the bare CLI; without
`preexec_fn` Python vforks (under 1 ms) and the shell (dash) costs about 1 ms. BENCHMARKS.md, "Test time, round 11".
"""

from __future__ import annotations

import os
from pathlib import Path

SHELL = "/bin/sh"
# $1: the address-space limit in KiB (0: none); then each cgroup.procs file to join, up to "--"; then the call.
# Any failure exits 125 before the call runs (the call's code never starts outside its limits).
_SCRIPT = ('as=$1; shift; while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift; '
           'ulimit -c 0 || exit 125; if [ "$as" != 0 ]; then ulimit -v "$as" || exit 125; fi; exec "$@"')


def limits_prefix(cgroup_procs: list[Path], address_space_bytes: int) -> list[str] | None:
    """The argv prefix that joins the given cgroups (their cgroup.procs files), sets RLIMIT_CORE to 0 and
    RLIMIT_AS (soft and hard; 0: unlimited) and execs the rest; None where there is no shell at SHELL."""
    if not os.access(SHELL, os.X_OK):
        return None
    kib = -(-address_space_bytes // 1024) if address_space_bytes > 0 else 0
    return [SHELL, "-c", _SCRIPT, "automedbench-call-limits", str(kib), *map(str, cgroup_procs), "--"]
