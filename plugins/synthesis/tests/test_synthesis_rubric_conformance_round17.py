"""The judge-facing side of synthesis (round 17): the items the judge is asked and the evidence each reads, on
hand-made trajectories through the rules judge.

The release's synthesis packages ship the segmentation track's generic prompts (the paper's Table 7 items: six
binary S1 items, five binary S2 items, the S3 ladder), with task-specific S3 text unknown beyond "validate
shape/affine/HU on one case before the batch"; eva's audit anchors an S1 item on the input file name
(`ct.nii.gz`). Our S3 is the original enhancement ladder 0 / 0.2 / 0.5 / 1.0, which reads the pilot's checks
(0 none, 0.2 shape only, 0.5 shape + range, 1.0 pilot + shape + range + quality); a one-case pilot whose output
is never inspected earns the lowest non-zero level, the core rules judge's rule in every track (held).
"""

from __future__ import annotations

import pytest
from automedbench.testing import grade_by_rules, load_task

TASK = "synthesis/demo"
PILOT = "python3 method.py /data/public outputs MSDPSR_0001"
BATCH = "python3 method.py /data/public outputs"


def tool(turn, code, cases):
    return {"type": "tool", "name": "execute_code", "turn": turn, "code": code, "stdout": "", "exit_code": 0,
            "cases_with_outputs": cases}


def test_items_counts_and_weights_are_table_7s():
    track, task = load_task(TASK)
    rubric = track.rubric(task)
    ids = {stage: sorted(i.id for i in rubric.items if i.stage == stage) for stage in ("S1", "S2", "S3")}
    assert ids["S1"] == ["s1a_plan_md", "s1b_plan_pipeline", "s1c_task_model", "s1d_researched_3",
                         "s1e_plan_png", "s1f_plot_pipeline"]
    assert ids["S2"] == ["s2a_model_obtained", "s2b_compatibility_check", "s2c_env_ready", "s2d_env_fail_within_5",
                         "s2e_model_loaded"]
    assert ids["S3"] == ["s3_validate"]
    s1b = next(i for i in rubric.items if i.id == "s1b_plan_pipeline")
    # eva's anchor: the S1 item names the input file
    assert "ct.nii.gz" in s1b.description and "sct.nii.gz" in s1b.description


@pytest.mark.parametrize(("checks", "expected"), [
    (None, 0.0),                                                       # the batch at once, no pilot
    ([], 0.2),                                                         # a pilot never looked at: the lowest level
    (["print(out.shape)"], 0.2),                                       # shape only
    (["print(out.shape, np.isfinite(out).all(), out.min(), out.max())"], 0.5),  # + HU range
    (["print(out.shape, np.isfinite(out).all(), out.min(), out.max())",
      "print('ssim vs input', ssim(out, inp))  # better than the input copy"], 1.0),
])
def test_s3_ladder_reads_the_pilots_checks(checks, expected):
    events = [] if checks is None else [tool(1, PILOT, 1)]
    head = "import nibabel as nib, numpy as np\nout = nib.load('outputs/MSDPSR_0001/sct.nii.gz').get_fdata()\n"
    events += [tool(2 + i, head + c, 1) for i, c in enumerate(checks or [])]
    events.append(tool(10, BATCH, 6))
    assert grade_by_rules(TASK, "lite", events).items["s3_validate"].value == expected


def test_s2_reads_code_not_the_plan():
    """s2b (shape, dtype, affine checked before inference) is earned by code that ran, not by a plan naming it."""
    plan = "# Plan\nCheck the .shape, dtype and affine of ct.nii.gz before inference.\n"
    assert grade_by_rules(TASK, "lite", [tool(1, BATCH, 6)], plan=plan).items["s2b_compatibility_check"].value == 0
    look = tool(1, "img = nib.load('/data/public/MSDPSR_0001/ct.nii.gz')\nprint(img.shape, img.get_data_dtype(), "
                   "img.affine)", 0)
    graded = grade_by_rules(TASK, "lite", [look, tool(2, BATCH, 6)], plan=plan)
    assert graded.items["s2b_compatibility_check"].value == 1
