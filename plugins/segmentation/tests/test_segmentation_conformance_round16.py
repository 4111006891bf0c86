"""Held-out file-contract cases for FeTA's label map against the original's multi-class checker (round 16).

The original (`eval_seg`, `task_type: multiclass`) reads `dseg.nii.gz`, rounds it to integers (`np.rint`), and
accepts it when the shape equals the input's and the rounded values lie in {0} ∪ labels; per-class Dice is taken
on the rounded labels. A float map from a resampling (values such as 2.0000002 or 0.9999) or a soft map is
therefore scored. Before this round our checker refused any fractional voxel ("non-integer values"), so such a
submission was invalid and the strict Task 0 where the original scored it. Now FeTA (`params.round_labels`)
reads the map rounded, as the original; a rounded value outside the labels is still refused, as there.
Label-map tasks the original has no checker for keep the integral-values rule (a soft map there is the
`wrong-format` flawed agent's mistake).
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from automedbench.testing import load_task
from automedbench_segmentation import contract, io, metric

SHAPE = (14, 12, 10)
AFFINE = np.diag([0.8, 0.8, 0.8, 1.0])


def reference() -> np.ndarray:
    ref = np.zeros(SHAPE, np.uint8)
    for k in range(1, 8):  # seven tissues in slabs along the first axis
        ref[2 * k - 1:2 * k + 1, 2:10, 2:8] = k
    return ref


def original_multiclass(pred: np.ndarray, ref: np.ndarray, labels: range) -> tuple[bool, dict[int, float]]:
    """The original's rule, restated: rounded labels, a set check, Dice per class (both empty = 1)."""
    rounded = np.rint(pred).astype(np.int64)
    valid = pred.shape == ref.shape and set(np.unique(rounded).tolist()) <= {0, *labels}
    dice = {}
    for k in labels:
        p, g = rounded == k, ref == k
        total = int(p.sum() + g.sum())
        dice[k] = 1.0 if total == 0 else 2.0 * int((p & g).sum()) / total
    return valid, dice


def stage_case(tmp_path, pred: np.ndarray, task_id: str = "segmentation/feta"):
    task = load_task(task_id)[1]
    # Dice only: the surface components (MONAI, seconds to import) are round 15's subject
    task = attrs.evolve(task, params={**task.params, "surface_metrics": False})
    name = task.output_files[0]
    io.save(tmp_path / "public" / "c0" / task.input_files[0], np.zeros(SHAPE, np.float32), AFFINE)
    io.save(tmp_path / "private" / "c0" / name, reference(), AFFINE)
    io.save(tmp_path / "out" / "c0" / name, pred, AFFINE)
    return task


def ours(tmp_path, task) -> tuple[bool, dict[int, float] | None]:
    cache = io.CaseCache()
    cache.begin("c0")
    verdict = contract.check_case(task, "c0", tmp_path / "out" / "c0", tmp_path / "public" / "c0", cache)
    if not verdict.valid:
        return False, None
    score = metric.score_multilabel(task, "c0", tmp_path / "out" / "c0", tmp_path / "private" / "c0", cache)
    return True, {k: score.values[f"dice_{k}"] for k in range(1, 8)}


def noisy(seed: int, scale: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (reference() + rng.uniform(-scale, scale, SHAPE)).astype(np.float32)


@pytest.mark.parametrize(("case", "pred"), [
    ("float32 resampling noise", noisy(0, 1e-3)),
    ("soft boundaries up to 0.45", noisy(1, 0.45)),
    ("labels shifted by 0.6 (wrong tissue)", (reference() + 0.6).astype(np.float32)),
    ("a voxel rounding to 8, outside the labels", np.where(reference() == 7, 7.6, reference()).astype(np.float32)),
    ("a voxel rounding to -1", np.where(reference() == 0, -0.7, reference()).astype(np.float64)),
    ("exact integer floats", reference().astype(np.float64)),
])
def test_feta_reads_float_label_maps_as_the_original(tmp_path, case, pred):
    task = stage_case(tmp_path, pred)
    expected_valid, expected_dice = original_multiclass(pred, reference(), range(1, 8))
    valid, dice = ours(tmp_path, task)
    assert valid == expected_valid, case
    if valid:
        assert dice == pytest.approx(expected_dice), case


def test_feta_scores_a_noisy_float_map_like_its_clean_labels(tmp_path):
    """The end of the chain: the cohort value of a float map with resampling noise equals the clean map's (1.0)."""
    task = stage_case(tmp_path, noisy(2, 0.3))
    cache = io.CaseCache()
    cache.begin("c0")
    score = metric.score_multilabel(task, "c0", tmp_path / "out" / "c0", tmp_path / "private" / "c0", cache)
    block = metric.aggregate(task, [score], ["c0"], tmp_path / "private")
    assert block.value == pytest.approx(1.0) and block.partial == pytest.approx(1.0)


def test_label_maps_without_the_originals_rule_keep_integral_values(tmp_path):
    """`segmentation/demo-multilabel` (no original checker): a fractional voxel is still refused."""
    task = load_task("segmentation/demo-multilabel")[1]
    assert not task.params.get("round_labels")
    shape_labels = sorted(int(k) for k in task.params["labels"])
    pred = np.zeros(SHAPE, np.float32)
    pred[2:5, 2:5, 2:5] = shape_labels[0] + 0.2
    name = task.output_files[0]
    io.save(tmp_path / "public" / "c0" / task.input_files[0], np.zeros(SHAPE, np.float32), AFFINE)
    io.save(tmp_path / "out" / "c0" / name, pred, AFFINE)
    verdict = contract.check_case(task, "c0", tmp_path / "out" / "c0", tmp_path / "public" / "c0")
    assert not verdict.valid and "non-integer values" in verdict.reasons[0]


def test_the_papers_worked_example_task_is_our_organ25_lesion75_component(tmp_path):
    """Paper App. I.1 (Opus 4.6, kidney tumour, Lite): organ Dice 0.9160, lesion Dice 0.1045, Task 0.3073 — the
    original's previous weighting 0.25·organ + 0.75·lesion, which we report as the component `organ25_lesion75`
    (before this round there was no such component); our Task keeps the original's current 0.5·organ + 0.5·lesion
    (0.5103 here), as the README's differences table says. The example's Agentic and Overall are checked in
    `tests/test_rubric_conformance_round16.py`."""
    from automedbench.api import CaseScore

    task = load_task("segmentation/kidney")[1]
    score = CaseScore("c0", {"organ_dice": 0.9160, "lesion_dice": 0.1045, "lesion_positive": True})
    block = metric.aggregate(attrs.evolve(task, params={**task.params, "surface_metrics": False}), [score], ["c0"],
                             tmp_path)
    assert block.components["organ25_lesion75"] == pytest.approx(0.3073, abs=1e-4)
    assert block.value == pytest.approx(0.5 * 0.9160 + 0.5 * 0.1045)
