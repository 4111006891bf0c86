"""A pids cgroup per local sandbox session: caps fork bombs and finds every process a call left behind.

Used where the harness may create cgroups (root on a cgroup v1 `pids` hierarchy). The child joins the
group before it execs, so `setsid`/double-fork descendants stay inside and `kill_all()` reaches them.
Elsewhere `available()` is false and the local sandbox falls back to RLIMIT_NPROC (non-root only).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from pathlib import Path

PIDS_ROOT = Path("/sys/fs/cgroup/pids")


class PidsGroup:
    def __init__(self, limit: int, root: Path = PIDS_ROOT) -> None:
        self.limit = limit
        self.path: Path | None = None
        if os.geteuid() != 0 or not (root / "cgroup.procs").exists():
            return
        path = root / f"automedbench-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return
        self.path = path

    @property
    def available(self) -> bool:
        return self.path is not None

    def join(self) -> None:
        """Move the calling process into the group (called in the child, before exec)."""
        if self.path is not None:
            with open(self.path / "cgroup.procs", "w") as fh:
                fh.write(str(os.getpid()))

    def pids(self) -> list[int]:
        if self.path is None:
            return []
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self, wait_s: float = 5.0) -> int:
        """SIGKILL every process in the group until it is empty; returns how many were signalled."""
        killed = 0
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
            time.sleep(0.02)
        return killed

    def close(self) -> None:
        if self.path is None:
            return
        self.kill_all()
        with contextlib.suppress(OSError):
            self.path.rmdir()
        self.path = None
