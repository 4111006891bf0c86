"""The synthesis metric: completion-adjusted mean axial SSIM in HU (Task), PSNR, MAE, RMSE, gain over the input.

Per case, as the release's scorer is read (tracks-full-research §4.3): both volumes clipped to
[-1024, 3071] HU, 2-D SSIM on every plane along array axis 2 with scikit-image's default settings
(7x7 uniform window, sample covariance, K1 0.01, K2 0.03) and data range 4095, planes whose smaller side
is under 7 skipped, the mean over planes. With a body mask (MRI -> CT), planes with fewer than 16 mask
voxels are skipped and each plane's SSIM is the mean of its SSIM map over the mask voxels away from the
3-voxel border scikit-image crops (an all-ones mask gives scikit-image's own value); the full-plane
value is kept as a component. MAE and RMSE are in HU, unclipped, inside the mask (whole volume without
one); PSNR uses the clipped volumes and R 4095, a perfect case (MSE 0) left out of the mean.
Task = clip(mean SSIM over valid cases, 0, 1) x n_valid / N (the release's completion adjustment).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import CasePicture, CaseScore, MetricBlock, StagedData, TaskEvaluation, TaskSpec

from . import contract, refcache
from .axialssim import AxialSSIM

HU_LO, HU_HI = -1024.0, 3071.0
DATA_RANGE = HU_HI - HU_LO


def axial_ssim(reference: np.ndarray, prediction: np.ndarray, mask: np.ndarray | None = None,
               lo: float = HU_LO, hi: float = HU_HI) -> dict[str, float | None]:
    """{'ssim': mean over scored axial planes (masked when a mask is given), 'ssim_full_plane': unmasked mean}."""
    return AxialSSIM(np.asarray(reference), mask, lo, hi)(prediction)


def _slabs(ref: np.ndarray, pred: np.ndarray, roi: np.ndarray | None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(reference, prediction) voxels slab by slab along the axis their memory is laid out by (the last axis of a
    Fortran-ordered NIfTI volume), inside the mask when there is one: each slab's work stays in the cache."""
    if ref.ndim < 2:
        yield (ref, pred) if roi is None else (ref[roi], pred[roi])
        return
    axis = ref.ndim - 1 if pred.flags.f_contiguous and not pred.flags.c_contiguous else 0
    for k in range(ref.shape[axis]):
        at = (slice(None),) * axis + (k,)  # a view (np.take would copy, slowly)
        r, p = ref[at], pred[at]
        if roi is not None:
            inside = roi[at]
            r, p = r[inside], p[inside]
        yield r, p


def errors(reference: np.ndarray, prediction: np.ndarray, mask: np.ndarray | None = None,
           reference_range: tuple[float, float] | None = None) -> dict[str, float | None]:
    """MAE and RMSE in HU (unclipped, inside the mask if it is not empty) and PSNR on the clipped volumes.

    One pass over the volumes, slab by slab (`_slabs`): each slab's float64 difference gives the sums of squares
    and of absolute values, and also the clipped squares where neither side of the slab leaves the HU window
    (elsewhere the clipped difference is computed for that slab alone). `reference_range`: the reference's min
    and max when known (then no slab of the reference is searched for them). Sums are per slab, then added,
    so a value can differ from scikit-learn's whole-array sum in its last bits (tests: relative 1e-13)."""
    ref = np.asarray(reference)
    pred = np.asarray(prediction)
    if ref.shape != pred.shape:
        raise ValueError(f"shape {pred.shape} is not the reference's {ref.shape}")
    roi = np.asarray(mask) > 0 if mask is not None and np.any(mask) else None
    ref_inside = reference_range is not None and reference_range[0] >= HU_LO and reference_range[1] <= HU_HI
    count, squares, absolute, clipped_squares = 0, 0.0, 0.0, 0.0
    for r, p in _slabs(ref, pred, roi):
        if not r.size:
            continue
        diff = np.subtract(p, r, dtype=np.float64).ravel(order="K")
        square = float(np.square(diff).sum())
        squares += square
        absolute += float(np.abs(diff, out=diff).sum())
        count += diff.size
        inside = float(p.min()) >= HU_LO and float(p.max()) <= HU_HI and (
            ref_inside or (float(r.min()) >= HU_LO and float(r.max()) <= HU_HI))
        if inside:
            clipped_squares += square  # nothing to clip on either side of this slab
        else:
            clipped = np.clip(p, HU_LO, HU_HI, dtype=np.float64)
            clipped -= np.clip(r, HU_LO, HU_HI, dtype=np.float64)
            clipped_squares += float(np.square(clipped, out=clipped).sum())
    if not count:
        return {"mae_hu": math.nan, "rmse_hu": math.nan, "psnr": math.nan}
    mse = clipped_squares / count
    return {"mae_hu": absolute / count, "rmse_hu": math.sqrt(squares / count),
            "psnr": None if mse == 0 else float(10 * math.log10(DATA_RANGE ** 2 / mse))}


def score_pair(reference: np.ndarray, prediction: np.ndarray, mask: np.ndarray | None = None) -> dict[str, Any]:
    values: dict[str, Any] = dict(axial_ssim(reference, prediction, mask))
    values.update(errors(reference, prediction, mask))
    return values


def _mean(values: list[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return float(sum(found) / len(found)) if found else None


def fold(scores: list[CaseScore | None], case_ids: list[str], identity: dict[str, float],
         task_score: str = "partial") -> MetricBlock:
    """Task = clip(mean SSIM of the valid cases, 0, 1) x n_valid / N; strict = that only when every case is valid."""
    n = len(case_ids)
    valid = [s for s in scores if s is not None]
    ssims = [float(s.values["ssim"] or 0.0) for s in valid]
    mean = min(1.0, max(0.0, sum(ssims) / len(ssims))) if ssims else 0.0
    partial = mean * len(valid) / n if n else 0.0
    strict = partial if n and len(valid) == n else 0.0
    rows: list[dict[str, Any]] = []
    for case_id, score in zip(case_ids, scores, strict=True):
        row = {"case_id": case_id, "valid": score is not None, **(score.values if score else {"ssim": 0.0})}
        row["ssim_identity"] = identity.get(case_id)
        rows.append(row)
    identity_mean = _mean([identity.get(c) for c in case_ids])
    components: dict[str, float | None] = {
        "ssim_mean_valid": _mean(ssims),
        "ssim_full_plane_mean_valid": _mean([s.values.get("ssim_full_plane") for s in valid]),
        "psnr_mean_valid": _mean([s.values.get("psnr") for s in valid]),
        "mae_hu_mean_valid": _mean([s.values.get("mae_hu") for s in valid]),
        "rmse_hu_mean_valid": _mean([s.values.get("rmse_hu") for s in valid]),
        # the unchanged input's Task over the same cases: what doing nothing scores, and the gain over it
        "ssim_identity_mean": identity_mean,
        "gain_over_input": None if identity_mean is None else round(partial - identity_mean, 6),
        "valid_cases": float(len(valid)),
        # scored as stored, as the release (it checks the shape only): a header unlike the input's is told apart
        "affine_mismatch_cases": float(sum(s.values.get("affine_matches") is False for s in valid)),
        "expected_cases": float(n),
    }
    return MetricBlock("ssim", round(strict, 6), round(partial, 6), task_score, components, rows,
                       counts=["valid_cases", "affine_mismatch_cases", "expected_cases"], units=UNITS)


# PSNR in decibels, the errors in Hounsfield units (the target is CT): printed beside the numbers
UNITS = {"psnr": "dB", "psnr_mean_valid": "dB", "mae_hu": "HU", "mae_hu_mean_valid": "HU", "rmse_hu": "HU",
         "rmse_hu_mean_valid": "HU"}


class SynthesisEvaluation(TaskEvaluation):
    """Reads each case's target (and mask) from private/ and the frozen output; the input's score is staged."""

    def __init__(self, task: TaskSpec, staged: StagedData, options: dict[str, str] | None = None) -> None:
        super().__init__(task, staged, options)
        from .data.store import read_facts

        self.facts = read_facts(staged.private)
        self.last: tuple[Any, ...] | None = None  # the case just scored (its volumes), for its picture

    def score_case(self, case_id: str, submitted: Path) -> CaseScore:
        ref = refcache.reference(self.staged.private, case_id, HU_LO, HU_HI)
        prediction, affine, reasons = contract.read_output(submitted.parent, case_id, contract.OUTPUT,
                                                           ref.target.shape)
        if prediction is None:
            raise ValueError("; ".join(reasons))
        values: dict[str, Any] = dict(ref.ssim(prediction))
        values["affine_matches"] = contract.affine_matches(affine, ref.affine)  # reported, never refused
        values.update(errors(ref.target, prediction, ref.mask, (ref.target_min, ref.target_max)))
        if self.task.params["kind"] == "ctsr":  # an input copy is a fact the error-code detector reads
            staged_input = refcache.input_voxels(self.staged.public, case_id, self.task.input_files[0])
            values["same_as_input"] = staged_input.equal(prediction)
        elif ref.mask is not None:  # MR->CT: the MR is no HU image, so its SSIM (~0) is no bar; a body outline is
            # (0 HU inside, air outside, the constant baseline): S5's evidence must beat it on the case (round 39)
            values["ssim_constant"] = ref.outline_ssim()
        values["out_min"], values["out_max"] = float(prediction.min()), float(prediction.max())
        self.last = (case_id, prediction, ref.target, ref.mask, ref.affine)
        return CaseScore(case_id, values)

    def case_picture(self, case_id: str, submitted: Path | None) -> CasePicture | None:
        from .data.store import load_private
        from .picture import case_picture

        last, self.last = self.last, None
        if last is not None and last[0] == case_id and submitted is not None:
            predicted, target, mask, affine = last[1:]
        else:
            predicted, (target, mask, affine) = None, load_private(self.staged.private, case_id)
        return case_picture(self.task, self.staged.public / case_id / self.task.input_files[0], predicted, target,
                            mask, affine)

    def aggregate(self, scores: list[CaseScore | None], case_ids: list[str]) -> MetricBlock:
        identity = {c: f["ssim_identity"] for c, f in self.facts.items() if f.get("ssim_identity") is not None}
        return fold(scores, case_ids, identity, self.task.task_score)
