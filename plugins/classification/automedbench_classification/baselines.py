"""Baselines for `automedbench evaluate --baseline NAME` (trusted code, run by the harness, not the agent).

`majority-class` and `label-prior` read the reference labels to know the class mix: they are the best a
classifier that ignores the pixels can do, and must stay below the task's B band.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

from automedbench.api import StagedData, TaskSpec, UserError

from . import contract
from .data.staged import read_label

BASELINES: dict[str, str] = {
    "perfect": "the reference label of every case",
    "empty": "no prediction.json at all (every case missing)",
    "constant": "the task's first class for every case",
    "majority-class": "the reference's most frequent class for every case",
    "label-prior": "a label drawn at random (seeded) from the reference's class frequencies, per case",
}
# What must rate below B on every task (`Track.trivial_baselines`): nothing, one class, the class prior.
TRIVIAL: dict[str, str] = {name: BASELINES[name] for name in ("empty", "constant", "majority-class", "label-prior")}


def baseline_labels(task: TaskSpec, name: str, staged: StagedData) -> dict[str, str]:
    """Case id -> label the baseline writes (no entry = no file)."""
    classes, _ = contract.task_labels(task.params)
    truth = {c: read_label(staged.private / c) for c in staged.case_ids}
    if name == "perfect":
        return truth
    if name == "empty":
        return {}
    if name == "constant":
        return dict.fromkeys(staged.case_ids, classes[0])
    counts = Counter(truth.values())
    if name == "majority-class":
        top = max(classes, key=lambda c: (counts.get(c, 0), -classes.index(c)))
        return dict.fromkeys(staged.case_ids, top)
    rng = random.Random(0)
    names = [c for c in classes if counts.get(c)]
    return {case: rng.choices(names, weights=[counts[c] for c in names])[0] for case in staged.case_ids}


def write_baseline(task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
    """One prediction.json per case under `dest` with the baseline's label."""
    if name not in BASELINES:
        raise UserError(f"unknown baseline {name!r}")
    dest.mkdir(parents=True, exist_ok=True)
    for case_id, label in baseline_labels(task, name, staged).items():
        target = dest / case_id
        target.mkdir(parents=True, exist_ok=True)
        (target / contract.PREDICTION_FILE).write_text(json.dumps({"label": label}) + "\n")
