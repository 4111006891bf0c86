"""Filesystem helpers: atomic writes, hashing, and confinement of agent-supplied paths."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

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


def encode_text(text: str) -> bytes:
    """The one encoder for every file the harness writes from text an agent may have shaped: UTF-8, with
    what UTF-8 cannot hold (a lone surrogate from a JSON escape like \\ud800) written as the visible
    escape `\\udXXX`, never an exception that would end a run as an infrastructure failure."""
    return text.encode("utf-8", "backslashreplace")


def atomic_write_text(path: Path, text: str, *, shared: bool = False) -> None:
    """Write text atomically (`atomic_write_bytes`) through `encode_text`. JSON is first made by
    `serialize.dumps`, which escapes the backslash of such a character too, so it reads back as text."""
    atomic_write_bytes(path, encode_text(text), shared=shared)


def append_line_locked(path: Path, line: bytes, *, mode: int = 0o600, nofollow: bool = True) -> None:
    """Append one whole line under an exclusive lock and fsync it: concurrent writers (sweep workers sharing a
    cache) never interleave, and a line that returned survives a crash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | (os.O_NOFOLLOW if nofollow else 0)
    fd = os.open(path, flags, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
        os.fsync(fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def lock_if_free(path: Path) -> int | None:
    """`path` opened (no symlink followed) and locked exclusively: its descriptor, or None when it cannot be
    opened; BlockingIOError when another process holds the lock. A run holds its lock files while it lives, so a
    lock that can be taken is a dead run's (what `reap_stale_workspaces` and the decoys' reaper remove)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise BlockingIOError(f"{path} is locked by a live process") from None
    return fd


def printable(name: str) -> str:
    """A file name as valid text: bytes that are not UTF-8 (surrogate-escaped by os) become \\xNN."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def sha256_file(path: Path | str, dir_fd: int | None = None) -> str:
    """The sha256 of a file; with `dir_fd`, `path` is a name in that folder, opened without following a link."""
    flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_NOFOLLOW | os.O_NONBLOCK if dir_fd is not None else 0)
    fd = os.open(path, flags, dir_fd=dir_fd)
    digest = hashlib.sha256()
    try:
        while chunk := os.read(fd, _CHUNK):
            digest.update(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tree_digest(root: Path, pattern: str = "*") -> str:
    """One hash over the relative paths and contents of every regular file below `root` (matching `pattern`)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob(pattern) if p.is_file() and not p.is_symlink()):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(sha256_file(path).encode())
        digest.update(b"\n")
    return digest.hexdigest()


# ---------------------------------------------------------------- agent-writable trees
#
# The harness never opens a path inside a tree the agent can write: it opens the tree's root itself with
# O_NOFOLLOW and reaches everything below relative to directory descriptors, one component at a time, so a
# symlink planted anywhere (even swapped in during the walk) is refused by the kernel, never followed.

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a FIFO never hangs us
MAX_DEPTH = 64  # deeper chains are reported, never walked (os.walk recursion, PATH_MAX)


def open_dir(name: str | Path, dir_fd: int | None = None) -> int | None:
    """A descriptor for a real directory (not a symlink to one), or None when it is anything else or gone."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None


def open_below(root: str | Path, parts: Sequence[str], *, directory: bool = False) -> int:
    """A descriptor for root/parts[0]/.../parts[-1], every component (root too) opened with O_NOFOLLOW relative
    to its parent's descriptor, so no symlink at any level is followed, even one swapped in meanwhile. The last
    component is opened as a file (non-blocking: a FIFO never hangs), or as a folder with `directory=True`.
    Raises OSError as the kernel says it: FileNotFoundError when missing, ELOOP or ENOTDIR for a symlink or a
    non-folder on the path, EINVAL for an empty, `.`, `..` or slashed component."""
    for part in parts:
        if part in ("", ".", "..") or "/" in part:
            raise OSError(errno.EINVAL, f"bad path component {part!r}")
    fd = os.open(root, DIR_FLAGS)
    try:
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            child = os.open(part, FILE_FLAGS if last and not directory else DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_path(root: Path, relative: str) -> int | None:
    """Open the folder `root/relative` component by component without following any symlink below `root`;
    None when any component is missing, a symlink or not a folder."""
    try:
        return open_below(root, [p for p in relative.split("/") if p not in ("", ".")], directory=True)
    except OSError:
        return None


def read_regular(dir_fd: int, name: str, max_bytes: int, *, head: bool = False) -> bytes | None:
    """The bytes of a regular file `name` in `dir_fd`; None for symlinks, special files and files over `max_bytes`
    (with `head=True`, a larger file gives its first `max_bytes` instead)."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (info.st_size > max_bytes and not head):
            return None
        chunks, total = [], 0
        while total <= max_bytes and (chunk := os.read(fd, _CHUNK)):
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes and not head:
            return None
        return b"".join(chunks)[:max_bytes]
    except OSError:
        return None
    finally:
        os.close(fd)


def read_below(root: Path, relative: str, max_bytes: int) -> bytes | None:
    """A regular file `root/relative`, reached without following any symlink below `root`; None when absent, not a
    regular file, or over `max_bytes`."""
    parent, _, name = relative.rpartition("/")
    fd = open_path(root, parent)
    if fd is None:
        return None
    try:
        return read_regular(fd, name, max_bytes)
    finally:
        os.close(fd)


def read_json_object(root: Path, relative: str, max_bytes: int) -> dict | None:
    """A JSON object file `root/relative` as plain JSON, read as `read_below` reads (undecodable bytes replaced, as
    a run folder's files are read); None when absent, unreadable, over `max_bytes` or not an object."""
    data = read_below(root, relative, max_bytes)
    if data is None:
        return None
    try:
        found = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def walk_fd(root_fd: int, *, max_depth: int = MAX_DEPTH, max_entries: int = 200_000):
    """Iterate (relative path, parent dir fd, name, lstat) below `root_fd` without following symlinks.

    Iterative (no recursion limit), sorted, bounded: a directory deeper than `max_depth` is yielded with
    `None` as its stat (the caller reports it), and the walk stops after `max_entries` entries by yielding
    ("", -1, "", None). Descriptors yielded are only valid until the next step.
    """
    seen = 0
    stack: list[tuple[int, str, int]] = [(os.dup(root_fd), "", 0)]
    try:
        while stack:
            fd, prefix, depth = stack.pop()
            try:
                try:
                    names = sorted(os.listdir(fd))
                except OSError:
                    continue
                subdirs = []
                for name in names:
                    seen += 1
                    if seen > max_entries:
                        yield "", -1, "", None
                        return
                    rel = f"{prefix}{name}"
                    try:
                        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    except OSError:
                        continue
                    if stat.S_ISDIR(info.st_mode):
                        if depth + 1 >= max_depth:
                            yield rel, fd, name, None
                            continue
                        child = open_dir(name, fd)
                        if child is not None:
                            subdirs.append((child, rel + "/", depth + 1))
                        continue
                    yield rel, fd, name, info
                stack.extend(reversed(subdirs))
            finally:
                os.close(fd)
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def remove_tree(path: Path) -> None:
    """Delete a tree the agent could write: iterative, never following symlinks, any depth; errors ignored."""
    parent = open_dir(path.parent)
    if parent is None:
        return
    try:
        _remove_below(parent, path.name)
    finally:
        os.close(parent)


def _remove_below(parent_fd: int, name: str) -> None:
    # each stack entry: (fd of the directory's parent, the directory's name, fd of the directory)
    first = open_dir(name, parent_fd)
    if first is None:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=parent_fd)
        return
    stack = [(os.dup(parent_fd), name, first)]
    while stack:
        pfd, dname, dfd = stack[-1]
        descended = False
        try:
            names = os.listdir(dfd)
        except OSError:
            names = []
        for entry in names:
            try:
                info = os.stat(entry, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                child = open_dir(entry, dfd)
                if child is not None:
                    stack.append((os.dup(dfd), entry, child))
                    descended = True
                    break
            with contextlib.suppress(OSError):
                os.unlink(entry, dir_fd=dfd)
        if descended:
            continue
        stack.pop()
        os.close(dfd)
        with contextlib.suppress(OSError):
            os.rmdir(dname, dir_fd=pfd)
        os.close(pfd)


class HarnessDir:
    """A directory the harness made itself and writes only through its descriptor (new files, O_EXCL)."""

    def __init__(self, path: Path, mode: int = 0o755) -> None:
        path.mkdir(mode=mode, parents=True, exist_ok=False)
        os.chmod(path, mode)
        self.path = path
        fd = open_dir(path)
        if fd is None:
            raise OSError(f"{path} is not a directory")
        self.fd = fd

    def write_new(self, name: str, data: bytes, mode: int = 0o644) -> Path:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=self.fd)
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
        return self.path / name

    def close(self, remove: bool = True) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if remove:
            remove_tree(self.path)


def printable_text(text: str) -> str:
    """Any text as encodable UTF-8: lone surrogates (from JSON escapes in model output) become \\udXXX."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
