"""Held-out metric values for segmentation's organ + lesion Task against the original's definitions (round 18).

The original (`eval_seg/dice_scorer.py` and `aggregate.py`), restated here as `original_task`: Dice on masks
binarised at > 0.5 (both empty 1, one empty 0); the lesion mean over the cases whose reference lesion has a
voxel, the organ mean over every case; Task = 0.5·lesion + 0.5·organ, where a cohort without a reference-positive
case has lesion mean 0.0 (its guard for an empty list). Before this round ours took the organ Dice alone as the
Task there, so a single tumour-free case segmented perfectly scored 1.0 where the original scores 0.5.

Each case below is scored by the track's own code (`score_organ_lesion` on NIfTI files, then `aggregate`), with
masks in the dtypes agents write (uint8, int16, float32, float64 with 1.0 foreground).
"""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from automedbench.testing import load_task
from automedbench_segmentation import io, metric

SHAPE = (12, 10, 6)


def original_dice(pred: np.ndarray, ref: np.ndarray) -> float:
    p, g = pred > 0.5, ref > 0.5
    if not p.any() and not g.any():
        return 1.0
    if not p.any() or not g.any():
        return 0.0
    return float(2.0 * np.logical_and(p, g).sum() / (p.sum() + g.sum()))


def original_task(cases: list[dict[str, np.ndarray]]) -> float:
    organ = [original_dice(c["organ_pred"], c["organ_ref"]) for c in cases]
    lesion = [original_dice(c["lesion_pred"], c["lesion_ref"]) for c in cases if (c["lesion_ref"] > 0.5).any()]
    return 0.5 * (float(np.mean(lesion)) if lesion else 0.0) + 0.5 * float(np.mean(organ))


def _box(lo: tuple[int, int, int], hi: tuple[int, int, int], dtype=np.uint8) -> np.ndarray:
    mask = np.zeros(SHAPE, dtype=dtype)
    mask[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]] = 1
    return mask


ORGAN = _box((2, 2, 1), (10, 8, 5))
EMPTY = np.zeros(SHAPE, dtype=np.uint8)
TUMOUR = _box((4, 4, 2), (7, 6, 4))

COHORTS = {
    "one tumour-free case, perfect": [dict(organ_ref=ORGAN, organ_pred=ORGAN, lesion_ref=EMPTY, lesion_pred=EMPTY)],
    "one tumour-free case, a false-positive lesion": [
        dict(organ_ref=ORGAN, organ_pred=_box((2, 2, 1), (9, 8, 5), np.int16), lesion_ref=EMPTY,
             lesion_pred=TUMOUR)],
    "tumour-free cohort of two": [
        dict(organ_ref=ORGAN, organ_pred=ORGAN.astype(np.float32), lesion_ref=EMPTY, lesion_pred=EMPTY),
        dict(organ_ref=ORGAN, organ_pred=EMPTY, lesion_ref=EMPTY, lesion_pred=TUMOUR.astype(np.float64))],
    "a tumour missed, a tumour-free case found": [
        dict(organ_ref=ORGAN, organ_pred=ORGAN, lesion_ref=TUMOUR, lesion_pred=EMPTY),
        dict(organ_ref=ORGAN, organ_pred=ORGAN, lesion_ref=EMPTY, lesion_pred=EMPTY)],
    "partial overlaps in mixed dtypes": [
        dict(organ_ref=ORGAN, organ_pred=_box((3, 2, 1), (10, 8, 5), np.float32), lesion_ref=TUMOUR,
             lesion_pred=_box((5, 4, 2), (8, 6, 4), np.int16)),
        dict(organ_ref=ORGAN.astype(np.float32), organ_pred=ORGAN, lesion_ref=_box((3, 3, 3), (5, 5, 4)),
             lesion_pred=_box((3, 3, 3), (5, 5, 5))),
        dict(organ_ref=ORGAN, organ_pred=_box((2, 2, 1), (6, 8, 5)), lesion_ref=EMPTY,
             lesion_pred=_box((0, 0, 0), (2, 2, 2)))],
}


def _save(path: Path, array: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(array, np.eye(4)), str(path))


@pytest.mark.parametrize("name", list(COHORTS))
def test_organ_lesion_task_equals_the_originals(tmp_path, name):
    _, task = load_task("segmentation/demo")  # the kidney task's rule, without its MONAI components
    cases = COHORTS[name]
    ids = [f"case_{k}" for k in range(len(cases))]
    facts = {}
    for case_id, case in zip(ids, cases, strict=True):
        for part in ("organ", "lesion"):
            _save(tmp_path / "private" / case_id / f"{part}.nii.gz", case[f"{part}_ref"])
            _save(tmp_path / "outputs" / case_id / f"{part}.nii.gz", case[f"{part}_pred"])
        facts[case_id] = {"lesion_present": bool((case["lesion_ref"] > 0.5).any())}
    io.write_case_facts(tmp_path / "private", facts)
    cache = io.CaseCache()
    scores = []
    for case_id in ids:
        cache.begin(case_id)
        scores.append(metric.score_organ_lesion(task, case_id, tmp_path / "outputs" / case_id,
                                                tmp_path / "private" / case_id, cache))
    block = metric.aggregate(task, scores, ids, tmp_path / "private")
    assert block.strict == block.partial == pytest.approx(original_task(cases), abs=1e-12)
    positive = [c for c in cases if (c["lesion_ref"] > 0.5).any()]
    if not positive:  # the original's lesion mean of no case
        assert block.components["lesion_dice"] == 0.0 and block.components["lesion_positive_cases"] == 0.0
