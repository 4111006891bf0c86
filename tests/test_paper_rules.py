"""Scoring rules brought to the paper (issue 12): S1a, the S3 ladder per track, S5 positive evidence,
tier fidelity of the briefs, strict task files, NaN references and summary plots."""

from __future__ import annotations

import os

import numpy as np
import pytest
import yaml
from automedbench.brief import python_repr, render_brief
from automedbench.errors import UserError
from automedbench.judge import JudgeInput
from automedbench.judges.rules import RulesJudge, ladder_values
from automedbench.plan_artefacts import MAX_PLOTS, collect
from automedbench.rubric import default_rubric, with_ladder
from automedbench.taskfile import parse_task
from automedbench_segmentation import dice

ARGS = {"data_dir": "/data/public", "workspace_dir": "/workspace", "case_ids": ["case_000", "case_001"]}
SEG_DEMO = "plugins/segmentation/automedbench_segmentation/tasks/demo.yaml"


def tool(turn: int, cases: int, code: str, exit_code: int = 0) -> dict:
    return {"type": "tool", "name": "execute_code", "turn": turn, "exit_code": exit_code,
            "cases_with_outputs": cases, "code": code, "stdout": ""}


def s3_value(reg, task_id: str, events: list[dict]) -> float:
    track, task = reg.task(task_id)
    item = track.rubric(task).item("s3_validate")
    verdict = RulesJudge().grade(JudgeInput(task, "pro", [item], None, None, events))
    return verdict.items[0].value


UNCHECKED_PILOT = [tool(3, 1, "python3 segment.py case_000"), tool(4, 5, "python3 segment.py")]
CHECKED_PILOT = [tool(3, 1, "python3 segment.py case_000"),
                 tool(4, 1, "a = nib.load('outputs/case_000/organ.nii.gz'); print(a.shape, np.unique(a))"),
                 tool(5, 5, "python3 segment.py")]


def test_segmentation_s3_is_the_papers_three_levels(reg):
    rubric = reg.task("segmentation/demo")[0].rubric(reg.task("segmentation/demo")[1])
    assert rubric.stage_rule("S3").levels == [0.0, 0.5, 1.0]
    # a pilot run with no output check is "some but incomplete validation": 0.5 (was 0.2)
    assert s3_value(reg, "segmentation/demo", UNCHECKED_PILOT) == 0.5
    # shape and values checked on the pilot, then the batch: full credit, no plausibility check needed
    assert s3_value(reg, "segmentation/demo", CHECKED_PILOT) == 1.0
    assert s3_value(reg, "segmentation/demo", [tool(3, 5, "python3 segment.py")]) == 0.0  # batch first
    # multi-label also asks for per-label coverage
    assert s3_value(reg, "segmentation/demo-multilabel", CHECKED_PILOT) == 0.5
    # (the call loads the label map it counts: one naming the outputs only in printed text checks nothing)
    covered = [*CHECKED_PILOT[:2], tool(4, 1, "a = nib.load('outputs/case_000/labels.nii.gz').get_fdata(); "
                                              "print({k: np.count_nonzero(a == k) for k in (1, 2)})"),
               CHECKED_PILOT[2]]
    assert s3_value(reg, "segmentation/demo-multilabel", covered) == 1.0


def test_vqa_keeps_the_four_level_ladder(reg):
    rubric = reg.task("vqa/demo")[0].rubric(reg.task("vqa/demo")[1])
    assert rubric.stage_rule("S3").text == "ladder 0/0.2/0.5/1.0"
    assert s3_value(reg, "vqa/demo", UNCHECKED_PILOT) == 0.2


def test_ladder_values_follow_the_declared_levels():
    item = default_rubric().item("s3_validate")
    assert ladder_values(item) == {"full": 1.0, "partial": 0.5, "unchecked": 0.2, "none": 0.0}
    paper_item = with_ladder(default_rubric(), "S3", [0.0, 0.5, 1.0]).item("s3_validate")
    assert ladder_values(paper_item) == {"full": 1.0, "partial": 0.5, "unchecked": 0.5, "none": 0.0}
    override = with_ladder(default_rubric(), "S3", [0.0, 0.5, 1.0], hints={"ladder": {"unchecked": 0.0}})
    assert ladder_values(override.item("s3_validate"))["unchecked"] == 0.0


def test_s1a_is_plan_md_exists(reg):
    _, task = reg.task("segmentation/demo")
    item = default_rubric().item("s1a_plan_md")
    short = ("# Plan\n1. load CT\n2. smooth + threshold kidneys\n3. tumour inside kidney\n4. save masks\n"
             "5. validate one case, then the batch\n")
    assert 100 < len(short) < 200  # a complete plan below the old 200-character minimum
    grade = RulesJudge().grade
    assert grade(JudgeInput(task, "lite", [item], short, None, [])).items[0].value == 1.0
    assert grade(JudgeInput(task, "lite", [item], "  \n", None, [])).items[0].value == 0.0
    assert grade(JudgeInput(task, "lite", [item], None, None, [])).items[0].value == 0.0


def test_s2d_and_s2e_wording_follow_the_paper():
    rubric = default_rubric()
    assert rubric.item("s2d_env_fail_within_5").description.endswith("or none occurred")
    assert "the GPU where one is present" in rubric.item("s2e_model_loaded").description


def test_segmentation_positive_evidence(reg):
    track, task = reg.task("segmentation/demo")
    positive_case = track.positive_case
    _, ml = reg.task("segmentation/demo-multilabel")
    # an empty mask against an empty (tumour-free) reference scores Dice 1.0 but is no evidence
    empty = {"organ_dice": 0.0, "organ_positive": True, "lesion_dice": 1.0, "lesion_positive": False}
    assert not positive_case(task, empty)
    assert positive_case(task, {**empty, "organ_dice": 0.4})
    assert positive_case(task, {**empty, "lesion_dice": 0.2, "lesion_positive": True})
    assert not positive_case(ml, {"dice_1": 1.0, "dice_2": 0.0, "reference_labels": [2]})
    assert positive_case(ml, {"dice_1": 1.0, "dice_2": 0.3, "reference_labels": [2]})


def test_vqa_positive_evidence_is_a_correct_answer(reg):
    track, task = reg.task("vqa/demo")
    assert track.positive_case(task, {"score": 1.0}) and not track.positive_case(task, {"score": 0.5})
    assert not track.positive_case(task, {})


def test_nan_in_a_reference_makes_dice_zero():
    pred = np.zeros((4, 4, 4), np.uint8)
    ref = np.zeros((4, 4, 4), np.float32)
    ref[0, 0, 0] = np.nan
    # label 1 is absent from both but for the NaN: without the rule it would read as 1.0
    assert dice.dice(pred, ref, [1, 2]) == {1: 0.0, 2: 0.0}
    assert dice.binary_dice(pred, ref) == 0.0
    assert dice.dice(pred, np.zeros((4, 4, 4), np.float32), [1]) == {1: 1.0}


def test_lite_briefs_ask_for_no_unscored_comparison(reg):
    for task_id in ("segmentation/demo", "segmentation/kidney", "vqa/demo", "vqa/slake"):
        track, task = reg.task(task_id)
        lite = render_brief(task, "lite", track.template_dir(), **ARGS)
        standard = render_brief(task, "standard", track.template_dir(), **ARGS)
        assert "three" not in lite and "research candidate" not in lite, task_id
        assert "at least three" in standard, task_id


def test_every_lite_tier_pins_its_requirements(reg):
    tasks = [task for _, task in reg.tasks().values() if task.track != "toy"]  # the test-only track needs none
    assert len(tasks) >= 13
    for task in tasks:
        reqs = task.tiers["lite"].requirements
        assert reqs and all("==" in r for r in reqs), (task.id, reqs)
    _, slake = reg.task("vqa/slake")
    assert "transformers==5.24.0" in slake.tiers["lite"].requirements


def test_task_files_are_strict_about_text():
    with open(SEG_DEMO) as handle:
        data = yaml.safe_load(handle)
    assert all(isinstance(c, str) for c in data["tiers"]["standard"]["candidates"])
    data["tiers"]["standard"]["candidates"].append({"TotalSegmentator (organs only": "needs a tumour model"})
    with pytest.raises(UserError, match=r"candidates\[4\].*quote"):
        parse_task(data, "demo.yaml")


def test_python_reprs_in_a_brief_are_found():
    assert python_repr("- {'TotalSegmentator (organs only': 'needs a tumour model beside it)'}\n")
    assert python_repr("requirements ['numpy', 'scipy']")
    assert not python_repr("Use the model's output: 'labels' and 'coverage'.")


@pytest.mark.slow  # validate-task evaluates every baseline
def test_validate_task_renders_every_tier_clean(reg, tmp_path):
    from automedbench.testing import check_track

    ok, report = check_track("segmentation/demo", tmp_path)
    assert ok, report
    for tier in ("lite", "standard", "pro"):
        assert f"brief at {tier} holds no Python repr" in report
    assert "rubric declaration is sound" in report


def test_summary_plots_are_collected_safely(tmp_path):
    plan = tmp_path / "plan"
    plan.mkdir()
    (plan / "plan.md").write_text("# plan\n")
    (plan / "plan.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (plan / "dice_per_case.png").write_bytes(b"png")
    (plan / "notes.txt").write_text("not a plot")
    outside = tmp_path / "secret.png"
    outside.write_bytes(b"host file")
    (plan / "linked.png").symlink_to(outside)
    os.mkfifo(plan / "fifo.png")
    for k in range(MAX_PLOTS + 5):
        (plan / f"z{k:02d}.png").write_bytes(b"p")
    dest = tmp_path / "artefacts"
    plots = collect(plan, dest)
    assert plots[0] == "dice_per_case.png" and len(plots) == MAX_PLOTS
    assert "linked.png" not in plots and "fifo.png" not in plots and "notes.txt" not in plots
    assert (dest / "plan.md").read_text() == "# plan\n" and (dest / "plots" / "dice_per_case.png").exists()
    # a symlinked plan folder is not followed
    other = tmp_path / "ws2"
    other.mkdir()
    (other / "plan").symlink_to(plan)
    assert collect(other / "plan", tmp_path / "artefacts2") == []
    assert not (tmp_path / "artefacts2" / "plan.md").exists()


@pytest.mark.slow  # whole demo runs at two tiers
def test_pro_runs_report_summary_plots_and_lite_runs_do_not(run_agent):
    pro, _ = run_agent("reference", "pro")
    lite, _ = run_agent("reference")
    assert pro.summary_plots == [] and lite.summary_plots is None
    from io import StringIO

    from automedbench.report import render
    from rich.console import Console

    buffer = StringIO()
    render(pro, Console(file=buffer, width=200))
    assert "summary plots (Pro, not scored): absent" in buffer.getvalue()


@pytest.mark.slow  # a whole demo run
def test_an_all_empty_submission_earns_no_positive_evidence(reg, tmp_path):
    from automedbench.testing import evaluate_outputs

    empty = evaluate_outputs("segmentation/demo", baseline="empty", data_root=tmp_path / "data",
                             work=tmp_path / "empty", registry=reg)
    s5 = {i.id: i.value for i in empty.stage("S5").items}
    assert s5 == {"s5_positive_evidence": 0.0, "s5_all_valid": 1.0} and empty.stage("S5").score == 0.5
    perfect = evaluate_outputs("segmentation/demo", baseline="perfect", data_root=tmp_path / "data",
                               work=tmp_path / "perfect", registry=reg)
    assert perfect.stage("S5").score == 1.0
