"""Freeze a submission: copy regular files out of the agent's workspace and hash them.

The outputs folder is agent-controlled, so it is read only through directory descriptors with
O_NOFOLLOW (fsutil.walk_fd): a symlink anywhere, even one swapped in during the copy, is refused by the
kernel. Symlinks, special files, hard links, oversized files, names that are not UTF-8, folders nested
deeper than the walk allows and files that would eat the disk's reserve are not copied; each is listed as
rejected with the reason (at most MAX_REJECTED of them, then one line with the count), so the checker can
report it per case and the record stays small.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from pathlib import Path

from .fsutil import FILE_FLAGS, open_dir, printable, walk_fd
from .records import FileEntry, SubmissionManifest

MAX_FILE_BYTES = 2 << 30
MAX_FILES = 100_000
MAX_TOTAL_BYTES = 16 << 30
MAX_REJECTED = 500
SPARSE_MIN_BYTES = 64 << 20
# copying stops short of filling the disk: the run's result and the harness's other records need room
DISK_RESERVE_BYTES = 256 << 20
# the host path (run folder + submission/ + this) must stay under PATH_MAX (4096) for the copy to work
MAX_PATH_CHARS = 1024
_CHUNK = 1 << 20
# why a file was not copied when the disk had no room: a run whose agent could write only its reserved image
# did not cause that (another process filled the disk), and the runner makes it an infrastructure failure
DISK_FULL = "not copied: the disk is (nearly) full"


class _Entries:
    """The manifest's entries, with rejected ones capped (the rest only counted)."""

    def __init__(self) -> None:
        self.items: list[FileEntry] = []
        self.rejected = 0

    def reject(self, path: str, size: int, reason: str) -> None:
        self.rejected += 1
        if self.rejected <= MAX_REJECTED:
            self.items.append(FileEntry(path, size, rejected=reason))

    def finish(self) -> list[FileEntry]:
        if self.rejected > MAX_REJECTED:
            more = self.rejected - MAX_REJECTED
            self.items.append(FileEntry("...", 0, rejected=f"{more} more rejected entries not listed"))
        return self.items


def freeze(source: Path, dest: Path, *, submitted: bool, max_file_bytes: int = MAX_FILE_BYTES,
           max_total_bytes: int = MAX_TOTAL_BYTES, disk_reserve: int = DISK_RESERVE_BYTES) -> SubmissionManifest:
    dest.mkdir(parents=True, exist_ok=True)
    entries = _Entries()
    src_fd = open_dir(source)  # None when outputs/ is missing, a file or a symlink
    if src_fd is None:
        return SubmissionManifest([], hashlib.sha256(b"").hexdigest(), submitted)
    count = total = 0
    try:
        for rel, dir_fd, name, info in walk_fd(src_fd):
            if dir_fd < 0:
                entries.reject("...", 0, "the outputs folder has too many entries: the rest was not read")
                break
            shown = printable(rel)
            if info is None:
                entries.reject(shown[:200], 0, "folder nested too deep: not read")
                continue
            if shown != rel:  # not UTF-8: no record or JSON file could name it faithfully
                entries.reject(shown[:200], 0, "file name is not valid UTF-8")
                continue
            if len(rel) > MAX_PATH_CHARS:
                entries.reject(rel[:200] + "...", 0, f"path longer than {MAX_PATH_CHARS} characters")
                continue
            if stat.S_ISLNK(info.st_mode):
                target = "?"
                if entries.rejected < MAX_REJECTED:  # read only for the entries that are listed
                    with contextlib.suppress(OSError):
                        target = printable(os.readlink(name, dir_fd=dir_fd))[:200]
                entries.reject(rel, 0, f"symlink to {target}")
                continue
            if not stat.S_ISREG(info.st_mode):
                entries.reject(rel, 0, "not a regular file")
                continue
            if info.st_nlink > 1:  # a hard link may share its inode with a private reference
                entries.reject(rel, 0, "hard link (shares its inode with another file)")
                continue
            if info.st_size > max_file_bytes:
                entries.reject(rel, info.st_size, f"larger than {max_file_bytes} bytes")
                continue
            count += 1
            if count > MAX_FILES:
                entries.reject(rel, info.st_size, f"more than {MAX_FILES} files")
                continue
            if info.st_size > SPARSE_MIN_BYTES and info.st_blocks * 512 < info.st_size // 8:
                # mostly holes: copying and hashing would cost the harness what the agent never paid for
                entries.reject(rel, info.st_size, "sparse file (mostly holes)")
                continue
            if total + info.st_size > max_total_bytes:
                entries.reject(rel, info.st_size, f"the submission would exceed {max_total_bytes} bytes")
                continue
            if _free_bytes(dest) - min(info.st_size, info.st_blocks * 512) < disk_reserve:
                entries.reject(rel, info.st_size, DISK_FULL)
                continue
            try:
                size, digest = _copy(dir_fd, name, dest / rel, max_file_bytes)
            except OSError as exc:
                full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
                entries.reject(rel, info.st_size, DISK_FULL if full else f"unreadable: {exc.strerror or exc}")
                continue
            total += size
            entries.items.append(FileEntry(rel, size, digest))
    finally:
        os.close(src_fd)
    files = entries.finish()
    digest = hashlib.sha256()
    for entry in files:
        digest.update(f"{entry.path}\0{entry.sha256}\0{entry.rejected}\n".encode())
    return SubmissionManifest(files, digest.hexdigest(), submitted)


def _free_bytes(path: Path) -> int:
    try:
        info = os.statvfs(path)
    except OSError:
        return 0
    return info.f_bavail * info.f_frsize


def _copy(dir_fd: int, name: str, target: Path, max_bytes: int) -> tuple[int, str]:
    """Copy one file opened with O_NOFOLLOW relative to its folder; hash while copying; read-only result."""
    fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:  # swapped after the walk looked
            raise OSError(0, "changed while being frozen")
        target.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444)
        try:
            size = _copy_keeping_holes(fd, out, digest, max_bytes)
        except BaseException:
            os.close(out)
            target.unlink(missing_ok=True)
            raise
        os.close(out)
        return size, digest.hexdigest()
    finally:
        os.close(fd)


def _copy_keeping_holes(src: int, out: int, digest, max_bytes: int) -> int:
    """Copy data regions only (a sparse file stays sparse: its holes cost the disk nothing), hashing all bytes."""
    end = os.fstat(src).st_size
    position = 0
    while position < end:
        try:
            data_at = os.lseek(src, position, os.SEEK_DATA)
        except OSError:  # ENXIO: only a hole remains (or SEEK_DATA unsupported: then read everything)
            data_at = end if _has_seek_data(src) else position
        _hash_zeros(digest, data_at - position)
        position = data_at
        if position >= end:
            break
        try:
            hole_at = os.lseek(src, position, os.SEEK_HOLE)
        except OSError:
            hole_at = end
        os.lseek(src, position, os.SEEK_SET)
        os.lseek(out, position, os.SEEK_SET)
        chunk = b""
        while position < hole_at:
            chunk = os.read(src, min(_CHUNK, hole_at - position))
            if not chunk:
                break
            position += len(chunk)
            if position > max_bytes:  # grew after the walk looked
                raise OSError(0, f"grew past {max_bytes} bytes while being frozen")
            digest.update(chunk)
            _write_all(out, chunk)
        if not chunk:
            break
    os.ftruncate(out, position)
    return position


_ZEROS = bytes(_CHUNK)


def _hash_zeros(digest, count: int) -> None:
    while count > 0:
        step = min(count, _CHUNK)
        digest.update(_ZEROS[:step] if step < _CHUNK else _ZEROS)
        count -= step


def _has_seek_data(fd: int) -> bool:
    try:
        os.lseek(fd, 0, os.SEEK_HOLE)
    except OSError:
        return False
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def disk_full(manifest: SubmissionManifest) -> list[str]:
    """The files a freeze left out for want of disk space."""
    return [e.path for e in manifest.files if e.rejected == DISK_FULL]
