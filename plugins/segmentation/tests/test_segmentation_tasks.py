"""The real task files: fields the SPEC and the upstream facts fix, and briefs at every tier."""

from __future__ import annotations

import pytest
from automedbench.testing import render_task_brief

REAL = ["segmentation/kidney", "segmentation/liver", "segmentation/pancreas", "segmentation/pancreas-oar",
        "segmentation/feta"]
CASES = ["x_001", "x_002"]


@pytest.mark.parametrize("task_id", REAL)
def test_real_task_contract(amb_registry, task_id):
    track, task = amb_registry.task(task_id)
    assert not task.demo and task.time_limit_s == 3600 and task.case_count == 20
    assert task.rating.good == 0.70 and task.rating.okay == 0.30
    assert set(task.tiers) == {"lite", "standard", "pro"}
    reqs = task.tiers["lite"].requirements
    assert reqs and all("==" in r for r in reqs), "Lite requirements must be pinned"
    assert len(task.tiers["standard"].candidates) >= 3 and task.tiers["pro"].clinical_background
    lite, std, pro = (render_task_brief(task_id, tier, case_ids=CASES) for tier in ("lite", "standard", "pro"))
    for line in task.params["skills"]["s1_lite"]:
        assert line in lite and line not in std
    for line in task.params["skills"]["s3"]:
        assert line in lite and line not in std
    assert "Skill hint — S1" in std and "Skill hint — S3" not in std and "Skill hint" not in pro
    assert task.tiers["lite"].model in lite and task.tiers["pro"].clinical_background.split(".")[0] in pro
    with pytest.raises(Exception, match="covers the phantom demos only"):
        track.reference_solution(task, "lite", "/data/public", "/workspace")


def test_feta_labels_and_organ_lesion_outputs(amb_registry):
    _, feta = amb_registry.task("segmentation/feta")
    names = {int(k): v for k, v in feta.params["labels"].items()}
    assert names == {1: "external cerebrospinal fluid", 2: "grey matter", 3: "white matter",
                     4: "lateral ventricles", 5: "cerebellum", 6: "deep grey matter", 7: "brainstem"}
    assert feta.input_files == ["t2w.nii.gz"] and feta.output_files == ["dseg.nii.gz"]
    for task_id in ("segmentation/kidney", "segmentation/liver", "segmentation/pancreas"):
        _, task = amb_registry.task(task_id)
        assert task.output_files == ["organ.nii.gz", "lesion.nii.gz"] and task.params["kind"] == "organ_lesion"
    _, oar = amb_registry.task("segmentation/pancreas-oar")
    assert set(oar.params["structures"]) == set(oar.params["labels"])
