"""Task metric end to end through the isolated evaluator: organ + lesion and multi-label (macro Dice).

Expected values are computed here by hand from the staged references, not read from the track.
"""

from __future__ import annotations

import shutil

import nibabel as nib
import numpy as np
import pytest
from automedbench.api import CaseScore
from automedbench.testing import ensure_staged, evaluate_outputs
from automedbench_segmentation import io, metric

ML = "segmentation/demo-multilabel"


@pytest.fixture(scope="module")
def ml_root(amb_registry, tmp_path_factory):
    root = tmp_path_factory.mktemp("ml-data")
    track, task = amb_registry.task(ML)
    return root, ensure_staged(track, task, root)


def hand_dice(p, g):
    total = np.count_nonzero(p) + np.count_nonzero(g)
    return 1.0 if total == 0 else 2 * np.count_nonzero(p & g) / total


def test_multilabel_perfect_and_empty(ml_root, tmp_path):
    root, staged = ml_root
    perfect = evaluate_outputs(ML, baseline="perfect", data_root=root, work=tmp_path / "p")
    assert perfect.task.strict == 1.0 and perfect.aggregate.rating == "A"
    empty = evaluate_outputs(ML, baseline="empty", data_root=root, work=tmp_path / "e")
    # all-zero maps: Dice 1 only for a label absent from a case's reference (the tumour of the tumour-free case)
    refs = [io.load_array(staged.private / c / "labels.nii.gz") for c in staged.case_ids]
    per_label = [np.mean([1.0 if not (r == k).any() else 0.0 for r in refs]) for k in (1, 2, 3)]
    assert empty.task.strict == pytest.approx(np.mean(per_label))
    assert empty.task.components["dice_2_kidney tumour"] == pytest.approx(1 / 4)


def test_multilabel_partial_submission_hand_computed(ml_root, tmp_path):
    """Case 0: liver dropped; case 1: kidney shifted; case 3 missing -> strict 0, partial by hand."""
    root, staged = ml_root
    sub = tmp_path / "sub"
    ids = staged.case_ids
    refs = {c: io.load_array(staged.private / c / "labels.nii.gz") for c in ids}
    preds = {}
    for c in ids[:3]:
        shutil.copytree(staged.private / c, sub / c, ignore=shutil.ignore_patterns("*.json"))
        preds[c] = refs[c].copy()
    preds[ids[0]][preds[ids[0]] == 3] = 0
    kidney = np.roll(refs[ids[1]] == 1, 2, axis=0)
    preds[ids[1]][preds[ids[1]] == 1] = 0
    preds[ids[1]][kidney & (preds[ids[1]] == 0)] = 1
    aff = nib.load(str(staged.public / ids[0] / "ct.nii.gz")).affine
    for c in ids[:2]:
        io.save(sub / c / "labels.nii.gz", preds[c], aff)
    result = evaluate_outputs(ML, submission=sub, data_root=root, work=tmp_path / "w")
    expected = []
    for k in (1, 2, 3):
        vals = [hand_dice(preds[c] == k, refs[c] == k) for c in ids[:3]] + [0.0]  # missing case counts 0
        expected.append(np.mean(vals))
    assert result.task.strict == 0.0 and result.aggregate.rating == "F"
    assert result.task.partial == pytest.approx(np.mean(expected))
    assert 0.5 < result.task.partial < 0.9
    assert [c.present for c in result.cases] == [True, True, True, False]


def test_organ_lesion_aggregate_counts_lesion_on_positive_cases_only(amb_registry, tmp_path):
    _, task = amb_registry.task("segmentation/demo")
    io.write_case_facts(tmp_path, {"a": {"lesion_present": True}, "b": {"lesion_present": False},
                                   "c": {"lesion_present": True}})
    scores = [CaseScore("a", {"organ_dice": 0.9, "lesion_dice": 0.6, "lesion_positive": True}),
              CaseScore("b", {"organ_dice": 0.8, "lesion_dice": 0.0, "lesion_positive": False}),
              CaseScore("c", {"organ_dice": 0.7, "lesion_dice": 0.4, "lesion_positive": True})]
    block = metric.aggregate(task, scores, ["a", "b", "c"], tmp_path)
    assert block.components["lesion_dice"] == pytest.approx(0.5)  # case b's lesion (a false positive) not counted
    assert block.strict == pytest.approx(0.5 * 0.8 + 0.5 * 0.5) == block.partial
    missing = metric.aggregate(task, [scores[0], scores[1], None], ["a", "b", "c"], tmp_path)
    assert missing.strict == 0.0
    assert missing.components["lesion_dice"] == pytest.approx(0.3)  # missing positive case c counts 0
    assert missing.partial == pytest.approx(0.5 * (1.7 / 3) + 0.5 * 0.3)
