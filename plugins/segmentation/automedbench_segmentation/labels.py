"""A multi-label task's labels, read from its parameters: light enough for the harness process (no nibabel)."""

from __future__ import annotations

from automedbench.api import TaskSpec


def task_labels(task: TaskSpec) -> dict[int, str]:
    """Foreground label -> name of a multi-label task (YAML or JSON keys, int or str)."""
    return {int(k): str(v) for k, v in task.params["labels"].items()}
