"""Whether installed files still hold what their wheel's RECORD says: the environment snapshot's second look.

A file hard-linked from uv's cache gets a new ctime whenever any venv on the machine links or unlinks the same
inode (a concurrent `uv pip install`), with its size, mtime and inode unchanged: from stat alone that is the same
as a rewrite whose mtime was set back, the case the snapshot's ctime is there for. A wheel's RECORD names the
SHA-256 of each file it installed, so such a file is excused only when its content hashes to what an unchanged
RECORD says. Everything is read bounded (RECORD size, bytes hashed in all) and without following a link; whatever
cannot be checked stays a change.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import stat
from collections.abc import Callable, Iterable
from typing import BinaryIO

MAX_RECORD_BYTES = 8 << 20  # torch's RECORD is 1.3 MB
MAX_HASHED_BYTES = 2 << 30  # one comparison hashes at most this much (torch's own files are ~0.8 GB)
CHUNK = 1 << 20


def _open_same(path: str, ino: int) -> tuple[BinaryIO, int] | None:
    """`path` opened without following a symlink, with its size, if it is still the regular file `ino`; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    handle = os.fdopen(fd, "rb")
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_ino != ino:
        handle.close()
        return None
    return handle, info.st_size


def _read_file(path: str, ino: int, limit: int) -> bytes | None:
    """The bytes of the regular file at `path` if it is still inode `ino` and at most `limit` bytes, else None."""
    opened = _open_same(path, ino)
    if opened is None:
        return None
    with opened[0] as handle:
        if opened[1] > limit:
            return None
        data = handle.read(limit + 1)
    return data if len(data) <= limit else None


def _sha256(path: str, ino: int, size: int) -> str | None:
    """RECORD's spelling of the file's SHA-256 (urlsafe base64, no padding), or None when it is no longer the
    regular file `ino` of `size` bytes."""
    opened = _open_same(path, ino)
    if opened is None:
        return None
    digest, read = hashlib.sha256(), 0
    with opened[0] as handle:
        if opened[1] != size:
            return None
        while read <= size and (chunk := handle.read(CHUNK)):
            digest.update(chunk)
            read += len(chunk)
    if read != size:
        return None
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def _record_hashes(record: str, text: str) -> dict[str, str]:
    """path -> sha256 for each line of a RECORD (paths relative to the folder holding the .dist-info)."""
    site = os.path.dirname(os.path.dirname(record))
    hashes: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.rsplit(",", 2)  # path (which may hold a comma, then quoted), hash, size
        if len(fields) != 3 or not fields[1].startswith("sha256="):
            continue
        name = fields[0][1:-1].replace('""', '"') if fields[0].startswith('"') else fields[0]
        hashes[os.path.normpath(os.path.join(site, name))] = fields[1].removeprefix("sha256=")
    return hashes


def vouched(paths: Iterable[str], snapshot: dict[str, tuple[int, ...]],
            unchanged: Callable[[str], bool]) -> set[str]:
    """Those of `paths` (files of `snapshot`: size, mtime, inode, ctime) whose content hashes to what a RECORD of
    the snapshot says, the RECORD itself `unchanged` between the two snapshots (so not rewritten to match)."""
    wanted = [p for p in paths if len(snapshot.get(p, ())) == 4]
    if not wanted:
        return set()
    records = [p for p in snapshot if p.endswith(".dist-info" + os.sep + "RECORD") and len(snapshot[p]) == 4
               and unchanged(p)]
    expected: dict[str, str] = {}
    for record in records:
        site = os.path.dirname(os.path.dirname(record)) + os.sep
        if not any(p.startswith(site) for p in wanted):
            continue
        data = _read_file(record, snapshot[record][2], MAX_RECORD_BYTES)
        if data is not None:
            with contextlib.suppress(UnicodeDecodeError):
                for name, value in _record_hashes(record, data.decode("utf-8")).items():
                    expected.setdefault(name, value)
    found, budget = set(), MAX_HASHED_BYTES
    for path in sorted(wanted):
        size, _, ino, _ = snapshot[path]
        if path not in expected or size > budget:
            continue
        budget -= size
        if _sha256(path, ino, size) == expected[path]:
            found.add(path)
    return found
