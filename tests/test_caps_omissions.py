"""Rating caps cannot be switched off by doing less (issue 35, class 6), through the real evaluator.

A cap decided from a sample reads every expected case: a missing or invalid one stands for the blind answer
(VQA: its group's commonest answer; report generation: the template) or counts against the submission
(segmentation's present-label Dice: 0), so leaving out the cases that expose a gaming pattern never lifts the
cap. (VQA's chance check, where five blanks turned C into A, is tested in plugins/vqa/tests/test_vqa_chance.py.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from automedbench.engine import EvaluateOptions, evaluate_folder
from automedbench.testing import warm_evaluator_installed


def _keep(source: Path, dest: Path, cases: list[str]) -> Path:
    for case in cases:
        shutil.copytree(source / case, dest / case)
    return dest


def test_segmentation_present_label_dice_counts_a_left_out_case_as_0(reg, data_root, tmp_path):
    """One perfect case, the rest left out. Before: present_dice was the mean over the scored cases only (1.0),
    so the cap that holds a label map whose Task comes from absent labels never fired. Now a missing case is
    Dice 0 on every label, and the cap names the low present-label Dice."""
    task_id = "segmentation/demo-multilabel"
    track, task = reg.task(task_id)
    full = evaluate_folder(reg, EvaluateOptions(task=task_id, baseline="perfect", data_root=data_root,
                                                work=tmp_path / "full"))
    assert full.task.components["present_dice"] == 1.0
    cases = [c.case_id for c in full.cases]
    kept = _keep(tmp_path / "full" / "baseline", tmp_path / "one", cases[:1])
    one = evaluate_folder(reg, EvaluateOptions(task=task_id, submission=kept, data_root=data_root,
                                               work=tmp_path / "eval-one"))
    metric = one.task
    assert metric.components["present_dice"] <= 1.0 / len(cases) + 1e-9, metric.components
    assert track.rating_cap(task, metric) is not None
    assert one.aggregate.rating == "F"  # and every case must be present for a segmentation rating anyway


@pytest.mark.slow  # report generation's scorers (METEOR's JVM), twice
def test_report_template_share_counts_a_left_out_study_as_the_template(reg, data_root, tmp_path):
    """The majority template copied to every study is held at C; copied to half and the rest left out, the
    missing half counts as the template too (and the references' own share is over every study), so the
    template share cannot fall under the cap's line by omission."""
    task_id = "report_gen/demo"
    track, task = reg.task(task_id)
    # both on the process's warm evaluator where installed (its verdicts are the cold path's,
    # tests/test_warm_evaluator.py): one METEOR JVM, shared with report_gen's tests in this worker
    # (tests/file_order.py's GROUPS), instead of a cold evaluator and a JVM per evaluation
    backend = "warm" if warm_evaluator_installed() else "process"
    full = evaluate_folder(reg, EvaluateOptions(task=task_id, baseline="majority-template", data_root=data_root,
                                                work=tmp_path / "full", backend=backend))
    assert track.rating_cap(task, full.task) is not None
    cases = [c.case_id for c in full.cases]
    kept = _keep(tmp_path / "full" / "baseline", tmp_path / "half", cases[: len(cases) // 2])
    half = evaluate_folder(reg, EvaluateOptions(task=task_id, submission=kept, data_root=data_root,
                                                work=tmp_path / "eval-half", backend=backend))
    comps = half.task.components
    assert comps["template_share"] >= full.task.components["template_share"], comps
    assert comps["reference_template_share"] == full.task.components["reference_template_share"]
    assert track.rating_cap(task, half.task) is not None
