"""The rubric model tracks declare: stage rules, tier rules, conditional (not-applicable) items, checks."""

from __future__ import annotations

import attrs
import pytest
from automedbench import scoring
from automedbench.judges.rules import RulesJudge
from automedbench.records import ItemVerdict, JudgeVerdict, Result, RubricItem, StageScore
from automedbench.rubric import (
    check,
    default_rubric,
    describe_conditions,
    resolve,
    reword,
    with_items,
    with_ladder,
)
from automedbench.serialize import dumps, loads
from automedbench_models.llm_judge import asked_items

TIERS = ["lite", "standard", "pro"]
RERUN = RubricItem("s3b_rerun_after_failed_pilot", "S2", "after a failed pilot the agent fixed the cause and "
                   "re-ran the pilot before the batch", applies_if="pilot_failed")


def call(turn: int, cases: int, exit_code: int = 0, changed: list[str] | None = None) -> dict:
    return {"type": "tool", "name": "execute_code", "turn": turn, "exit_code": exit_code,
            "cases_with_outputs": cases, "changed_cases": changed or []}


def all_ones(rubric, value: float = 1.0) -> JudgeVerdict:
    return JudgeVerdict("x", "1", [ItemVerdict(i.id, i.stage, "", value, "") for i in rubric.items])


def test_default_rubric_is_sound_and_keeps_todays_rules():
    rubric = default_rubric()
    assert check(rubric, TIERS, ["pilot_failed"]) == []
    assert [(s.stage, s.aggregation) for s in rubric.stages] == [("S1", "mean"), ("S2", "mean"), ("S3", "ladder")]
    assert rubric.stage_rule("S3").text == "ladder 0/0.2/0.5/1.0" and rubric.stage_rule("S1").text == (
        "mean of binary items")
    lite = resolve(rubric, "lite", [])
    assert {k for k, v in lite.states.items() if v == "auto-pass"} == {
        "s1d_researched_3", "s1e_plan_png", "s1f_plot_pipeline"}
    assert all(v == "graded" for v in resolve(rubric, "pro", []).states.values())


def test_not_applicable_item_is_listed_but_left_out_of_the_mean():
    rubric = with_items(default_rubric(), add=[RERUN])
    assert check(rubric, TIERS, ["pilot_failed"]) == []
    assert [i.id for i in rubric.items if i.stage == "S2"][-1] == RERUN.id  # placed after S2's last item
    clean = [call(3, 1, changed=["case_000"]), call(4, 5)]
    resolved = resolve(rubric, "standard", clean)
    assert resolved.states[RERUN.id] == "not-applicable" and RERUN not in resolved.graded
    # the judge grades only what it was given; the missing verdict is not a null
    verdict = all_ones(rubric)
    verdict.items = [v for v in verdict.items if v.id != RERUN.id]
    verdict.items[7].value = 0.0  # s2b fails: S2 = 4/5, not 4/6 and not null
    s2 = scoring.judged_stages(resolved, verdict, "standard")[1]
    assert s2.score == pytest.approx(0.8)
    item = next(i for i in s2.items if i.id == RERUN.id)
    assert item.state == "not-applicable" and item.value is None and "pilot_failed" in item.rationale
    judged = scoring.judged_stages(resolved, verdict, "standard")
    s4_s5 = [StageScore(k, k, 1.0, scoring.STAGE_WEIGHTS[k]) for k in ("S4", "S5")]
    agg = scoring.aggregate(judged + s4_s5, None, ("-", ""))
    assert agg.agentic == pytest.approx((0.25 + 0.15 * 0.8 + 0.35 + 0.25) / 1.0)  # never made null


def test_conditional_item_is_graded_when_its_condition_holds():
    rubric = with_items(default_rubric(), add=[RERUN])
    failed = [call(3, 0, exit_code=1, changed=["case_000"]), call(4, 1, changed=["case_000"]), call(5, 5)]
    resolved = resolve(rubric, "standard", failed)
    assert resolved.states[RERUN.id] == "graded" and RERUN in resolved.graded
    verdict = all_ones(rubric)
    next(v for v in verdict.items if v.id == RERUN.id).value = 0.0
    assert scoring.judged_stages(resolved, verdict, "standard")[1].score == pytest.approx(5 / 6, abs=1e-4)
    # a failure after the batch began is no failed pilot; a failure that touched no case is none either
    assert resolve(rubric, "pro", [call(3, 5), call(4, 1, exit_code=1, changed=["a"])]).states[RERUN.id] == (
        "not-applicable")
    assert resolve(rubric, "pro", [call(3, 0, exit_code=1)]).states[RERUN.id] == "not-applicable"


def test_excluded_at_a_tier_leaves_the_mean_and_never_nulls():
    extra = RubricItem("s1g_report_sections", "S1", "plan names the report sections", tiers={"lite": "excluded"})
    rubric = with_items(default_rubric(), add=[extra])
    lite = resolve(rubric, "lite", [])
    assert lite.states[extra.id] == "excluded" and extra not in lite.graded
    verdict = all_ones(rubric)
    verdict.items = [v for v in verdict.items if v.id != extra.id]
    s1 = scoring.judged_stages(lite, verdict, "lite")[0]
    assert s1.score == 1.0  # 6/6: the excluded item is neither a 0 nor a null in the mean
    verdict.items[0].value = 0.0  # s1a fails: s1b, s1c forced 0, and with no graded S1 item passed the
    s1 = scoring.judged_stages(lite, verdict, "lite")[0]  # three Lite credits do not count (issue 22): 0/6
    assert s1.score == 0.0
    assert next(i for i in s1.items if i.id == extra.id).state == "excluded"
    standard = resolve(rubric, "standard", [])
    assert extra in standard.graded
    assert scoring.judged_stages(standard, JudgeVerdict("x", "1", verdict.items), "standard")[0].score is None


def test_a_track_ladder_snaps_to_its_own_levels():
    rubric = with_ladder(default_rubric(), "S3", [0.0, 0.5, 1.0])
    assert check(rubric, TIERS, []) == []
    assert rubric.stage_rule("S3").text == "ladder 0/0.5/1.0"
    assert rubric.item("s3_validate").levels == [0.0, 0.5, 1.0]
    resolved = resolve(rubric, "pro", [])
    for given, snapped in ((0.2, 0.0), (0.3, 0.5), (0.8, 1.0)):
        verdict = JudgeVerdict("x", "1", [ItemVerdict("s3_validate", "S3", "", given, "")])
        assert scoring.judged_stages(resolved, verdict, "pro")[2].score == snapped


def test_check_names_unsound_declarations():
    base = default_rubric()
    two_ladders = with_items(base, add=[RubricItem("s3b", "S3", "x", kind="ladder", levels=[0.0, 0.2, 0.5, 1.0])])
    assert any("exactly one ladder item" in p for p in check(two_ladders, TIERS, []))
    unknown = with_items(base, add=[attrs.evolve(RERUN, applies_if="moon_full")])
    assert any("unknown condition 'moon_full'" in p for p in check(unknown, TIERS, ["pilot_failed"]))
    ladder_in_mean = with_items(base, add=[RubricItem("s1z", "S1", "x", kind="ladder", levels=[0.0, 1.0])])
    assert any("S1 is a mean of binary items" in p for p in check(ladder_in_mean, TIERS, []))
    only_conditional = with_items(base, add=[attrs.evolve(i, applies_if="pilot_failed") for i in base.items
                                             if i.stage == "S2"], drop=[i.id for i in base.items if i.stage == "S2"])
    assert "S2 has no unconditional item at the lite tier" in check(only_conditional, TIERS, ["pilot_failed"])
    bad_tier = with_items(base, add=[RubricItem("s2z", "S2", "x", tiers={"gold": "excluded"})])
    assert any("tier rule gold=excluded" in p for p in check(bad_tier, TIERS, []))
    with pytest.raises(ValueError, match="unknown items: s9_nothing"):
        reword(base, {"s9_nothing": "x"}, {})


def test_both_judges_grade_exactly_the_resolved_items():
    rubric = with_items(default_rubric(), add=[RERUN])
    resolved = resolve(rubric, "lite", [])
    graded_ids = [i.id for i in resolved.graded]
    assert RERUN.id not in graded_ids and "s1d_researched_3" not in graded_ids

    class Input:
        tier = "lite"
        rubric = resolved.graded

    assert [i.id for i in asked_items(Input())] == graded_ids
    from automedbench.judge import JudgeInput
    from automedbench.plugins import registry

    _, task = registry().task("segmentation/demo")
    verdict = RulesJudge().grade(JudgeInput(task, "lite", resolved.graded, None, None, [], resolved=resolved))
    assert [v.id for v in verdict.items] == graded_ids


def test_rubric_round_trips_in_a_result(run_agent, reg):
    result, run_dir = run_agent("reference")
    track, task = reg.task("segmentation/demo")
    assert result.rubric == describe_conditions(track.rubric(task))
    stored = loads((run_dir / "result.json").read_text(), Result)
    assert stored.rubric == result.rubric and loads(dumps(result), Result).rubric.stages[2].levels == [
        0.0, 0.5, 1.0]  # segmentation declares the paper's S3 ladder
    states = {i.id: i.state for s in result.stages for i in s.items}
    assert states["s1d_researched_3"] == "auto-pass" and states["s2a_model_obtained"] == "graded"
