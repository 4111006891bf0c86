"""`evaluate --submission` of an earlier run's outputs: whether that run was scored against the staging scored now.

A demo is staged anew (fresh secret, new references) when its track's code changes; the same outputs then score
differently, and without a word the user reads the drop as the evaluator's doing."""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any

from .records import Header
from .report import fmt
from .runfolder import RunFolder

# the staging digests a run's header keeps (staging.digests), with what each covers
STAGING_PARTS = {"private_data": "references", "public_data": "inputs"}


def origin_run(submission: Path, task: str) -> tuple[RunFolder, dict[str, Any]] | None:
    """The run folder `submission` lies in (its frozen `submission/` or its `workspace/outputs/`) with its stored
    result as plain JSON (read no-follow, size-bounded), when that run was of `task`; None otherwise."""
    path = submission.absolute()
    for folder in (path.parent, path.parent.parent):
        data = RunFolder(folder).json_data(RunFolder.RESULT)
        header = data.get("header") if data else None
        if isinstance(header, dict) and header.get("task") == task:
            return RunFolder(folder), data
    return None


def staging_note(submission: Path, header: Header, demo: bool) -> str | None:
    """One line when `submission` comes from a run scored against another staging of the task than `header`'s
    (what differs, that the score is against other references, what to do); None when it does not. `demo`: the
    task is a demo, generated from a fresh secret at each staging (a folder given is ignored), which cannot be made
    again as it was."""
    found = origin_run(submission, header.task)
    if found is None:
        return None
    folder, data = found
    then = data["header"].get("hashes")
    then = then if isinstance(then, dict) else {}
    changed = [(name, str(then[name])[:8], header.hashes.get(name, "")[:8]) for name in STAGING_PARTS
               if isinstance(then.get(name), str) and then[name] != header.hashes.get(name)]
    if not changed:
        return None
    what = ", ".join(f"{STAGING_PARTS[name]} {old} -> {new}" for name, old, new in changed)
    aggregate = data.get("aggregate")
    own = aggregate.get("task") if isinstance(aggregate, dict) else None
    score = f" (it scored {fmt(own)})" if isinstance(own, int | float) and not isinstance(own, bool) and \
        math.isfinite(own) else ""
    how = ("a demo's earlier staging cannot be made again (its secret is drawn anew)" if demo else
           "to score against the run's staging, give --data-root the folder that still holds it")
    return (f"note: this submission is run {folder.name}'s, scored then against another staging of {header.task} "
            f"({what}, staged anew since): this score is against other references, not comparable with the run's "
            f"own{score}; {how}; the run's own result: automedbench show {shlex.quote(str(folder.path))}")
