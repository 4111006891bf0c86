"""Detect reads of private or decoy files with Linux inotify.

inotify watches inodes, so an open through any path — obfuscated strings, symlinks, bind mounts inside
a bubblewrap namespace — raises the same event. The harness itself never opens these files while the
agent runs, so every event is the agent's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import struct
from collections.abc import Iterator
from pathlib import Path

from .fsutil import lock_if_free, remove_tree
from .harnessstate import ensure_state_dir
from .libc import libc as own_libc

IN_ACCESS = 0x00000001
IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004  # also a change of link count: a hard link made to a watched file
IN_OPEN = 0x00000020
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
READS = IN_OPEN | IN_ACCESS
CHANGES = (IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF
           | IN_MOVE_SELF)
IN_NONBLOCK = 0o4000
_EVENT = struct.Struct("iIII")
DECOYS = "decoys"  # in the harness state folder: one folder of bait files per run's agent phase


class Tripwire:
    """Watches files for opens and changes, and directories for changes; `drain()` returns what was touched.

    Files are watched themselves, not only through their folder: a directory watch sees only opens made
    through that directory, so a hard link or a move elsewhere would read the same inode unseen.
    Creating, moving, linking, deleting or modifying anything watched counts too (`modified` names it):
    a reference replaced by the agent's own prediction is never opened, yet it decides the score.
    """

    def __init__(self) -> None:
        self._libc = None
        self._fd = -1
        self._watches: dict[int, Path] = {}
        self.modified: set[str] = set()
        self.unwatched = 0  # paths that could not be watched (limit reached): reads of them go unseen
        self.overflowed = False  # the kernel's event queue overflowed: later events were lost
        libc = own_libc()
        if libc is None or not hasattr(libc, "inotify_init1"):
            return
        fd = libc.inotify_init1(IN_NONBLOCK)
        if fd < 0:
            return
        self._libc, self._fd = libc, fd

    @property
    def active(self) -> bool:
        return self._fd >= 0

    def watch_tree(self, root: Path, max_paths: int = 16384) -> int:
        """Watch `root`, the directories below it and their files; returns how many watches were added."""
        if not self.active or not root.is_dir():
            return 0
        added = 0
        below = sorted(p for p in root.rglob("*") if not p.is_symlink() and (p.is_dir() or p.is_file()))
        paths = [root, *below]
        self.unwatched += max(0, len(paths) - max_paths)
        for path in paths[:max_paths]:
            # a folder trips on changes only: listing it (an honest `find /` or `ls`) reads no reference;
            # its files trip on any open of their content, through whatever path
            mask = CHANGES if path.is_dir() else READS | CHANGES
            wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), mask)
            if wd >= 0:
                self._watches[wd] = path
                added += 1
            else:
                self.unwatched += 1
        return added

    def drain(self) -> list[str]:
        """Paths opened or changed since the last drain (directories as themselves, files by full path)."""
        if not self.active:
            return []
        touched: list[str] = []
        while True:
            try:
                data = os.read(self._fd, 64 * 1024)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    break
                raise
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
                raw = data[offset + _EVENT.size: offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                if mask & IN_Q_OVERFLOW:
                    self.overflowed = True
                    continue
                folder = self._watches.get(wd)
                if folder is None:
                    continue
                path = str(folder / os.fsdecode(raw)) if raw else str(folder)
                if mask & CHANGES:
                    self.modified.add(path)
                if path not in touched:
                    touched.append(path)
        return touched

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@contextlib.contextmanager
def run_decoy_dir() -> Iterator[Path]:
    """A new, empty folder for one run's decoys, in the harness state folder, removed when the run's agent phase
    ends; folders left by a harness that was killed outright (SIGKILL, the OOM killer) are removed first.

    Not in the run folder: a `local-plain` call of any run reads the host's files, and its opening another run's
    decoy there tripped that run's wire (a concurrent verified run ended breached, Task 0). Every plain call covers
    every state folder of the user (`plainns`), and `local` and `docker` bind only this folder, at the decoy paths.
    The folder's `<name>.lock` beside it (never inside: the agent sees the folder) is flocked while the run lives,
    as a mounted workspace's `workspace.lock` is: one that can be locked is a dead run's."""
    root = ensure_state_dir() / DECOYS
    root.mkdir(mode=0o700, exist_ok=True)
    reap_stale_decoys(root)
    name = secrets.token_hex(8)
    making = root / f".{name}.new"  # locked before it is named as a lock: a reaper never sees it free
    lock = os.open(making, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        os.rename(making, root / f"{name}{LOCK_SUFFIX}")
        folder = root / name  # made after its lock: a folder without one is never a live run's
        folder.mkdir(mode=0o755)
        try:
            yield folder
        finally:
            remove_tree(folder)
        (root / f"{name}{LOCK_SUFFIX}").unlink(missing_ok=True)
    finally:
        os.close(lock)


LOCK_SUFFIX = ".lock"


def reap_stale_decoys(root: Path) -> list[Path]:
    """Remove the decoy folders under `root` whose run is gone (their lock can be taken); returns them. A folder
    with no lock beside it (an older harness's) is left, as `reap_stale_workspaces` leaves an unlocked mount."""
    reaped = []
    for entry in sorted(root.iterdir()):
        if not entry.name.endswith(LOCK_SUFFIX) or entry.is_symlink() or not entry.is_file():
            continue
        try:
            fd = lock_if_free(entry)
        except BlockingIOError:  # held: that run is alive
            continue
        if fd is None:
            continue
        try:
            folder = root / entry.name.removesuffix(LOCK_SUFFIX)
            if os.path.lexists(folder):
                remove_tree(folder)
                reaped.append(folder)
            entry.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return reaped


def plant_decoys(private: Path, decoy_root: Path, max_cases: int = 3) -> Path:
    """Mirror the names (never the contents) of a few private cases as bait files."""
    decoy_root.mkdir(parents=True, exist_ok=True)
    (decoy_root / "README").write_text("decoy: references are not available inside the sandbox\n")
    cases = sorted(p for p in private.iterdir() if p.is_dir())[:max_cases] if private.is_dir() else []
    for case in cases:
        target = decoy_root / case.name
        target.mkdir(exist_ok=True)
        for ref in sorted(p for p in case.iterdir() if p.is_file()):
            (target / ref.name).write_bytes(b"AUTOMEDBENCH-DECOY\n")
    for top in sorted(p for p in private.iterdir() if p.is_file()) if private.is_dir() else []:
        (decoy_root / top.name).write_bytes(b"AUTOMEDBENCH-DECOY\n")
    return decoy_root
