"""The segmentation output contract: present, loadable, input shape and affine, allowed values only.

Values are checked in one chunked pass (min, max, NaN/Inf and integrality per chunk), so a KiTS-sized
float volume costs no full-size temporaries; the set of labels present is only computed (with a
`bincount`, never `np.unique`'s sort) when the allowed set has gaps that min/max cannot rule out.
"""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
from automedbench.api import CaseVerdict, TaskSpec

from .io import CaseCache, precheck
from .labels import rounds_labels, task_labels

CHUNK = 1 << 20


def allowed_values(task: TaskSpec, name: str) -> set[int]:
    if task.params.get("kind") == "multilabel":
        return {0, *task_labels(task)}
    return {0, 1}


def _flat(data: np.ndarray) -> np.ndarray:
    """A 1-D view in memory order (no copy for C- or Fortran-ordered volumes, as nibabel returns)."""
    return data.reshape(-1, order="A")


def value_problems(name: str, data: np.ndarray, allowed: set[int], rounded: bool = False) -> list[str]:
    """Why the voxel values break the contract (empty list = fine). `rounded`: a float map is read rounded to the
    nearest integer (the original's multi-class rule) and only the rounded values must be in `allowed`."""
    if data.dtype.kind not in "iubf":
        return [f"{name}: unsupported dtype {data.dtype}"]
    if data.size == 0:
        return [f"{name}: empty volume"]
    flat = _flat(data)
    lo, hi = np.inf, -np.inf
    bad_finite = fractional = 0
    for start in range(0, flat.size, CHUNK):
        part = flat[start:start + CHUNK]
        if data.dtype.kind == "f":
            finite = np.isfinite(part)
            n_bad = part.size - int(np.count_nonzero(finite))
            if n_bad:
                bad_finite += n_bad
                part = part[finite]
                if not part.size:
                    continue
            if rounded:
                part = np.rint(part)
            else:
                fractional += int(np.count_nonzero(part != np.rint(part)))
        lo, hi = min(lo, part.min()), max(hi, part.max())
    lo, hi = float(lo), float(hi)
    if bad_finite == flat.size:
        return [f"{name}: every voxel is NaN or Inf"]
    if bad_finite:
        return [f"{name}: {bad_finite} NaN/Inf voxel(s)"]
    if fractional:
        return [f"{name}: non-integer values in {fractional} voxel(s) (probabilities?), range [{lo:.3g}, {hi:.3g}]"]
    if lo < min(allowed) or hi > max(allowed):
        return [f"{name}: values outside {sorted(allowed)} (min {lo:g}, max {hi:g})"]
    if len(allowed) != int(max(allowed)) - int(min(allowed)) + 1:  # gaps: min/max cannot rule values out
        counts = np.zeros(int(hi) + 1, dtype=np.int64)
        for start in range(0, flat.size, CHUNK):
            part = flat[start:start + CHUNK]
            part = np.rint(part) if rounded and data.dtype.kind == "f" else part
            counts += np.bincount(part.astype(np.intp), minlength=int(hi) + 1)
        extra = sorted(set(np.flatnonzero(counts).tolist()) - allowed)
        if extra:
            return [f"{name}: labels {extra} not in {sorted(allowed)}"]
    return []


def check_file(path: Path, shape: tuple[int, ...], affine: np.ndarray, allowed: set[int],
               cache: CaseCache | None = None, rounded: bool = False) -> list[str]:
    """Problems with one output file (empty list = valid)."""
    if not path.is_file():
        return [f"{path.name}: missing"]
    try:  # the header first: a wrong shape or dtype is refused before any voxel is decompressed
        precheck(path)  # declared sizes beyond the contract are refused before nibabel reads them
        header = nib.load(str(path)).header
        claimed, dtype = tuple(int(n) for n in header.get_data_shape()), np.dtype(header.get_data_dtype())
    except Exception as exc:
        return [f"{path.name}: unreadable ({type(exc).__name__}: {str(exc)[:120]})"]
    if claimed != tuple(shape):
        return [f"{path.name}: shape {claimed} != input {tuple(shape)}"]
    if dtype.kind not in "iubf":
        return [f"{path.name}: unsupported dtype {dtype}"]
    try:
        image, data = (cache or CaseCache()).load(path)
    except Exception as exc:
        return [f"{path.name}: unreadable ({type(exc).__name__}: {str(exc)[:120]})"]
    if tuple(data.shape) != tuple(shape):
        return [f"{path.name}: shape {tuple(data.shape)} != input {tuple(shape)}"]
    problems = []
    if not np.allclose(image.affine, affine, atol=1e-3):
        problems.append(f"{path.name}: affine differs from the input's")
    return problems + value_problems(path.name, data, allowed, rounded)


def check_case(task: TaskSpec, case_id: str, submitted: Path, public: Path,
               cache: CaseCache | None = None) -> CaseVerdict:
    reference = nib.load(str(public / task.input_files[0]))  # header only: the CT itself is never read
    shape, affine = reference.shape, reference.affine
    reasons: list[str] = []
    for name in task.output_files:
        reasons += check_file(submitted / name, shape, affine, allowed_values(task, name), cache, rounds_labels(task))
    present = any((submitted / n).exists() for n in task.output_files)
    return CaseVerdict(case_id, present, not reasons, reasons)
