"""Staging a task's data safely: the new copy is written beside the old one and swapped in only when complete.

A track's stager writes into `StagingArea.public` / `.private` (under `<dest>/.incoming`) and ends with
`commit(case_ids)`. Leaving the `with staging_area(dest)` block without committing (an exception, Ctrl-C)
drops the new copy; the previous staging stays as it was. The swap is journaled, so a crash in the middle
of it never leaves a mix of old and new: the old parts move into `<dest>/.previous` (after a journal naming
the parts that did not exist), the new ones move in, and renaming `.previous` to `.discard` is the commit
point. `recover(dest)` (run on entry, and by the engine before it reads a staging) rolls an unfinished swap
back, or finishes deleting a committed one's leftovers.

What describes the data is swapped with it: the engine `seal`s a staging it runs (`sealed(dest, fn)`), and
each commit then calls `fn` on the complete new copy, which writes the stamp (digests, case ids) beside the
parts in `.incoming`; the stamp is one more part of the same journaled swap, so no crash can leave new data
under the old stamp.

Two processes staging the same task are serialised by an exclusive `flock` on `<parent>/.<name>.staging-lock`
(beside `dest`, so moving `dest` aside keeps it); the lock is re-entrant within one process, so the engine
can hold it around a track's stager that takes it again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .errors import UserError
from .fsutil import atomic_write_text
from .stagesecret import SECRET_FILE, StagingSecret
from .track import StagedData

PARTS = ("public", "private")
INCOMING = ".incoming"
PREVIOUS = ".previous"
DISCARD = ".discard"
JOURNAL = "swap.json"

# The engine's seal on commits to one dest: called with the area and its case ids once the new copy is
# complete, it writes files beside the parts in `area.root` and returns their names (swapped in with them).
Seal = Callable[["StagingArea", list[str]], tuple[str, ...]]
_seals: dict[str, Seal] = {}
# The engine's secret for the staging of one dest (`secret_for`): every area opened on it draws from it.
_secrets: dict[str, StagingSecret] = {}


class StagingArea:
    """A fresh scratch copy of a staging (`root` = `<dest>/.incoming`, one folder per part already made).

    `secret` is this staging's `StagingSecret`: draw every hidden choice from it (which items, their order,
    their case ids, every random degradation). The engine makes one per staging; an area opened outside
    the engine (a stager called directly) makes its own. Either way `commit` writes it to
    `private/staging.secret` and the next staging draws a new one."""

    def __init__(self, dest: Path, parts: tuple[str, ...] = PARTS, durable: bool = True) -> None:
        self.dest = dest
        self.root = dest / INCOMING
        self.parts = parts
        self.durable = durable
        self.staged: StagedData | None = None
        self.secret = _secrets.get(os.path.abspath(dest)) or StagingSecret()

    @property
    def public(self) -> Path:
        return self.root / "public"

    @property
    def private(self) -> Path:
        return self.root / "private"

    def commit(self, case_ids: list[str], what: str = "cases") -> StagedData:
        """Swap the new parts in for the old ones (all or none) and return the staging they make up."""
        if self.staged is not None:
            raise RuntimeError(f"{self.dest}: this staging area was already committed")
        if not case_ids:
            raise UserError(f"staging produced no {what}")
        if "public" in self.parts:
            check_published(self.public)
            relay(self.public, self.secret)
        if "private" in self.parts:
            self.secret.save(self.private / SECRET_FILE)
        # listed sorted: the order a stager met its items in (the source's) never reaches the brief or the stamp
        case_ids = sorted(case_ids)
        seal = _seals.get(os.path.abspath(self.dest))
        extra = tuple(seal(self, list(case_ids))) if seal is not None else ()
        swap_in(self.root, self.dest, self.parts + extra, durable=self.durable)
        self.staged = StagedData(self.dest, self.dest / "public", self.dest / "private", list(case_ids))
        return self.staged


@contextlib.contextmanager
def staging_area(dest: Path, parts: tuple[str, ...] = PARTS, durable: bool = True) -> Iterator[StagingArea]:
    """Hold the task's staging lock, recover an interrupted swap, and yield a fresh, empty `StagingArea`.

    Whatever happens, the scratch folder is gone afterwards; only `commit` changes `dest`'s parts.
    `durable=False` skips the fsyncs (tests, throwaway data)."""
    dest.mkdir(parents=True, exist_ok=True)
    with staging_lock(dest):
        recover(dest)
        area = StagingArea(dest, tuple(parts), durable)
        _remove(area.root)
        area.root.mkdir()
        try:
            for part in area.parts:
                (area.root / part).mkdir()
            yield area
        finally:
            _remove(area.root)


@contextlib.contextmanager
def _registered(table: dict[str, Any], dest: Path, value: Any) -> Iterator[None]:
    """`value` is `table`'s entry for `dest` inside the block (one staging's seal or secret)."""
    key = os.path.abspath(dest)
    table[key] = value
    try:
        yield
    finally:
        table.pop(key, None)


def secret_for(dest: Path, secret: StagingSecret) -> contextlib.AbstractContextManager[None]:
    """Every staging area opened on `dest` inside this block draws from `secret` (the engine's, one per
    staging). Call with the staging lock held."""
    return _registered(_secrets, dest, secret)


MAX_PUBLISHED_ENTRIES = 10_000_000


def check_published(public: Path) -> None:
    """Refuse (one line) a public tree holding anything but folders and regular files with one link each.

    What a stager publishes is read by every sandbox: a symlink there could point at a host file, a hard
    link shares an inode with a file elsewhere (a reference, a host file the download linked to), and a
    device or FIFO is no input. Checked on the complete new copy, before it is swapped in."""
    stack, seen = [str(public)], 0
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                seen += 1
                if seen > MAX_PUBLISHED_ENTRIES:
                    raise UserError(f"{public}: more than {MAX_PUBLISHED_ENTRIES} entries published; refused")
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
                elif not stat.S_ISREG(info.st_mode):
                    kind = "a symlink" if stat.S_ISLNK(info.st_mode) else "not a regular file"
                    raise UserError(f"staging would publish {entry.path}, {kind}; refused (nothing a stager "
                                    "publishes may be a link, a device or a FIFO)")
                elif info.st_nlink != 1:
                    raise UserError(f"staging would publish {entry.path}, a hard link ({info.st_nlink} names for "
                                    "one file: it may be a file from outside the download); refused")


PUBLISHED_TIME_NS = 946_684_800 * 10**9  # every published file's and folder's mtime and atime (2000-01-01)


def relay(public: Path, secret: StagingSecret) -> None:
    """Write `public` again in an order drawn from the staging's secret, every timestamp set to one value.

    A stager writes its cases in some order (one class after another, the source's order), and a folder
    shows that order to anyone who can stat it: modification times, inode numbers (allocated in creation
    order), the listing order of filesystems that list by creation. An agent sorting the case folders by
    mtime or inode got every label of a balanced draw. So the engine copies every file to a fresh inode in a
    secret order (folders first, also in a secret order), then sets every file's and folder's times to
    `PUBLISHED_TIME_NS`: what remains is the content and the (randomly drawn) names."""
    folders, files = [], []
    for folder, subdirs, names in os.walk(public):
        rel = os.path.relpath(folder, public)
        folders += [os.path.normpath(os.path.join(rel, d)) for d in subdirs]
        files += [os.path.normpath(os.path.join(rel, n)) for n in names]
    fresh = public.with_name(public.name + ".relaid")
    _remove(fresh)
    fresh.mkdir()
    shutil.copymode(public, fresh)
    made = {"."}
    for rel in secret.shuffled(sorted(folders), "published layout: folders"):
        for part in reversed([rel, *(str(p) for p in Path(rel).parents)]):  # a parent before its children
            if part not in made:
                (fresh / part).mkdir()
                shutil.copymode(public / part, fresh / part)
                made.add(part)
    for rel in secret.shuffled(sorted(files), "published layout: files"):
        shutil.copyfile(public / rel, fresh / rel, follow_symlinks=False)
        shutil.copymode(public / rel, fresh / rel, follow_symlinks=False)
    times = (PUBLISHED_TIME_NS, PUBLISHED_TIME_NS)
    for rel in secret.shuffled(sorted(files) + sorted(folders) + ["."], "published layout: times"):
        os.utime(fresh / rel, ns=times, follow_symlinks=False)
    _remove(public)
    os.rename(fresh, public)
    os.utime(public, ns=times)


def sealed(dest: Path, seal: Seal) -> contextlib.AbstractContextManager[None]:
    """Every commit to `dest` inside this block swaps in what `seal` writes too (see the module's docstring).

    Call with the staging lock held: the seal is the lock holder's, for that one staging."""
    return _registered(_seals, dest, seal)


def swap_in(work: Path, dest: Path, parts: tuple[str, ...] = PARTS, durable: bool = True) -> None:
    """Replace `dest/<part>` by `work/<part>` for every part, journaled (see the module's docstring).

    Call with the staging lock held (as `StagingArea.commit` does)."""
    for part in parts:  # the data's folders, and the files a seal wrote beside them
        if not os.path.lexists(work / part) or (work / part).is_symlink():
            raise ValueError(f"{work}: no {part} to swap in")
    if durable:
        _sync_tree(work)
    previous = dest / PREVIOUS
    if os.path.lexists(previous):  # an interrupted swap nobody recovered: the staging it protects comes back
        _roll_back(dest, previous)
    _remove(dest / DISCARD)
    previous.mkdir()
    absent = [p for p in parts if not os.path.lexists(dest / p)]
    atomic_write_text(previous / JOURNAL, json.dumps({"parts": list(parts), "absent": absent}) + "\n")
    _sync_dir(previous)
    try:
        for part in parts:
            if part not in absent:
                os.rename(dest / part, previous / part)
        for part in parts:
            os.rename(work / part, dest / part)
        _sync_dir(dest)
    except BaseException:
        _roll_back(dest, previous)
        raise
    os.rename(previous, dest / DISCARD)  # the commit point
    _sync_dir(dest)
    _remove(dest / DISCARD)


def recover(dest: Path) -> bool:
    """Undo a swap a crash interrupted (the previous staging comes back), or finish a committed one's cleanup;
    drop a half-written `.incoming`. True when there was anything to do. Call with the staging lock held."""
    found = False
    for leftover in (DISCARD, INCOMING):
        if os.path.lexists(dest / leftover):
            found = True
            _remove(dest / leftover)
    previous = dest / PREVIOUS
    if os.path.lexists(previous):
        found = True
        _roll_back(dest, previous)
    return found


def recover_locked(dest: Path) -> bool:
    """`recover` under the staging lock, and only when something is left over (the usual case costs two stats)."""
    if not any(os.path.lexists(dest / name) for name in (PREVIOUS, DISCARD)):
        return False
    with staging_lock(dest):
        return recover(dest)


def _roll_back(dest: Path, previous: Path) -> None:
    try:
        journal = json.loads((previous / JOURNAL).read_text())
        parts, absent = list(journal["parts"]), set(journal["absent"])
    except (OSError, ValueError, KeyError, TypeError):
        parts, absent = [], set()  # no journal: nothing had been moved yet
    for part in parts:
        if part in absent:
            _remove(dest / part)  # it did not exist before: whatever is there now is the new copy
        elif os.path.lexists(previous / part):
            _remove(dest / part)
            os.rename(previous / part, dest / part)
        # else: the old part was never moved, it is still in place
    _sync_dir(dest)
    _remove(previous)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path)


def _fsync(path: Path | str, flags: int) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        _fsync(path, os.O_DIRECTORY)


def _sync_tree(root: Path) -> None:
    """Flush every file and folder below `root` to disk, so the swapped-in copy survives a power cut whole."""
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                _fsync(path, os.O_NOFOLLOW)
        _sync_dir(Path(folder))


# ---------------------------------------------------------------- the per-task lock

class _Held:
    def __init__(self) -> None:
        self.mutex = threading.RLock()
        self.depth = 0
        self.fd = -1


_registry_guard = threading.Lock()
_held: dict[str, _Held] = {}


def _forget_after_fork() -> None:
    """A forked child holds none of its parent's staging locks (nor their thread locks, maybe mid-use)."""
    global _registry_guard
    _registry_guard = threading.Lock()
    _held.clear()
    _seals.clear()
    _secrets.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


def lock_path(dest: Path) -> Path:
    return dest.parent / f".{dest.name}.staging-lock"


@contextlib.contextmanager
def staging_lock(dest: Path) -> Iterator[None]:
    """Exclusive use of `dest` for staging across processes (flock) and threads; re-entrant in one thread."""
    key = os.path.abspath(dest)
    with _registry_guard:
        held = _held.setdefault(key, _Held())
    with held.mutex:
        if held.depth == 0:
            held.fd = _acquire(lock_path(Path(key)), dest)
        held.depth += 1
        try:
            yield
        finally:
            held.depth -= 1
            if held.depth == 0:
                fd, held.fd = held.fd, -1
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)


def _acquire(path: Path, dest: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another process staging {dest} ...", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd
