"""The run folder: every file name in it, and the one loader of each.

The runner writes these files and `show`, `rejudge`, `evaluate`, the error-code tagger and the campaign
read them. Before, each module spelled the names itself and read the files its own way. Now every read
goes through here: a regular file opened without following a symlink, and never more than a size limit.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import errors
from .fsutil import read_below, read_json_object
from .records import Evaluation, JudgeVerdict, Result
from .serialize import read_json
from .trajectory import read_events, torn_line

# Text files the harness wrote and reads back (plan, brief, pilot verdicts); larger copies are refused.
MAX_TEXT_BYTES = 64 << 20
# plan.png as collected (plan_artefacts caps it at 20 MiB; the margin keeps this the looser of the two)
MAX_PLAN_PNG_BYTES = 32 << 20
# One result.json the campaign loads raw (leaderboards read thousands: no cattrs, only the bytes).
MAX_RESULT_BYTES = 64 << 20


class _Below:
    """A path in the run folder by its name: `folder.result` is `folder.path / RunFolder.RESULT`."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __get__(self, folder: RunFolder, owner: type | None = None) -> Path:
        return folder.path.joinpath(*self.parts)


class RunFolder:
    """One run's folder: `runs/<run_id>/`. Names are class attributes so that finders can use them unbound."""

    RESULT = "result.json"
    TRAJECTORY = "trajectory.jsonl"
    TOOL_OUTPUT = "tool_output"
    BRIEF = "brief.md"
    JUDGE = "judge.json"
    EVALUATION = "evaluation.json"
    GRADES = "grades.json"
    SUBMISSION = "submission"
    MANIFEST = "submission_manifest.json"
    CHECKS = "pilot_checks.json"
    ARTEFACTS = "artefacts"
    PLAN_MD = "plan.md"
    PLAN_PNG = "plan.png"
    PILOT = "pilot"
    WORKSPACE = "workspace"
    VIEW = "view.html"  # the run page, written by the campaign built-in when it is installed
    RESERVE = ".result-reserve"
    # What marks a run folder even before its result exists (the campaign then never searches below it).
    MARKS = (TRAJECTORY, WORKSPACE, BRIEF)

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    def __str__(self) -> str:
        return str(self.path)

    def __fspath__(self) -> str:
        return str(self.path)

    @property
    def name(self) -> str:
        """The folder's own name, also when given as `.` or `runs/x/..` (`Path('.').name` is '', so a result
        checked from inside its folder read as signed for another)."""
        return os.path.basename(os.path.abspath(self.path))

    # ------------------------------------------------------------------ names

    result = _Below(RESULT)
    trajectory = _Below(TRAJECTORY)
    brief = _Below(BRIEF)
    judge = _Below(JUDGE)
    evaluation = _Below(EVALUATION)
    grades = _Below(GRADES)  # what the model-graded scoring step asked, and who answered (absent: nothing to grade)
    submission = _Below(SUBMISSION)
    manifest = _Below(MANIFEST)
    checks = _Below(CHECKS)
    artefacts = _Below(ARTEFACTS)
    pilot = _Below(PILOT)
    workspace = _Below(WORKSPACE)
    outputs = _Below(WORKSPACE, "outputs")
    plan = _Below(WORKSPACE, "plan")
    reserve = _Below(RESERVE)

    def archived_judge(self, judge: str, stamp: str, n: int = 1) -> Path:
        """Where a replaced verdict is kept: judge.<judge>.<stamp>[-n].json."""
        return self.path / (f"judge.{judge}.{stamp}.json" if n == 1 else f"judge.{judge}.{stamp}-{n}.json")

    # ------------------------------------------------------------------ finding

    @classmethod
    def locate(cls, run: str | Path, runs: Path = Path("runs")) -> RunFolder:
        """A stored run from what a user typed: a run folder, its result.json, or a run id under `runs`."""
        path = Path(run)
        if not path.exists() and (runs / str(run)).exists():
            path = runs / str(run)
        if path.name == cls.RESULT:
            path = path.parent
        if not path.exists():
            raise errors.UserError(f"{run}: no such file, run folder or run id under {runs}")
        if not (path / cls.RESULT).is_file():
            inside = sorted(p.parent.name for p in path.glob(f"*/{cls.RESULT}")) if path.is_dir() else []
            hint = f"; it holds {len(inside)} run(s), e.g. {path / inside[0]}" if inside else ""
            raise errors.UserError(f"{run}: not a run folder (no {cls.RESULT}){hint}")
        return cls(path)

    # ------------------------------------------------------------------ loaders

    def read_bytes(self, relative: str, max_bytes: int) -> bytes | None:
        """A regular file below the folder, reached without following any symlink; None when absent,
        not a regular file, or over `max_bytes`."""
        return read_below(self.path, relative, max_bytes)

    def read_text(self, relative: str, max_bytes: int = MAX_TEXT_BYTES) -> str | None:
        data = self.read_bytes(relative, max_bytes)
        return None if data is None else data.decode("utf-8", "replace")

    def load_result(self) -> Result:
        return read_json(self.result, Result)

    def result_bytes(self) -> bytes | None:
        """The raw result.json for fast loaders (the campaign's), or None when it is not a small regular file."""
        return self.read_bytes(self.RESULT, MAX_RESULT_BYTES)

    def load_judge(self, path: Path | None = None) -> JudgeVerdict:
        return read_json(path or self.judge, JudgeVerdict)

    def stored_judges(self, judge: str) -> list[Path]:
        """judge.json first, then this judge's archived verdicts, newest first."""
        return [self.judge, *sorted(self.path.glob(f"judge.{judge}.*.json"), reverse=True)]

    def load_evaluation(self) -> Evaluation | None:
        return read_json(self.evaluation, Evaluation) if self.evaluation.exists() else None

    def evaluation_data(self) -> dict[str, Any] | None:
        """evaluation.json as plain JSON (detectors read fields a track adds); None when absent or unreadable."""
        return self.json_data(self.EVALUATION)

    def json_data(self, name: str) -> dict[str, Any] | None:
        """A JSON object file of the folder as plain JSON (no cattrs), read no-follow within MAX_RESULT_BYTES;
        None when absent, unreadable or not an object."""
        return read_json_object(self.path, name, MAX_RESULT_BYTES)

    def events(self) -> list[dict[str, Any]]:
        """The trajectory's events, tolerating a torn last line from a crash."""
        return read_events(self.trajectory)

    def torn_line(self) -> int | None:
        return torn_line(self.trajectory)

    def check_trajectory(self) -> None:
        """Refuse a torn trajectory: a verdict on the events before the tear would judge part of the run."""
        torn = self.torn_line()
        if torn is not None:
            raise errors.UserError(f"{self.trajectory}: line {torn} is not valid JSON (torn or edited); "
                                   "a verdict on the events before it would judge only part of the run")

    def brief_text(self) -> str:
        return self.read_text(self.BRIEF) or ""

    def plan_md(self) -> str | None:
        return self.read_text(f"{self.ARTEFACTS}/{self.PLAN_MD}")

    def plan_png(self) -> bytes | None:
        return self.read_bytes(f"{self.ARTEFACTS}/{self.PLAN_PNG}", MAX_PLAN_PNG_BYTES)

    def pilot_checks(self) -> list[dict[str, Any]] | None:
        """The stored pilot verdicts; None for a run recorded before pilots were checked (no file), [] for an
        unreadable file (no pilot is verified then)."""
        if not os.path.lexists(self.checks):
            return None
        text = self.read_text(self.CHECKS)
        try:
            data = json.loads(text) if text is not None else None
        except (ValueError, RecursionError):
            return []
        return [c for c in data if isinstance(c, dict)] if isinstance(data, list) else []


def find_runs(roots: Iterable[Path], depth: int = 3) -> list[Path]:
    """Run folders under each root: the root itself if it holds result.json, else folders below it (up to
    `depth` levels, so a folder of sweeps works too). A run folder's own sub-folders and hidden folders
    (`.attempts`, `.sweep-slots`) are not searched, nor is a run still in progress: its workspace is the
    agent's, and a result.json planted there must never count. Symlinked folders are not followed. A run
    reached from two roots is listed once."""
    found: list[Path] = []

    def walk(folder: str, level: int) -> None:
        with os.scandir(folder) as entries:
            for entry in entries:
                if not entry.is_dir(follow_symlinks=False) or entry.name.startswith("."):
                    continue
                if _is_file(os.path.join(entry.path, RunFolder.RESULT)):
                    found.append(Path(entry.path))
                elif level < depth and not any(os.path.lexists(os.path.join(entry.path, mark))
                                               for mark in RunFolder.MARKS):
                    walk(entry.path, level + 1)

    for root in roots:
        root = Path(root)
        if not root.exists():
            raise errors.UserError(f"{root}: no such folder")
        if (root / RunFolder.RESULT).is_file():
            found.append(root)
        else:
            walk(str(root), 1)
    # roots that overlap (`runs` and `runs/x`, a path spelled twice) name one run once: a run counted twice
    # would weigh double in its cell's mean and CI
    once: dict[str, Path] = {}
    for path in found:
        once.setdefault(os.path.realpath(path), path)
    return sorted(once.values())


def _is_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
