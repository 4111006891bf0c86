"""Filesystem helpers: atomic writes, hashing, and confinement of agent-supplied paths."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from .errors import UserError

_CHUNK = 1 << 20


def current_umask() -> int:
    """The process umask, read without changing it (Linux /proc; else the usual 022)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


def atomic_write_bytes(path: Path, data: bytes, *, shared: bool = False) -> None:
    """Write to a temporary sibling, fsync, then rename over the target.

    mkstemp makes the file 0600; `shared=True` gives it the mode a plain open() would (0666 & ~umask).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            if shared:
                os.fchmod(handle.fileno(), 0o666 & ~current_umask())
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str, *, shared: bool = False) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), shared=shared)


def printable(name: str) -> str:
    """A file name as valid text: bytes that are not UTF-8 (surrogate-escaped by os) become \\xNN."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tree_digest(root: Path) -> str:
    """One hash over the relative paths and contents of every regular file below `root`."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(sha256_file(path).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def confine(root: Path, relative: str) -> Path:
    """Resolve `relative` below `root`; anything that escapes (.., absolute, symlinks out) is refused."""
    if not relative or "\0" in relative:
        raise UserError(f"invalid path {relative!r}")
    candidate = Path(relative)
    if candidate.is_absolute():
        raise UserError(f"path {relative!r} must be relative to {root}")
    base = root.resolve()
    resolved = (base / candidate).resolve()
    if resolved != base and base not in resolved.parents:
        raise UserError(f"path {relative!r} escapes {root}")
    return resolved


def dir_size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())
