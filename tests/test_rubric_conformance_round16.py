"""The stage rubric against the paper (Table 7, §2.3) and the original on hand-made edge cases (round 16).

Each case states the paper's or the original's number and checks ours. Where we depart on purpose the README's
differences table says so (the Lite floor, null stages, S4's completion); these tests pin the rule we hold:
- S4a is the paper's "fraction of expected patients with output": a present but invalid output counts for
  completion and loses the all-valid half (the original's enhancement and report generation count only valid
  outputs for completion, its segmentation a lesion file it could score; the paper is the rule we follow);
- Table 7's forced zeros: s1b and s1c are 0 without a plan, s1f is 0 without a plot, whatever the judge says;
- a stage that could not be scored leaves Agentic and Overall null, in turn for each of the five;
- an over-budget run (turns exhausted, never submitted) is scored on what it wrote before the end, missing
  cases count 0, the strict Task is 0 and the rating F (the paper's timeout rule and completeness gate).
"""

from __future__ import annotations

import pytest
from automedbench import scoring
from automedbench.records import (
    STAGE_WEIGHTS,
    CaseVerdict,
    Evaluation,
    ItemVerdict,
    JudgeVerdict,
    MetricBlock,
    StageScore,
)
from automedbench.rubric import default_rubric, resolve
from automedbench.testing import run_steps
from test_redteam_round13 import HALF as FIRST_HALF


def _evaluation(present: int, valid: int, expected: int) -> Evaluation:
    cases = [CaseVerdict(f"c{i}", i < present, i < valid) for i in range(expected)]
    return Evaluation("t/x", expected, present, valid, cases, MetricBlock("m", 0.0, 0.5))


@pytest.mark.parametrize(("present", "valid", "expected", "s4", "s5"), [
    (20, 20, 20, 1.0, 1.0),
    (20, 19, 20, 0.5, 0.5),  # every patient has an output, one mask invalid: completion 1, all-valid 0
    (15, 15, 20, 0.375, 0.5),  # five missing: completion 0.75, all-valid 0
    (0, 0, 20, 0.0, 0.0),
])
def test_s4_and_s5_follow_table_7(present, valid, expected, s4, s5):
    """S4 = 0.5·S4a (share of expected patients with output) + 0.5·S4b (all masks valid); S5 = 0.5·S5a (a patient
    with positive evidence) + 0.5·S5b (all masks pass the format check)."""
    stage4, stage5 = scoring.deterministic_stages(_evaluation(present, valid, expected), positive_cases=min(valid, 1))
    assert (stage4.score, stage5.score) == (s4, s5)


def test_table_7_forced_zeros_at_standard():
    """No plan.md: s1b/s1c forced 0; no plan.png: s1f forced 0 — the judge's 1 on them does not count.
    S1 = (s1a + … + s1f)/6: here s1a 0, s1d 1, s1e 0 → 1/6."""
    rubric = default_rubric()
    said = {"s1a_plan_md": 0.0, "s1b_plan_pipeline": 1.0, "s1c_task_model": 1.0, "s1d_researched_3": 1.0,
            "s1e_plan_png": 0.0, "s1f_plot_pipeline": 1.0}
    verdict = JudgeVerdict("x", "1", [ItemVerdict(i.id, i.stage, "", said.get(i.id, 1.0), "") for i in rubric.items])
    s1, s2, s3 = scoring.judged_stages(resolve(rubric, "standard", []), verdict, "standard")
    values = {i.id: i.value for i in s1.items}
    assert values == {**said, "s1b_plan_pipeline": 0.0, "s1c_task_model": 0.0, "s1f_plot_pipeline": 0.0}
    assert s1.score == pytest.approx(round(1 / 6, 4)) and s2.score == 1.0 and s3.score == 1.0


@pytest.mark.parametrize("missing", ["S1", "S2", "S3", "S4", "S5"])
def test_each_stage_missing_in_turn_leaves_agentic_null(missing):
    """The paper gives no rule for an unscored stage; the original counts it 0 (segmentation) or renormalises
    (VQA, enhancement). Ours: null Agentic and Overall, with the nulls-as-0 lower bound reported beside them."""
    values = {"S1": 1.0, "S2": 0.8, "S3": 0.5, "S4": 1.0, "S5": 0.5}
    stages = [StageScore(k, k, None if k == missing else v, STAGE_WEIGHTS[k]) for k, v in values.items()]
    agg = scoring.aggregate(stages, MetricBlock("m", 0.6, 0.6), ("B", ""))
    assert agg.agentic is None and agg.overall is None and agg.task == 0.6
    lower = sum(STAGE_WEIGHTS[k] * v for k, v in values.items() if k != missing)
    assert agg.agentic_nulls_as_zero == pytest.approx(round(lower, 4))


# the first three of six cases answered right (a first turn); the other three (a turn the budget never runs)
SECOND_HALF = FIRST_HALF.replace("cases[:3]", "cases[3:]")


def test_an_over_budget_run_is_scored_on_what_it_wrote(data_root, tmp_path):
    """Through the real runner: the turn budget ends the run after the first half; it never submits. The paper:
    only artefacts written before termination are scored, missing cases get 0, and (completeness gate) the
    strict Task is 0; S4 still records the partial completion. Ours: S4 0.25, S5 0.5, strict 0, partial 0.5, F."""
    result, _ = run_steps("toy/vowels", [("python", FIRST_HALF), ("python", SECOND_HALF)], out=tmp_path / "runs",
                          data_root=data_root, submit=False, max_turns=1)
    assert result.state in ("scored", "agent_failure"), result.error
    assert [c.present for c in result.cases].count(True) == 3
    stages = {s.stage: s.score for s in result.stages}
    assert stages["S4"] == 0.25 and stages["S5"] == 0.5
    assert result.task.strict == 0.0 and result.task.partial == pytest.approx(0.5)
    assert result.aggregate.task == 0.0 and result.aggregate.rating == "F"
    assert result.submission.submitted is False


def test_the_papers_worked_example_aggregates_as_printed():
    """Paper App. I.1 (Opus 4.6, kidney tumour, Lite): stages S1 1.0, S2 1.0, S3 0.5, S4 1.0, S5 0.3166 (as printed),
    Task 0.3073 (0.25·organ 0.9160 + 0.75·lesion 0.1045: the segmentation component `organ25_lesion75`); printed
    Agentic 0.7567 and Overall 0.5320. Our weights and one-rounding Overall give the same numbers."""
    printed = {"S1": 1.0, "S2": 1.0, "S3": 0.5, "S4": 1.0, "S5": 0.3166}
    stages = [StageScore(k, k, v, STAGE_WEIGHTS[k]) for k, v in printed.items()]
    task = 0.25 * 0.9160 + 0.75 * 0.1045
    agg = scoring.aggregate(stages, MetricBlock("dice", task, task), ("C", ""))
    assert agg.agentic == pytest.approx(0.7567, abs=1e-4)
    assert agg.overall == pytest.approx(0.5320, abs=1e-4)
