"""The multi-label kind's `primary_label` option: Task = one label's Dice, the others as components."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from automedbench.api import UserError
from automedbench.testing import load_task
from automedbench_segmentation import io, metric

SHAPE = (10, 4, 4)


def reference():
    ref = np.zeros(SHAPE, np.uint8)
    ref[0:2, 0:2, 0] = 1  # tumour: 4 voxels
    ref[2:7, 0:2, 0] = 2  # pancreas: 10 voxels
    return ref


def flawed():
    pred = np.zeros(SHAPE, np.uint8)
    pred[0:2, 0, 0] = 1  # 2 of the 4 tumour voxels
    pred[9, 3, 3] = 1  # and one false positive: tumour Dice 2*2/(3+4) = 4/7
    pred[2:7, 0:2, 0] = 2
    pred[6, 1, 0] = 0  # pancreas 9 of 10, nothing extra: Dice 2*9/(9+10) = 18/19
    return pred


@pytest.fixture()
def panther_task():
    return load_task("segmentation/panther-t2")[1]


def scored(task, tmp_path, preds):
    aff = np.eye(4)
    scores, ids = [], []
    for i, pred in enumerate(preds):
        case = f"c{i}"
        ids.append(case)
        io.save(tmp_path / "private" / case / "labels.nii.gz", reference(), aff)
        if pred is None:
            scores.append(None)
            continue
        io.save(tmp_path / "out" / case / "labels.nii.gz", pred, aff)
        scores.append(metric.score_multilabel(task, case, tmp_path / "out" / case, tmp_path / "private" / case,
                                             io.CaseCache()))
    return metric.aggregate(task, scores, ids, tmp_path / "private")


def test_task_is_tumour_dice_with_pancreas_and_macro_as_components(panther_task, tmp_path):
    block = scored(panther_task, tmp_path, [flawed(), reference()])
    tumour, pancreas = (4 / 7 + 1) / 2, (18 / 19 + 1) / 2
    assert block.strict == block.partial == pytest.approx(tumour)
    comps = block.components
    assert comps["dice_1_pancreatic tumour"] == pytest.approx(tumour)
    assert comps["dice_2_pancreas"] == pytest.approx(pancreas)
    assert comps["macro_dice"] == pytest.approx((tumour + pancreas) / 2)
    assert block.per_case[0]["dice_1"] == pytest.approx(4 / 7) and block.per_case[0]["dice_2"] == pytest.approx(18 / 19)
    assert {"label_1_surface_dice", "label_2_hd95_mm"} <= set(comps)  # surface metrics stay components


def test_missing_case_counts_zero_in_partial_and_gates_strict(panther_task, tmp_path):
    block = scored(panther_task, tmp_path, [flawed(), reference(), None])
    assert block.strict == 0.0 and block.partial == pytest.approx((4 / 7 + 1 + 0) / 3)


def test_without_primary_label_the_task_is_the_macro_mean(panther_task, tmp_path):
    params = {k: v for k, v in panther_task.params.items() if k != "primary_label"}
    block = scored(attrs.evolve(panther_task, params=params), tmp_path, [flawed()])
    assert block.strict == pytest.approx((4 / 7 + 18 / 19) / 2)


def test_primary_label_must_be_one_of_the_labels(panther_task, tmp_path):
    task = attrs.evolve(panther_task, params={**panther_task.params, "primary_label": 3})
    with pytest.raises(UserError, match=r"primary_label 3 is not one of its labels \[1, 2\]"):
        scored(task, tmp_path, [flawed()])
