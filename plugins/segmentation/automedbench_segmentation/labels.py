"""A multi-label task's labels, read from its parameters: light enough for the harness process (no nibabel)."""

from __future__ import annotations

from automedbench.api import TaskSpec


def task_labels(task: TaskSpec) -> dict[int, str]:
    """Foreground label -> name of a multi-label task (YAML or JSON keys, int or str)."""
    return {int(k): str(v) for k, v in task.params["labels"].items()}


def rounds_labels(task: TaskSpec) -> bool:
    """Whether a float label map is read rounded to the nearest label (`params.round_labels`: FeTA, as the original's
    multi-class checker reads `dseg.nii.gz`); elsewhere a fractional value breaks the contract."""
    return task.params.get("kind") == "multilabel" and bool(task.params.get("round_labels"))
