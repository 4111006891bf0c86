"""Where staged task data lives, and the one-time digest that pins it in every result header.

The digest is taken once, at staging, and `load` trusts it (no re-hash per run): so the stamp holding it is
written into the track's staging area and swapped in with the data (`stagearea.sealed`), never after it; a
crash anywhere leaves the old data with the old stamp or the new data with the new one.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any

import attrs

from .errors import UserError
from .fsutil import atomic_write_text, sha256_file, tree_digest
from .records import TaskSpec
from .stagearea import StagingArea, check_published, recover, recover_locked, sealed, secret_for, staging_lock
from .stagesecret import SECRET_FILE, StagingSecret
from .track import StagedData, Track
from .untrusted import hostile_download_guard

STAMP = "staging.json"
# The stamp's `format`: 2 = a per-staging secret decides sampling, order, ids and degradations, and every
# published file carries one timestamp. A staging of an older format is not used: its case order, ids, seeds
# and file times could follow from public information (issue 35).
STAGING_FORMAT = 2


def default_data_root() -> Path:
    env = os.environ.get("AUTOMEDBENCH_DATA")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "automedbench" / "data"


def task_dir(data_root: Path, task: TaskSpec) -> Path:
    return data_root / task.id


def stage(track: Track, task: TaskSpec, data_root: Path, source: Path | None = None,
          force: bool = False) -> StagedData:
    """Stage `task` under the task's staging lock: a second process staging it waits, then (a demo staged on
    first use) finds the first one's staging instead of replacing the data a run may already be reading."""
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
    if task.demo and source is None:
        # a demo is generated from a seed: one drawn from the secret, so the generator (readable in the
        # sandbox) cannot regenerate the references; 63 bits: no search of seeds in a run
        task = attrs.evolve(task, params={**task.params, "seed": secret.seed("demo")})
    written: list[dict] = []
    generator = generator_digest(track) if task.demo and source is None else ""

    def seal(area: StagingArea, case_ids: list[str]) -> tuple[str, ...]:
        """The stamp of the complete new copy, written beside it so the swap moves both at once."""
        share_public(area.public)
        written.append(_write_stamp(area.root / STAMP, task, case_ids, area.public, area.private, source,
                                    generator))
        return (STAMP,)

    try:
        with sealed(dest, seal), secret_for(dest, secret), hostile_download_guard(source, dest):
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
        # a track that wrote `dest` without the staging area: its stamp can only follow the data
        check_published(staged.public)
        if not (staged.private / SECRET_FILE).exists():
            secret.save(staged.private / SECRET_FILE)
        share_public(staged.public)
        _write_stamp(stamp, task, staged.case_ids, staged.public, staged.private, source, generator)
    return staged


def _run_stager(track: Track, task: TaskSpec, dest: Path, source: Path | None) -> StagedData:
    """The track's stager; from a download, anything it raises but a `UserError` becomes one line too.

    A download is untrusted input: a damaged archive member (bad CRC), a truncated gzip stream or a header
    holding NaN reaches parsers whose many exception types no stager can list. Whatever they raise is the
    download's fault and is said in one line naming where it was raised, never a traceback."""
    if source is None:
        return track.stage(task, dest, source)
    try:
        return track.stage(task, dest, source)
    except UserError as exc:
        if "\n" not in str(exc):
            raise
        raise UserError(" ".join(str(exc).split())) from exc  # a parser's message quoted with its line breaks
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" in {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
        detail = " ".join(str(exc).split())[:200]
        raise UserError(f"{task.id}: the download could not be staged ({type(exc).__name__}{where}: {detail}); "
                        "a damaged or crafted file? Nothing was published") from exc


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


def load(task: TaskSpec, data_root: Path) -> StagedData:
    if not data_root.exists():
        raise UserError(f"data root {data_root} does not exist (set --data-root or AUTOMEDBENCH_DATA)")
    dest = task_dir(data_root, task)
    recover_locked(dest)  # a swap a crash interrupted: the previous staging comes back first
    stamp = dest / STAMP
    if not stamp.exists():
        hint = "" if task.demo else f"; run: automedbench stage {task.id} --from PATH"
        raise UserError(f"task {task.id} is not staged under {data_root}{hint}")
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
    return staged


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


def ensure(track: Track, task: TaskSpec, data_root: Path) -> StagedData:
    """Demo tasks stage themselves on first use (and again after their generator's code changed); real tasks
    must have been staged by the user."""
    stamp = task_dir(data_root, task) / STAMP
    if task.demo and (not stamp.exists() or stale_demo(stamp, track)):
        data_root.mkdir(parents=True, exist_ok=True)
        return stage(track, task, data_root)
    return load(task, data_root)


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
