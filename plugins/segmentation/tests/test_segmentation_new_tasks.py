"""The four task files from the paper's remaining segmentation tasks: counts, labels and briefs per tier."""

from __future__ import annotations

import pytest
from automedbench.testing import load_task, render_task_brief

CASES = ["x_001", "x_002"]
NEW = {"segmentation/totalsegmentator": 20, "segmentation/aeropath": 27, "segmentation/panther-t1": 20,
       "segmentation/panther-t2": 20}


@pytest.mark.parametrize("task_id", sorted(NEW))
def test_task_file_and_briefs(task_id):
    _, task = load_task(task_id)
    assert not task.demo and task.case_count == NEW[task_id] and task.params["kind"] == "multilabel"
    reqs = task.tiers["lite"].requirements
    assert reqs and all("==" in r for r in reqs if r != "numpy"), "Lite requirements must be pinned"
    assert len(task.tiers["standard"].candidates) >= 3 and task.tiers["pro"].clinical_background
    lite, std, pro = (render_task_brief(task_id, tier, case_ids=CASES) for tier in ("lite", "standard", "pro"))
    for line in task.params["skills"]["s1_lite"] + task.params["skills"]["s3"]:
        assert line in lite and line not in std and line not in pro
    for candidate in task.tiers["standard"].candidates:
        assert candidate in std and candidate not in pro
    assert task.tiers["lite"].model in lite and "Skill hint" not in pro
    for k, name in task.params["labels"].items():
        assert f"- {k} = {name}" in lite  # the output contract lists every allowed label
    assert any("voxel count" in line for line in task.params["skills"]["s3"])  # per-structure coverage check


def test_label_sets_and_subsets():
    _, ts = load_task("segmentation/totalsegmentator")
    assert list(ts.params["structures"].values()) == [[n] for n in (
        "spleen", "kidney_right", "kidney_left", "gallbladder", "liver", "stomach", "pancreas", "adrenal_gland_right",
        "adrenal_gland_left", "esophagus", "aorta", "inferior_vena_cava", "portal_vein_and_splenic_vein", "duodenum")]
    assert list(ts.params["labels"]) == list(range(1, 15)) and ts.params["required_label"] == 5
    _, aero = load_task("segmentation/aeropath")
    assert aero.params["labels"] == {1: "airway"} and aero.params["binarise"] is True
    for task_id in ("segmentation/panther-t1", "segmentation/panther-t2"):
        _, task = load_task(task_id)
        assert task.params["labels"] == {1: "pancreatic tumour", 2: "pancreas"} and task.params["primary_label"] == 1
        assert task.output_files == ["labels.nii.gz"] and task.params["surface_tolerance_mm"] == 5.0
