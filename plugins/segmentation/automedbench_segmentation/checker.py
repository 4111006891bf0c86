"""The segmentation output contract: present, loadable, input shape and affine, allowed values only."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
from automedbench.records import CaseVerdict, TaskSpec


def allowed_values(task: TaskSpec, name: str) -> set[int]:
    if task.params.get("kind") == "multilabel":
        return {0, *(int(k) for k in task.params["labels"])}
    return {0, 1}


def check_file(path: Path, shape: tuple[int, ...], affine: np.ndarray, allowed: set[int]) -> list[str]:
    """Problems with one output file (empty list = valid)."""
    if not path.is_file():
        return [f"{path.name}: missing"]
    try:
        image = nib.load(str(path))
        data = np.asanyarray(image.dataobj)
    except Exception as exc:
        return [f"{path.name}: unreadable ({type(exc).__name__}: {str(exc)[:120]})"]
    problems = []
    if tuple(data.shape) != tuple(shape):
        problems.append(f"{path.name}: shape {tuple(data.shape)} != input {tuple(shape)}")
        return problems
    if not np.allclose(image.affine, affine, atol=1e-3):
        problems.append(f"{path.name}: affine differs from the input's")
    if data.dtype.kind == "f":
        if not np.isfinite(data).all():
            problems.append(f"{path.name}: contains NaN or Inf")
            return problems
        if not np.array_equal(data, np.round(data)):
            problems.append(f"{path.name}: non-integer values (probabilities?) in [{data.min():.3g}, {data.max():.3g}]")
            return problems
    elif data.dtype.kind not in "iub":
        return [f"{path.name}: unsupported dtype {data.dtype}"]
    lo, hi = int(data.min()), int(data.max())
    if lo < min(allowed) or hi > max(allowed):
        problems.append(f"{path.name}: values outside {sorted(allowed)} (min {lo}, max {hi})")
    elif len(allowed) > 2:
        present = {int(v) for v in np.unique(data)}
        extra = present - allowed
        if extra:
            problems.append(f"{path.name}: labels {sorted(extra)} not in {sorted(allowed)}")
    return problems


def check_case(task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
    reference = nib.load(str(public / task.input_files[0]))
    shape, affine = reference.shape, reference.affine
    reasons: list[str] = []
    for name in task.output_files:
        reasons += check_file(submitted / name, shape, affine, allowed_values(task, name))
    present = any((submitted / n).exists() for n in task.output_files)
    return CaseVerdict(case_id, present, not reasons, reasons)
