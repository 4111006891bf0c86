"""Staging a task's data, read top to bottom as a run meets it: where it lives, the lock, the journaled swap
that brings a complete new copy in, and the stamp (digests, case ids) that pins it in every result header.

`ensure` loads a staging (a demo stages itself on first use, and again after its generator's code changed);
`stage` stages anew under the task's staging lock, so a second process staging it waits, then finds the first
one's staging instead of replacing the data a run may already be reading.

The swap: a track's stager writes into a `stagearea.StagingArea` (under `<dest>/.incoming`) and commits; the
commit moves the old parts into `<dest>/.previous` (after a journal naming the parts that did not exist), the
new ones in, and renaming `.previous` to `.discard` is the commit point. `recover(dest)` (run under the lock
before anything reads or replaces a staging) rolls an unfinished swap back, or finishes deleting a committed
one's leftovers: a crash never leaves a mix of old and new.

The stamp is written into the staging area and swapped in with the data (`sealed`), never after it; and every
hidden choice of the staging is drawn from one fresh secret (`secret_for`, stagesecret.py). The digest is taken
once, at staging, and `load` trusts it (no re-hash per run).

Two processes staging the same task are serialised by an exclusive `flock` on `<parent>/.<name>.staging-lock`
(beside `dest`, so moving `dest` aside keeps it); the lock is re-entrant within one process, so the engine
holds it around a track's stager that takes it again.
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
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import attrs

from .errors import UserError
from .fsutil import atomic_write_text, sha256_file, tree_digest
from .ownedpaths import check_staging_owned
from .records import TaskSpec
from .stagesecret import SECRET_FILE, StagingSecret
from .track import StagedData, Track
from .untrusted import hostile_download_guard

STAMP = "staging.json"
# The stamp's `format`: 2 = a per-staging secret decides sampling, order, ids and degradations, and every
# published file carries one timestamp. A staging of an older format is not used: its case order, ids, seeds
# and file times could follow from public information (issue 35).
STAGING_FORMAT = 2
PARTS = ("public", "private")
INCOMING = ".incoming"
PREVIOUS = ".previous"
DISCARD = ".discard"
JOURNAL = "swap.json"


class SealedArea(Protocol):
    """What a seal reads of the staging area it seals (a `stagearea.StagingArea`)."""

    @property
    def root(self) -> Path: ...
    @property
    def public(self) -> Path: ...
    @property
    def private(self) -> Path: ...


# The engine's seal on commits to one dest: called with the area and its case ids once the new copy is
# complete, it writes files beside the parts in `area.root` and returns their names (swapped in with them).
Seal = Callable[[SealedArea, list[str]], tuple[str, ...]]
_seals: dict[str, Seal] = {}
# The engine's secret for the staging of one dest (`secret_for`): every area opened on it draws from it.
_secrets: dict[str, StagingSecret] = {}


def default_data_root() -> Path:
    env = os.environ.get("AUTOMEDBENCH_DATA")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "automedbench" / "data"


def task_dir(data_root: Path, task: TaskSpec) -> Path:
    return data_root / task.id


def ensure(track: Track, task: TaskSpec, data_root: Path) -> StagedData:
    """Demo tasks stage themselves on first use (and again after their generator's code changed); real tasks
    must have been staged by the user. A data root this user may not read (or a demo's, write) is refused in one
    line, not a traceback."""
    try:
        return _ensure(track, task, data_root)
    except PermissionError as exc:
        raise UserError(f"the data of {task.id} under {data_root} cannot be used by this user: "
                        f"{exc.filename or data_root}: permission denied; name a data root of your own "
                        "(--data-root or AUTOMEDBENCH_DATA)") from None


def _ensure(track: Track, task: TaskSpec, data_root: Path) -> StagedData:
    stamp = task_dir(data_root, task) / STAMP
    if not task.demo or (stamp.exists() and not stale_demo(stamp, track)):
        return load(task, data_root)
    data_root.mkdir(parents=True, exist_ok=True)
    shared = _demo_shares.get(Path(os.path.abspath(data_root)))
    if shared is not None and not task_dir(data_root, task).exists() and _as_installed(track, task):
        return _copy_shared_demo(track, task, shared, data_root)
    return stage(track, task, data_root)


def _as_installed(track: Track, task: TaskSpec) -> bool:
    """Whether `task` is the track's own spec of it: a changed one (a test's other case count) is staged where
    it is asked for, never into the shared staging the other roots copy."""
    try:
        return track.task(task.id) == task
    except UserError:  # a task the track does not list (made in code): no sharing, the plain staging
        return False


# data roots whose demos are copied from one staging shared between processes (`share_demos`): root -> shared root
_demo_shares: dict[Path, Path] = {}


def share_demos(data_root: Path, shared: Path) -> None:
    """In this process, a demo `ensure` finds missing under `data_root` is staged once under `shared` (by the first
    process to need it, under its staging lock: the others wait for it) and copied from there, not generated again.

    For the test kit: each pytest-xdist worker keeps its own data root (tests may re-stage or damage what it
    holds), and generating every demo in every worker cost each of them ~15 CPU-s. A copy holds the same files,
    stamp and secret as the shared staging; `stage` (a forced or a download's staging) is unaffected."""
    _demo_shares[Path(os.path.abspath(data_root))] = Path(os.path.abspath(shared))


def _copy_shared_demo(track: Track, task: TaskSpec, shared: Path, data_root: Path) -> StagedData:
    """`task`'s demo staged (or found) under `shared`, then copied whole into `data_root` (a new folder renamed
    into place under its staging lock, so a reader finds all of it or nothing)."""
    shared.mkdir(parents=True, exist_ok=True)
    ensure(track, task, shared)
    source, dest = task_dir(shared, task), task_dir(data_root, task)
    with staging_lock(dest):
        if dest.exists():  # another thread of this process copied or staged it meanwhile
            return ensure(track, task, data_root)
        temp = dest.with_name(f".{dest.name}.copy-{os.getpid()}")
        shutil.rmtree(temp, ignore_errors=True)
        with staging_lock(source):  # not re-staged while we copy
            shutil.copytree(source, temp, symlinks=True, ignore=shutil.ignore_patterns(INCOMING, PREVIOUS, DISCARD))
        temp.rename(dest)
    return load(task, data_root)


def unstaged(task: TaskSpec, data_root: Path) -> str:
    """The line for a dataset task with no staging: what to download and the command that stages it (it said
    "data root ... does not exist" when no task was staged yet, and never which download PATH is)."""
    where = (f"under {data_root}" if data_root.exists() else
             f"(the data root {data_root} does not exist; staged elsewhere: --data-root or AUTOMEDBENCH_DATA)")
    download = f" ({task.dataset[:200]})" if task.dataset else ""
    return (f"task {task.id} is not staged {where}; download its data{download}, then: automedbench stage {task.id} "
            "--from PATH")


def load(task: TaskSpec, data_root: Path) -> StagedData:
    if not data_root.exists():
        if not task.demo:
            raise UserError(unstaged(task, data_root))
        raise UserError(f"data root {data_root} does not exist (set --data-root or AUTOMEDBENCH_DATA)")
    dest = task_dir(data_root, task)
    recover_locked(dest)  # a swap a crash interrupted: the previous staging comes back first
    stamp = dest / STAMP
    if not stamp.exists():
        raise UserError(unstaged(task, data_root) if not task.demo else f"task {task.id} is not staged under "
                        f"{data_root}")
    info = json.loads(stamp.read_text())
    if _format(info) < STAGING_FORMAT:
        raise UserError(f"task {task.id} under {data_root} was staged by an older AutoMedBench (staging format "
                        f"{_format(info)}, before per-staging secrets and uniform file times: its case order and "
                        f"file times could give answers away); stage it again: automedbench stage {task.id} "
                        "--from PATH --force")
    staged = StagedData(dest, dest / "public", dest / "private", list(info["case_ids"]))
    for folder in (staged.public, staged.private):
        if not folder.is_dir():
            raise UserError(f"staged data for {task.id} is damaged: {folder} missing; re-stage with --force")
    check_staging_owned(dest, data_root)  # references only this user can change: a run's score is signed
    return staged


def stage(track: Track, task: TaskSpec, data_root: Path, source: Path | None = None,
          force: bool = False) -> StagedData:
    """Stage `task` under the task's staging lock: a second process staging it waits, then (a demo staged on
    first use) finds the first one's staging instead of replacing the data a run may already be reading."""
    if task.demo:
        # a demo generates: a folder given (`stage vqa/demo --from DIR`) is ignored, not recorded as its source (the
        # stamp then named no generator, and the first run staged the demo again as stale)
        source = None
    if source is not None and not source.exists():
        raise UserError(f"source {source} does not exist")
    dest = task_dir(data_root, task)
    with staging_lock(dest):
        return _stage_locked(track, task, data_root, dest, source, force)


def _stage_locked(track: Track, task: TaskSpec, data_root: Path, dest: Path, source: Path | None,
                  force: bool) -> StagedData:
    stamp = dest / STAMP
    if dest.is_dir():
        recover(dest)  # a swap a crash interrupted: its stamp and data come back together before we look
    if stamp.exists() and not force and source is None:
        if not (task.demo and stale_demo(stamp, track)):
            return load(task, data_root)
        force = True  # staged by other generator code (checked under the lock: one process re-stages)
    aside = None
    if force and dest.exists():
        # the track may skip an unchanged download; moving the old staging aside makes it rebuild,
        # and the old one comes back if the rebuild fails
        aside = dest.with_name(dest.name + ".replaced")
        shutil.rmtree(aside, ignore_errors=True)
        dest.rename(aside)
    # every hidden choice of this staging comes from a fresh secret (stagesecret.py), never from the task file
    secret = StagingSecret()
    if task.demo:
        # a demo is generated from a seed: one drawn from the secret, so the generator (readable in the
        # sandbox) cannot regenerate the references; 63 bits: no search of seeds in a run
        task = attrs.evolve(task, params={**task.params, "seed": secret.seed("demo")})
    written: list[dict] = []
    generator = generator_digest(track) if task.demo else ""

    def seal(area: SealedArea, case_ids: list[str]) -> tuple[str, ...]:
        """The stamp of the complete new copy, written beside it so the swap moves both at once."""
        share_public(area.public)
        written.append(_write_stamp(area.root / STAMP, task, case_ids, area.public, area.private, source,
                                    generator))
        return (STAMP,)

    try:
        with sealed(dest, seal), secret_for(dest, secret):
            staged = _run_stager(track, task, dest, source)
    except BaseException:
        if aside is not None:
            shutil.rmtree(dest, ignore_errors=True)
            aside.rename(dest)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
    if not staged.case_ids:
        raise UserError(f"staging {task.id} produced no cases")
    staged = attrs.evolve(staged, case_ids=sorted(staged.case_ids))  # no source order in the stamp or the brief
    if not written or written[-1]["case_ids"] != list(staged.case_ids):
        # a track that wrote `dest` without the staging area: its stamp can only follow the data, and its public
        # tree is laid out again as a commit lays it out (in its write order, the mtimes and inodes said its labels)
        from .stagearea import relay

        check_published(staged.public)
        relay(staged.public, secret)
        if not (staged.private / SECRET_FILE).exists():
            secret.save(staged.private / SECRET_FILE)
        share_public(staged.public)
        _write_stamp(stamp, task, staged.case_ids, staged.public, staged.private, source, generator)
    return staged


def _run_stager(track: Track, task: TaskSpec, dest: Path, source: Path | None) -> StagedData:
    """The track's stager; from a download, its opens of the download guarded (`hostile_download_guard`), and
    anything it raises but a `UserError` becomes one line too. A library the stager imports that this Python
    lacks is one line naming the install, demo or download (`missing_library`).

    A download is untrusted input: a damaged archive member (bad CRC), a truncated gzip stream or a header
    holding NaN reaches parsers whose many exception types no stager can list. Whatever they raise is the
    download's fault and is said in one line naming where it was raised, never a traceback."""
    with hostile_download_guard(source, dest):  # nothing when there is no download
        try:
            return track.stage(task, dest, source)
        except UserError as exc:
            if source is None or "\n" not in str(exc):
                raise
            raise UserError(" ".join(str(exc).split())) from exc  # a parser's message quoted with its line breaks
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except Exception as exc:
            missing = missing_library(track, task, exc) if isinstance(exc, ModuleNotFoundError) else None
            if missing is not None:  # the machine lacks a library, not the download's fault nor a bug
                raise UserError(missing) from exc
            if source is None:  # a demo's generator: the track's own code, its traceback says where
                raise
            frames = traceback.extract_tb(exc.__traceback__)
            where = f" in {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
            detail = " ".join(str(exc).split())[:200]
            raise UserError(f"{task.id}: the download could not be staged ({type(exc).__name__}{where}: "
                            f"{detail}); a damaged or crafted file? Nothing was published") from exc


def missing_library(track: Track, task: TaskSpec, exc: ModuleNotFoundError) -> str | None:
    """The one line for a stager that imports a library this Python lacks (a track installed without its
    dependencies: a traceback ending in `No module named 'pydicom'`, or for a download "a damaged or crafted
    file?"), naming what to install; None when the module is present or the track's own (a bug, not an install)."""
    import importlib.util

    from .plugins import track_install_line

    name = (exc.name or "").split(".")[0]
    own = type(track).__module__.split(".")[0]
    if not name or name == own:
        return None
    try:
        if importlib.util.find_spec(name) is not None:  # there: a module inside it is missing (its bug)
            return None
    except (ImportError, ValueError):  # ValueError: None in sys.modules, as a blocked import
        pass
    line = track_install_line(track.name)
    install = line.split(": ", 1)[1] if line else f"install the {track.name} track's package with its dependencies"
    return f"staging {task.id} needs the Python module {name!r}, which this Python cannot import: {install}"


def _write_stamp(path: Path, task: TaskSpec, case_ids: list[str], public: Path, private: Path,
                 source: Path | None, generator: str) -> dict:
    info = {
        "task": task.id,
        "format": STAGING_FORMAT,
        "case_ids": list(case_ids),
        "public_sha256": tree_digest(public),
        "private_sha256": tree_digest(private),
        # never the download's path: it holds the answers, and the stamp is readable where isolation is weak
        "source": "local folder" if source else "generated",
    }
    if generator:
        info["generator"] = generator
    atomic_write_text(path, json.dumps(info, indent=2) + "\n")
    return info


def generator_digest(track: Track) -> str:
    """One hash of the track's Python source. A demo's answers may lie in its generator's code (readable in
    the sandbox), so a fix there must reach demos staged before it: a stamp naming other code is staged anew."""
    name = type(track).__module__
    top = sys.modules.get(name.split(".")[0])
    file = getattr(top, "__file__", None) or getattr(sys.modules.get(name), "__file__", None)
    if not file:
        return ""
    root = Path(file)
    return tree_digest(root.parent, "*.py") if root.name == "__init__.py" else sha256_file(root)


def _format(info: Any) -> int:
    value = info.get("format", 1) if isinstance(info, dict) else 1
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def stale_demo(stamp: Path, track: Track) -> bool:
    """True when the demo was staged by generator code other than the installed track's, or in an older format."""
    try:
        info = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return True
    return not isinstance(info, dict) or _format(info) < STAGING_FORMAT or info.get("generator", "") != \
        generator_digest(track)


def stage_task(task_id: str, data_root: Path | None = None) -> StagedData:
    """Stage (a demo) or load (a task staged before) the installed task `task_id` under `data_root` (default:
    AUTOMEDBENCH_DATA, else the per-user cache); its `StagedData`. UserError for an unknown or unstaged task."""
    from .plugins import registry

    track, task = registry().task(task_id)
    return ensure(track, task, data_root if data_root is not None else default_data_root())


def digests(task: TaskSpec, data_root: Path) -> dict[str, str]:
    info = json.loads((task_dir(data_root, task) / STAMP).read_text())
    return {"public_data": info["public_sha256"], "private_data": info["private_sha256"]}


def share_public(public: Path) -> None:
    """Make the public tree world-readable whatever the umask or the track's writer, so that a sandbox
    user other than the harness's (docker runs the agent as uid 10001) can read every input.
    Symlinks are neither followed nor changed; private/ stays as the track wrote it."""
    for folder, dirs, files in os.walk(public):
        os.chmod(folder, 0o755)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, 0o644)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]


# ---------------------------------------------------------------- the engine's seal and secret on one staging

@contextlib.contextmanager
def _registered(table: dict[str, Any], dest: Path, value: Any) -> Iterator[None]:
    """`value` is `table`'s entry for `dest` inside the block (one staging's seal or secret)."""
    key = os.path.abspath(dest)
    table[key] = value
    try:
        yield
    finally:
        table.pop(key, None)


def sealed(dest: Path, seal: Seal) -> contextlib.AbstractContextManager[None]:
    """Every commit to `dest` inside this block swaps in what `seal` writes too (see the module's docstring).

    Call with the staging lock held: the seal is the lock holder's, for that one staging."""
    return _registered(_seals, dest, seal)


def secret_for(dest: Path, secret: StagingSecret) -> contextlib.AbstractContextManager[None]:
    """Every staging area opened on `dest` inside this block draws from `secret` (the engine's, one per
    staging). Call with the staging lock held."""
    return _registered(_secrets, dest, secret)


def seal_of(dest: Path) -> Seal | None:
    """The seal the engine holds on `dest` (`sealed`), if any."""
    return _seals.get(os.path.abspath(dest))


def secret_of(dest: Path) -> StagingSecret | None:
    """The secret the engine holds for `dest`'s staging (`secret_for`), if any."""
    return _secrets.get(os.path.abspath(dest))


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


# ---------------------------------------------------------------- the journaled swap

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
    remove_entry(dest / DISCARD)
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
    remove_entry(dest / DISCARD)


def recover(dest: Path) -> bool:
    """Undo a swap a crash interrupted (the previous staging comes back), or finish a committed one's cleanup;
    drop a half-written `.incoming`. True when there was anything to do. Call with the staging lock held."""
    found = False
    for leftover in (DISCARD, INCOMING):
        if os.path.lexists(dest / leftover):
            found = True
            remove_entry(dest / leftover)
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
            remove_entry(dest / part)  # it did not exist before: whatever is there now is the new copy
        elif os.path.lexists(previous / part):
            remove_entry(dest / part)
            os.rename(previous / part, dest / part)
        # else: the old part was never moved, it is still in place
    _sync_dir(dest)
    remove_entry(previous)


def remove_entry(path: Path) -> None:
    """Remove a file, a symlink (never followed) or a folder with everything below it; nothing if absent."""
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
