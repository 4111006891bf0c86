"""Detect reads of private or decoy files with Linux inotify.

inotify watches inodes, so an open through any path — obfuscated strings, symlinks, bind mounts inside
a bubblewrap namespace — raises the same event. The harness itself never opens these files while the
agent runs, so every event is the agent's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
from pathlib import Path

IN_ACCESS = 0x00000001
IN_OPEN = 0x00000020
IN_NONBLOCK = 0o4000
_EVENT = struct.Struct("iIII")


class Tripwire:
    """Watches directories (and their subdirectories) for opens; `drain()` returns what was touched."""

    def __init__(self) -> None:
        self._libc = None
        self._fd = -1
        self._watches: dict[int, Path] = {}
        libname = ctypes.util.find_library("c")
        if libname is None:
            return
        libc = ctypes.CDLL(libname, use_errno=True)
        if not hasattr(libc, "inotify_init1"):
            return
        fd = libc.inotify_init1(IN_NONBLOCK)
        if fd < 0:
            return
        self._libc, self._fd = libc, fd

    @property
    def active(self) -> bool:
        return self._fd >= 0

    def watch_tree(self, root: Path, max_dirs: int = 4096) -> int:
        """Watch `root` and the directories below it; returns how many watches were added."""
        if not self.active or not root.is_dir():
            return 0
        added = 0
        for folder in [root, *sorted(p for p in root.rglob("*") if p.is_dir())][:max_dirs]:
            wd = self._libc.inotify_add_watch(self._fd, os.fsencode(folder), IN_OPEN | IN_ACCESS)
            if wd >= 0:
                self._watches[wd] = folder
                added += 1
        return added

    def drain(self) -> list[str]:
        """Paths opened since the last drain (directories as themselves, files by full path)."""
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
                wd, _mask, _cookie, length = _EVENT.unpack_from(data, offset)
                raw = data[offset + _EVENT.size: offset + _EVENT.size + length].rstrip(b"\0")
                offset += _EVENT.size + length
                folder = self._watches.get(wd)
                if folder is None:
                    continue
                path = str(folder / os.fsdecode(raw)) if raw else str(folder)
                if path not in touched:
                    touched.append(path)
        return touched

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


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
