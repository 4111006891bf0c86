"""A size-limited workspace: a sparse ext4 image loop-mounted over the run's workspace folder.

Bind mounts (bubblewrap, docker) carry no size limit, and a tmpfs would cost memory on a machine whose
agents download gigabytes of weights. A sparse image costs only the blocks written, caps the agent's
writes at its size (ENOSPC inside the sandbox, the host disk untouched beyond it), and mounted `nosuid,nodev`
it also makes set-id files and device nodes inert. It needs root and a loop device; elsewhere the run goes
on without one and the gap is recorded.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import time
from pathlib import Path

from attrs import define

from ..errors import UserError
from ..freeze import MAX_TOTAL_BYTES
from ..fsutil import lock_if_free
from ..pilot import MAX_PILOT_BYTES
from ..plan_artefacts import MAX_ARTEFACT_BYTES, MAX_SCRIPT_BYTES, MAX_SCRIPTS
from ..records import MIN_WORKSPACE_MB
from ..sandbox import DEFAULT_QUOTA_MB  # noqa: F401 (the default lives with the Sandbox interface)
from ..trajectory import MAX_AGENT_PHASE_BYTES, SIDE_BUDGET_BYTES
from .plainns import decode_path as _decode
from .reservations import Ledger, largest

# The image never claims more than this share of the free space of the disk it lives on.
FREE_SHARE = 0.9
MIN_QUOTA_MB = MIN_WORKSPACE_MB
MOUNT_OPTIONS = "loop,nosuid,nodev,noatime,noinit_itable"
# Beside the image: held (flock) by the process whose mount it is for as long as it is mounted. The kernel drops
# the lock when that process dies, even by SIGKILL: a mount whose lock can be taken has no owner left.
LOCK_NAME = "workspace.lock"


@define
class WorkspaceQuota:
    """A mounted workspace image; `release` unmounts it and removes the image (or keeps it for inspection)."""

    image: Path
    mountpoint: Path
    size_mb: int
    reservation: str = ""
    ledger: Ledger | None = None
    lock_fd: int = -1

    def describe(self) -> str:
        return (f"workspace quota {self.size_mb} MB (a sparse ext4 image loop-mounted nosuid,nodev: "
                "writes past it fail inside the sandbox)")

    def release(self, keep: bool = False) -> None:
        """Unmount (lazily if a stray process still holds it); keep the image only when asked."""
        _unmount(self.mountpoint)
        with contextlib.suppress(OSError):
            self.mountpoint.rmdir()
        if not keep:
            self.image.unlink(missing_ok=True)
        if self.lock_fd >= 0:  # unmounted: nothing left for the lock to guard
            (self.mountpoint.parent / LOCK_NAME).unlink(missing_ok=True)
            os.close(self.lock_fd)
            self.lock_fd = -1
        if self.ledger is not None and self.reservation:  # the promise ends with the run (a kept image is idle)
            self.ledger.release(self.reservation)
            self.reservation = ""


def _unmount(mountpoint: Path) -> None:
    if subprocess.run(["umount", str(mountpoint)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)


def _loop_mounts() -> list[tuple[Path, str]]:
    """(mount point, loop device) of every ext4 loop mount this process sees."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text(errors="surrogateescape").splitlines():
            fields = line.split(" ")
            tail = fields[fields.index("-") + 1:] if "-" in fields else []
            if len(fields) > 4 and len(tail) >= 2 and tail[0] == "ext4" and tail[1].startswith("/dev/loop"):
                found.append((Path(_decode(fields[4])), tail[1]))
    return found


def _backing_file(device: str) -> str:
    try:
        return Path(f"/sys/block/{Path(device).name}/loop/backing_file").read_text().rstrip("\n")
    except OSError:
        return ""


def reap_stale_workspaces(runs: Path, wait_s: float = 0.0) -> list[Path]:
    """Unmount workspaces under `runs` (any depth: a sweep moves old attempts aside) left by a harness process
    that died without unwinding (SIGKILL, OOM kill); returns their mount points.

    Only a mount this code made and nobody owns is touched: an ext4 loop mount at `.../workspace` whose loop
    device is backed by the `workspace.img` beside it, with a `workspace.lock` beside it that can be locked
    (its owner, which holds that lock while mounted, is gone). Older runs, which made no lock, are left.
    `wait_s`: keep trying that long while some are still held — a process just SIGKILLed drops its lock only
    once the kernel lets it die, which on a loaded machine (its last I/O on the workspace) can take seconds."""
    if os.geteuid() != 0:
        return []
    runs = runs.resolve()
    deadline = time.monotonic() + wait_s
    reaped, held = _reap_once(runs)
    while held and time.monotonic() < deadline:
        time.sleep(0.2)
        more, held = _reap_once(runs)
        reaped += more
    return reaped


def _reap_once(runs: Path) -> tuple[list[Path], int]:
    """One pass of `reap_stale_workspaces`: the mounts it unmounted, and how many are still held."""
    reaped, held = [], 0
    for mountpoint, device in _loop_mounts():
        if mountpoint.name != "workspace" or runs not in mountpoint.parents:
            continue
        image = mountpoint.parent / f"{mountpoint.name}.img"
        if _backing_file(device) not in (str(image), f"{image} (deleted)"):
            continue
        lock = mountpoint.parent / LOCK_NAME
        try:
            fd = lock_if_free(lock)
        except BlockingIOError:  # held: the run that mounted it is alive
            held += 1
            continue
        if fd is None:
            continue
        try:
            if os.path.ismount(mountpoint):  # not already reaped by another process that held the lock before us
                _unmount(mountpoint)
                reaped.append(mountpoint)
            lock.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return reaped, held


def unsupported() -> str | None:
    """Why no quota can be mounted here, or None."""
    if os.geteuid() != 0:
        return "needs root to loop-mount a size-limited workspace"
    if not Path("/dev/loop-control").exists():
        return "no loop devices"
    for tool in ("mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists() and not Path("/sbin", tool).exists():
            return f"{tool} not found"
    return None


def _drop_lock(folder: Path, fd: int) -> None:
    (folder / LOCK_NAME).unlink(missing_ok=True)
    os.close(fd)


def _mkfs() -> str:
    return shutil.which("mkfs.ext4") or next(str(p) for p in (Path("/usr/sbin/mkfs.ext4"), Path("/sbin/mkfs.ext4"))
                                            if p.exists())


# What the agent can make the harness write beside its image, whatever the image's size: the trajectory of the agent
# phase, the tool output's side files, the plan artefacts and the scripts its calls named. Promised with the image,
# so a full disk while the agent was confined is never its doing (before, a reply of 20 MB of code six times, or
# one file hard-linked as every plot, filled the disk outside the quota: an infrastructure failure).
RECORD_WRITES = MAX_AGENT_PHASE_BYTES + SIDE_BUDGET_BYTES + MAX_ARTEFACT_BYTES + MAX_SCRIPTS * MAX_SCRIPT_BYTES


def copies_of(size: int) -> int:
    """What a run copies of an image of `size` bytes onto the run folder's disk, at most: the freeze of its
    outputs and the pilots' copies, and what the agent can make the harness write beside them (RECORD_WRITES),
    reserved with the image, so a concurrent run cannot take that room."""
    return min(size, MAX_TOTAL_BYTES) + min(size, MAX_PILOT_BYTES) + RECORD_WRITES


class NoRoom(UserError):
    """The disk cannot hold the workspace the run asks for once every running run's promise is kept: the run is
    refused in one line (exit 2) before anything ran, naming the free space, what was asked and the option."""


def no_room(size_mb: int, free: int, others: int, where: Path) -> str:
    """The refusal, one line: what was asked, the free space and the promises, and the option that changes it."""
    budget = int(max(0, free - others) * FREE_SHARE)  # the image and its copies (`copies_of`) together
    possible = largest(budget, lambda n: n + copies_of(n) <= budget) >> 20
    fix = (f"pass --workspace-quota-mb {possible} or less (0: no quota) or wait for them to finish"
           if possible >= MIN_QUOTA_MB else "wait for them to finish, free disk space, or pass --workspace-quota-mb 0 "
           "(no quota)")
    return (f"cannot reserve disk for the workspace: {size_mb} MB asked (the task's declared need unless "
            f"--workspace-quota-mb sets it), {free >> 20} MB free where the runs folder is ({where}), "
            f"{others >> 20} MB of it promised to other running runs: at most {possible} MB can be promised now; {fix}")


def mount_workspace(workspace: Path, size_mb: int,
                    ledger: Ledger | None = None) -> tuple[WorkspaceQuota | None, str]:
    """Mount a fresh image of `size_mb` at `workspace` (created, must be new); (quota, "") or (None, why not).

    The image's whole size is reserved in the ledger first (what other running runs may still write is not free,
    and the image never takes more than FREE_SHARE of the rest); raises NoRoom when it cannot be: a workspace
    smaller than asked would fail the agent halfway for want of disk the task said it needs."""
    if size_mb <= 0:
        return None, "no disk quota on /workspace (disabled: --workspace-quota-mb 0)"
    why = unsupported()
    if why:
        return None, f"no disk quota on /workspace ({why})"
    parent = workspace.parent
    image = parent / f"{workspace.name}.img"
    reap_stale_workspaces(parent.parent)  # mounts of runs in the same folder whose process was killed
    ledger = ledger or Ledger()
    size_mb = max(size_mb, MIN_QUOTA_MB)
    entry, free, others = ledger.reserve(parent, image, size_mb << 20, FREE_SHARE, size_mb << 20, copies_of)
    if entry is None:
        raise NoRoom(no_room(size_mb, free, others, parent.parent))  # the runs folder: this run's goes
    size = entry.size_bytes >> 20
    try:
        workspace.mkdir(mode=0o700)
    except OSError:
        ledger.release(entry.id)
        raise
    try:
        lock_fd = os.open(parent / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        fcntl.flock(lock_fd, fcntl.LOCK_EX)  # held until release: the mount has a live owner
    except OSError:
        workspace.rmdir()
        ledger.release(entry.id)
        raise
    try:
        with open(image, "xb") as fh:  # sparse: only the blocks the agent writes take host disk
            fh.truncate(size << 20)
        uid, gid = os.getuid(), os.getgid()
        subprocess.run([_mkfs(), "-q", "-F", "-m", "0", "-O", "^has_journal",
                        "-E", f"lazy_itable_init=1,root_owner={uid}:{gid}", str(image)],
                       check=True, capture_output=True, timeout=120)
        subprocess.run(["mount", "-o", MOUNT_OPTIONS, str(image), str(workspace)],
                       check=True, capture_output=True, timeout=60)
        quota = WorkspaceQuota(image, workspace, size, entry.id, ledger, lock_fd)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = exc.stderr.decode(errors="replace").strip() if getattr(exc, "stderr", None) else str(exc)
        image.unlink(missing_ok=True)
        ledger.release(entry.id)
        _drop_lock(parent, lock_fd)
        return None, f"no disk quota on /workspace (loop mount failed: {detail[:200]})"
    except BaseException:  # interrupted (Ctrl-C, SIGTERM) mid-mount: the caller never gets the quota to release
        if os.path.ismount(workspace):
            WorkspaceQuota(image, workspace, size, entry.id, ledger, lock_fd).release()
        else:
            image.unlink(missing_ok=True)
            ledger.release(entry.id)
            _drop_lock(parent, lock_fd)
        raise
    try:
        with contextlib.suppress(OSError):
            (workspace / "lost+found").rmdir()
        os.chmod(workspace, 0o700)
    except BaseException:
        quota.release()
        raise
    return quota, ""
