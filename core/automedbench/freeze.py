"""Freeze a submission: copy regular files out of the agent's workspace and hash them.

Symlinks, special files, oversized files, names that are not UTF-8 and anything resolving outside the
outputs folder are not copied; each is listed as rejected with the reason, so the checker can report it
per case.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

from .fsutil import printable, sha256_file
from .records import FileEntry, SubmissionManifest

MAX_FILE_BYTES = 2 << 30
MAX_FILES = 100_000
# the host path (run folder + submission/ + this) must stay under PATH_MAX (4096) for the copy to work
MAX_PATH_CHARS = 1024


def freeze(source: Path, dest: Path, *, submitted: bool, max_file_bytes: int = MAX_FILE_BYTES) -> SubmissionManifest:
    dest.mkdir(parents=True, exist_ok=True)
    entries: list[FileEntry] = []
    if not source.is_dir() or source.is_symlink():
        return SubmissionManifest([], hashlib.sha256(b"").hexdigest(), submitted)
    base = source.resolve()
    count = 0
    for folder, dirnames, filenames in os.walk(base, followlinks=False):
        here = Path(folder)
        for dname in list(dirnames):
            if (here / dname).is_symlink():
                dirnames.remove(dname)
                entries.append(FileEntry(printable((here / dname).relative_to(base).as_posix()), 0,
                                         rejected="symlinked directory"))
        dirnames.sort()
        for fname in sorted(filenames):
            path = here / fname
            rel = path.relative_to(base).as_posix()
            if printable(rel) != rel:  # not UTF-8: no record or JSON file could name it faithfully
                entries.append(FileEntry(printable(rel), 0, rejected="file name is not valid UTF-8"))
                continue
            if len(rel) > MAX_PATH_CHARS:
                entries.append(FileEntry(rel[:200] + "...", 0,
                                         rejected=f"path longer than {MAX_PATH_CHARS} characters"))
                continue
            try:
                info = path.lstat()
            except OSError as exc:
                entries.append(FileEntry(rel, 0, rejected=f"unreadable: {exc.strerror}"))
                continue
            if stat.S_ISLNK(info.st_mode):
                entries.append(FileEntry(rel, 0, rejected=f"symlink to {os.readlink(path)}"))
                continue
            if not stat.S_ISREG(info.st_mode):
                entries.append(FileEntry(rel, 0, rejected="not a regular file"))
                continue
            if info.st_nlink > 1:  # a hard link may share its inode with a private reference
                entries.append(FileEntry(rel, 0, rejected="hard link (shares its inode with another file)"))
                continue
            if info.st_size > max_file_bytes:
                entries.append(FileEntry(rel, info.st_size, rejected=f"larger than {max_file_bytes} bytes"))
                continue
            count += 1
            if count > MAX_FILES:
                entries.append(FileEntry(rel, info.st_size, rejected=f"more than {MAX_FILES} files"))
                continue
            target = dest / rel
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target, follow_symlinks=False)
            except OSError as exc:
                entries.append(FileEntry(rel, info.st_size, rejected=f"unreadable: {exc.strerror}"))
                continue
            os.chmod(target, 0o444)
            entries.append(FileEntry(rel, info.st_size, sha256_file(target)))
    digest = hashlib.sha256()
    for entry in entries:
        digest.update(f"{entry.path}\0{entry.sha256}\0{entry.rejected}\n".encode())
    return SubmissionManifest(entries, digest.hexdigest(), submitted)
