"""A pids cgroup per local sandbox session: caps fork bombs and finds every process a call left behind.

Used where the harness may create cgroups (root on a cgroup v1 `pids` hierarchy). The child joins the
group before it execs, so `setsid`/double-fork descendants stay inside and `kill_all()` reaches them.
Elsewhere `available()` is false and the local sandbox falls back to RLIMIT_NPROC (non-root only).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import time
from collections.abc import Callable
from pathlib import Path

PIDS_ROOT = Path("/sys/fs/cgroup/pids")
MEMORY_ROOT = Path("/sys/fs/cgroup/memory")
PREFIX = "automedbench-"
_NAME = re.compile(rf"{PREFIX}(\d+)-[0-9a-f]+")  # the owner's pid, then a random tag
# the kernel's fixed inode number of the initial PID namespace: only there does /proc show every process on the host
INIT_PID_NS = "pid:[4026531836]"


def reap_stale(root: Path) -> list[Path]:
    """Remove the empty groups under `root` whose harness process is gone (SIGKILLed or OOM-killed before it could
    close them): each one left is a leaked kernel object on a long-lived machine. Returns the groups removed.

    Only from the initial PID namespace (elsewhere a live owner's pid may be invisible), only a group named like
    ours whose owner pid has no /proc entry, and only an empty one (the kernel refuses to remove any other)."""
    try:
        if os.readlink("/proc/self/ns/pid") != INIT_PID_NS:
            return []
        names = os.listdir(root)
    except OSError:
        return []
    removed = []
    for name in names:
        match = _NAME.fullmatch(name)
        if match is None or os.path.exists(f"/proc/{match[1]}"):
            continue
        with contextlib.suppress(OSError):  # not empty (EBUSY), or reaped by another process first
            (root / name).rmdir()
            removed.append(root / name)
    return removed


class V1Group:
    """A fresh cgroup (v1) of one controller with the given settings, or unavailable (`path` None)."""

    def __init__(self, root: Path, settings: dict[str, str], optional: tuple[str, ...] = ()) -> None:
        self.path: Path | None = None
        if os.geteuid() != 0 or not (root / "cgroup.procs").exists():
            return
        reap_stale(root)  # a new session's start: the groups of harness processes that died unwinding nothing
        path = root / f"{PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
        try:
            path.mkdir()
            for name, value in settings.items():
                if name in optional and not (path / name).exists():
                    continue
                (path / name).write_text(value)
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
        return kill_until_gone(self.pids, wait_s)

    def close(self) -> None:
        if self.path is None:
            return
        self.kill_all()
        with contextlib.suppress(OSError):
            self.path.rmdir()
        self.path = None


class PidsGroup(V1Group):
    def __init__(self, limit: int, root: Path = PIDS_ROOT) -> None:
        self.limit = limit
        super().__init__(root, {"pids.max": str(limit)})


class MemoryGroup(V1Group):
    """One limit on everything a session's processes hold together, tmpfs, shm and memfd pages included
    (the kernel charges those to the cgroup of the process that wrote them)."""

    def __init__(self, limit_mb: int, root: Path = MEMORY_ROOT) -> None:
        self.limit_mb = limit_mb
        limit = str(limit_mb << 20)
        settings = {"memory.limit_in_bytes": limit, "memory.memsw.limit_in_bytes": limit}
        if limit_mb <= 0:
            self.path = None
            return
        super().__init__(root, settings, optional=("memory.memsw.limit_in_bytes",))


PR_SET_CHILD_SUBREAPER = 36


def _make_subreaper() -> bool:
    """Orphans of our children are re-parented to this process instead of init, so they stay findable."""
    from ..libc import libc

    c = libc()
    if c is None:
        return False
    try:
        return c.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _read_proc(path: str) -> bytes:
    with open(path, "rb", buffering=0) as handle:  # no pathlib, no buffer: read after every call, for every process
        return handle.read()


def _proc_table() -> dict[int, tuple[int, bytes]]:
    """pid -> (parent pid, raw environment or b"" when unreadable) for every visible process."""
    table: dict[int, tuple[int, bytes]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = _read_proc(f"/proc/{entry}/stat")
            ppid = int(raw[raw.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
        try:
            environ = _read_proc(f"/proc/{entry}/environ")
        except OSError:
            environ = b""
        table[int(entry)] = (ppid, environ)
    return table


class ProcessSweep:
    """Without a pids cgroup (no root): find every process a call left behind and kill it.

    A call's processes are its descendants (the harness is a child subreaper, so a double fork or setsid
    re-parents them to the harness rather than to init, never out of reach) and any process carrying the
    session's token in its environment. Only a process that both lost its ancestry to the harness (orphaned)
    and re-exec'd itself with a cleared environment is missed: the README declares it.
    """

    ENV = "AUTOMEDBENCH_SESSION"

    def __init__(self, subreaper: bool = True, active: bool = True) -> None:
        self.token = secrets.token_hex(12)
        # inactive where a PID namespace holds every process of a call and dies with it (bwrap): reading the
        # whole process table after every call would find nothing there (about 4 ms a call)
        self.active = active
        # only where nothing else contains a call (no pids cgroup, no PID namespace): the harness then
        # inherits every orphan, so it must also reap the ones it kills (`known`)
        self.subreaper = _make_subreaper() if subreaper else False
        self._marker = f"{self.ENV}={self.token}".encode()
        self.known: set[int] = set()

    def env(self) -> dict[str, str]:
        return {self.ENV: self.token}

    def _members(self, roots: set[int]) -> set[int]:
        table = _proc_table()
        me = os.getpid()
        found = {pid for pid, (_, environ) in table.items() if self._marker in environ.split(b"\0")}
        found |= {pid for pid in roots if pid in table}
        grew = True
        while grew:
            grew = False
            for pid, (ppid, _) in table.items():
                if ppid in found and pid not in found:
                    found.add(pid)
                    grew = True
        found.discard(me)
        return found

    def kill_all(self, roots: set[int] | None = None, wait_s: float = 5.0) -> int:
        if not self.active:
            return 0

        def alive() -> list[int]:  # the call's live processes, remembered (and the dead reaped) on each pass
            members = self._members(set(roots or ()))
            self.known |= members
            living = [pid for pid in members if not _zombie(pid)]
            self._reap()
            return living

        return kill_until_gone(alive, wait_s)

    def _reap(self) -> None:
        """Collect the exit of every process of ours that has died (re-parented orphans end up our children)."""
        for pid in list(self.known):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not our child (or already collected)
                done = pid
            except OSError:
                continue
            if done == pid:
                self.known.discard(pid)


def kill_until_gone(alive: Callable[[], list[int]], wait_s: float) -> int:
    """SIGKILL every process `alive()` names, asking again every 20 ms, until it names none or `wait_s` has
    passed; returns how many signals were sent."""
    killed = 0
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        pids = alive()
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.02)
    return killed


def _zombie(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True
    return raw[raw.rindex(b")") + 2:raw.rindex(b")") + 3] in (b"Z", b"X")
