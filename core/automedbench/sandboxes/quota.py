"""A size-limited workspace: a sparse ext4 image loop-mounted over the run's workspace folder.

Bind mounts (bubblewrap, docker) carry no size limit, and a tmpfs would cost memory on a machine whose
agents download gigabytes of weights. A sparse image costs only the blocks written, caps the agent's
writes at its size (ENOSPC inside the sandbox, the host disk untouched beyond it), and mounted `nosuid,nodev`
it also makes set-id files and device nodes inert. It needs root and a loop device; elsewhere the run goes
on without one and the gap is recorded.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from attrs import define

from ..errors import UserError
from ..sandbox import DEFAULT_QUOTA_MB  # noqa: F401 (the default lives with the Sandbox interface)
from .reservations import Ledger

# The image never claims more than this share of the free space of the disk it lives on.
FREE_SHARE = 0.9
MIN_QUOTA_MB = 16
MOUNT_OPTIONS = "loop,nosuid,nodev,noatime,noinit_itable"


@define
class WorkspaceQuota:
    """A mounted workspace image; `release` unmounts it and removes the image (or keeps it for inspection)."""

    image: Path
    mountpoint: Path
    size_mb: int
    reservation: str = ""
    ledger: Ledger | None = None

    def describe(self) -> str:
        return (f"workspace quota {self.size_mb} MB (a sparse ext4 image loop-mounted nosuid,nodev: "
                "writes past it fail inside the sandbox)")

    def release(self, keep: bool = False) -> None:
        """Unmount (lazily if a stray process still holds it); keep the image only when asked."""
        if subprocess.run(["umount", str(self.mountpoint)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(self.mountpoint)], capture_output=True)
        with contextlib.suppress(OSError):
            self.mountpoint.rmdir()
        if not keep:
            self.image.unlink(missing_ok=True)
        if self.ledger is not None and self.reservation:  # the promise ends with the run (a kept image is idle)
            self.ledger.release(self.reservation)
            self.reservation = ""


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


def _mkfs() -> str:
    return shutil.which("mkfs.ext4") or next(str(p) for p in (Path("/usr/sbin/mkfs.ext4"), Path("/sbin/mkfs.ext4"))
                                            if p.exists())


class NoRoom(UserError):
    """The disk cannot hold the smallest workspace once every running run's promise is kept: the run is refused
    in one line (exit 2) before anything ran."""


def mount_workspace(workspace: Path, size_mb: int,
                    ledger: Ledger | None = None) -> tuple[WorkspaceQuota | None, str]:
    """Mount a fresh image of `size_mb` at `workspace` (created, must be new); (quota, "") or (None, why not).

    The image's size is reserved in the ledger first (what other running runs may still write is not free);
    raises NoRoom when not even MIN_QUOTA_MB can be promised."""
    if size_mb <= 0:
        return None, "no disk quota on /workspace (disabled: --workspace-quota-mb 0)"
    why = unsupported()
    if why:
        return None, f"no disk quota on /workspace ({why})"
    parent = workspace.parent
    image = parent / f"{workspace.name}.img"
    ledger = ledger or Ledger()
    entry, free, others = ledger.reserve(parent, image, size_mb << 20, FREE_SHARE, MIN_QUOTA_MB << 20)
    if entry is None:
        raise NoRoom(f"cannot reserve disk for the workspace: {free >> 20} MB free where the run folder is, "
                     f"{others >> 20} MB of it promised to other running runs (at least {MIN_QUOTA_MB} MB needed); "
                     "wait for them to finish or pass a smaller --workspace-quota-mb")
    size = entry.size_bytes >> 20
    try:
        workspace.mkdir(mode=0o700)
    except OSError:
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
        quota = WorkspaceQuota(image, workspace, size, entry.id, ledger)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = exc.stderr.decode(errors="replace").strip() if getattr(exc, "stderr", None) else str(exc)
        image.unlink(missing_ok=True)
        ledger.release(entry.id)
        return None, f"no disk quota on /workspace (loop mount failed: {detail[:200]})"
    except BaseException:  # interrupted (Ctrl-C, SIGTERM) mid-mount: the caller never gets the quota to release
        if os.path.ismount(workspace):
            WorkspaceQuota(image, workspace, size, entry.id, ledger).release()
        else:
            image.unlink(missing_ok=True)
            ledger.release(entry.id)
        raise
    try:
        with contextlib.suppress(OSError):
            (workspace / "lost+found").rmdir()
        os.chmod(workspace, 0o700)
    except BaseException:
        quota.release()
        raise
    return quota, ""
