"""Writing a staging: cases go into an `automedbench.api.staging_area`, swapped in only when complete."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import StagedData, StagingArea, TaskSpec, staging_area

from .. import contract

MANIFEST = "manifest.json"


def meta(task: TaskSpec, **extra: Any) -> dict[str, Any]:
    """What the agent may know about a case: units, shapes and, where known, the pixel size."""
    units = "HU" if task.params["kind"] == "ldct" else "normalised intensity in [0, 1]"
    return {"units": units, "input_shape": list(contract.input_shape(task)),
            "output_shape": list(contract.output_shape(task)), **extra}


class Staging:
    """Collects cases in a staging area; `commit` swaps them in, so a failed run leaves the old staging."""

    def __init__(self, task: TaskSpec, area: StagingArea) -> None:
        self.task, self.area = task, area
        self.case_ids: list[str] = []
        self.manifest: dict[str, Any] = {"task": task.id, "cases": []}

    def add(self, case_id: str, low: np.ndarray, reference: np.ndarray, info: dict[str, Any],
            source: dict[str, Any]) -> None:
        if low.shape != contract.input_shape(self.task) or reference.shape != contract.output_shape(self.task):
            raise ValueError(f"{case_id}: made {low.shape} -> {reference.shape}, the task declares "
                             f"{contract.input_shape(self.task)} -> {contract.output_shape(self.task)}")
        pub, priv = self.area.public / case_id, self.area.private / case_id
        pub.mkdir(parents=True, exist_ok=True)
        priv.mkdir(parents=True, exist_ok=True)
        np.save(pub / contract.INPUT, np.ascontiguousarray(low, dtype=np.float32))
        (pub / contract.META).write_text(json.dumps(meta(self.task, **info)) + "\n")
        np.save(priv / contract.REFERENCE, np.ascontiguousarray(reference, dtype=np.float32))
        self.case_ids.append(case_id)
        self.manifest["cases"].append({"case_id": case_id, **source})

    def commit(self, **manifest: Any) -> StagedData:
        self.manifest.update(manifest)
        (self.area.private / MANIFEST).write_text(json.dumps(self.manifest, indent=2, default=str) + "\n")
        return self.area.commit(self.case_ids)


@contextmanager
def staging(task: TaskSpec, dest: Path) -> Iterator[Staging]:
    """A fresh staging area (`automedbench.api.staging_area`): a half-made staging never replaces the old one."""
    with staging_area(dest) as area:
        yield Staging(task, area)
