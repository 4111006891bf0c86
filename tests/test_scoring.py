"""Aggregation rules, checked against hand-computed numbers."""

from __future__ import annotations

import pytest
from automedbench import scoring
from automedbench.records import (
    CaseVerdict,
    Evaluation,
    ItemVerdict,
    JudgeVerdict,
    MetricBlock,
    RatingThresholds,
    StageScore,
)
from automedbench.rubric import default_rubric, resolve


def evaluation(present: int, valid: int, expected: int = 4, strict: float = 0.8) -> Evaluation:
    cases = [CaseVerdict(f"c{i}", i < present, i < valid) for i in range(expected)]
    metric = MetricBlock("m", strict if valid == expected == present else 0.0, strict * valid / expected)
    return Evaluation("t/x", expected, present, valid, cases, metric)


def stages(values: dict[str, float | None]) -> list[StageScore]:
    return [StageScore(k, k, v, scoring.STAGE_WEIGHTS[k]) for k, v in values.items()]


def test_agentic_and_overall_hand_computed():
    st = stages({"S1": 0.5, "S2": 1.0, "S3": 0.2, "S4": 0.75, "S5": 0.5})
    metric = MetricBlock("m", 0.6, 0.6)
    agg = scoring.aggregate(st, metric, ("B", ""))
    expected = 0.25 * 0.5 + 0.15 * 1.0 + 0.35 * 0.2 + 0.15 * 0.75 + 0.10 * 0.5
    assert agg.agentic == pytest.approx(round(expected, 4))
    assert agg.overall == pytest.approx(round(0.5 * round(expected, 4) + 0.3, 4))


def test_null_stage_makes_agentic_null_not_zero():
    st = stages({"S1": None, "S2": None, "S3": None, "S4": 1.0, "S5": 1.0})
    agg = scoring.aggregate(st, MetricBlock("m", 1.0, 1.0), ("A", ""))
    assert agg.agentic is None and agg.overall is None and agg.task == 1.0
    assert agg.agentic_nulls_as_zero == pytest.approx(0.25)


def test_s4_s5_rules():
    s4, s5 = scoring.deterministic_stages(evaluation(4, 4), positive_cases=4)
    assert (s4.score, s5.score) == (1.0, 1.0)
    s4, s5 = scoring.deterministic_stages(evaluation(2, 2), positive_cases=1)
    assert (s4.score, s5.score) == (0.25, 0.5)
    s4, s5 = scoring.deterministic_stages(evaluation(4, 0), positive_cases=0)
    assert (s4.score, s5.score) == (0.5, 0.0)
    # every output valid but no case with positive metric evidence (e.g. all-empty masks): half of S5
    s4, s5 = scoring.deterministic_stages(evaluation(4, 4), positive_cases=0)
    assert (s4.score, s5.score) == (1.0, 0.5)
    # no submit_results call: recorded in the rationale, S5 unchanged (the paper has no submit factor)
    s4, s5 = scoring.deterministic_stages(evaluation(4, 4), positive_cases=4, submitted=False)
    assert (s4.score, s5.score) == (1.0, 1.0) and "never called" in s5.items[1].rationale
    assert [i.id for i in s5.items] == ["s5_positive_evidence", "s5_all_valid"]


def test_rating_uses_the_unrounded_task_and_display_truncates():
    th = RatingThresholds(0.4, 0.25)
    ev = evaluation(4, 4, strict=0.39995)
    letter, reason = scoring.rate(ev, ev.metric, th, False)
    assert letter == "B" and "0.399" in reason and "0.400" not in reason
    assert scoring.truncate(0.39995) == "0.399" and scoring.truncate(0.57) == "0.570"
    assert scoring.truncate(1.0) == "1.000" and scoring.truncate(0.0) == "0.000"
    from automedbench.report import fmt

    assert fmt(0.9999) == "0.999" and fmt(None) == "null"


def test_overall_is_rounded_once_from_unrounded_parts():
    # Agentic 0.10006 and Task 0.10002: rounded first they give 0.1001 and 0.1, whose mean rounds to 0.1001;
    # rounded once, at the end, Overall is round(0.10004, 4) = 0.1
    st = stages({k: 0.10006 for k in ("S1", "S2", "S3", "S4", "S5")})
    agg = scoring.aggregate(st, MetricBlock("m", 0.10002, 0.10002), ("C", ""))
    assert agg.overall == 0.1 and (agg.agentic, agg.task) == (0.1001, 0.1)


def test_rating_letters():
    th = RatingThresholds(0.7, 0.3)
    assert scoring.rate(evaluation(4, 4, strict=0.71), evaluation(4, 4, strict=0.71).metric, th, False)[0] == "A"
    assert scoring.rate(evaluation(4, 4, strict=0.5), evaluation(4, 4, strict=0.5).metric, th, False)[0] == "B"
    assert scoring.rate(evaluation(4, 4, strict=0.1), evaluation(4, 4, strict=0.1).metric, th, False)[0] == "C"
    assert scoring.rate(evaluation(3, 3), evaluation(3, 3).metric, th, False)[0] == "F"
    assert scoring.rate(evaluation(4, 3), evaluation(4, 3).metric, th, False)[0] == "F"
    assert scoring.rate(evaluation(4, 4), evaluation(4, 4).metric, th, True) == ("F", "isolation breach")


def test_lite_auto_pass_and_requires():
    rubric = default_rubric()
    verdict = JudgeVerdict("x", "1", [ItemVerdict(i.id, i.stage, "", 1.0, "") for i in rubric.items])
    verdict.items[0].value = 0.0  # s1a fails -> s1b and s1c forced 0
    s1 = scoring.judged_stages(resolve(rubric, "lite", []), verdict, "lite")[0]
    values = {i.id: i.value for i in s1.items}
    assert values["s1a_plan_md"] == 0 and values["s1b_plan_pipeline"] == 0 and values["s1c_task_model"] == 0
    # one rule in every track: Lite's credited items count only once a graded S1 item passed (no plan, no credit)
    assert values["s1d_researched_3"] == values["s1e_plan_png"] == values["s1f_plot_pipeline"] == 0.0
    assert s1.score == 0.0
    verdict.items[0].value = 1.0  # a plan: the credited items count again
    s1 = scoring.judged_stages(resolve(rubric, "lite", []), verdict, "lite")[0]
    values = {i.id: i.value for i in s1.items}
    assert values["s1d_researched_3"] == values["s1e_plan_png"] == values["s1f_plot_pipeline"] == 1.0
    assert s1.score == 1.0
    s1_std = scoring.judged_stages(resolve(rubric, "standard", []), verdict, "standard")[0]
    assert not any(i.auto for i in s1_std.items)


def test_s3_snaps_to_ladder():
    rubric = default_rubric()
    verdict = JudgeVerdict("x", "1", [ItemVerdict("s3_validate", "S3", "", 0.4, "")])
    s3 = scoring.judged_stages(resolve(rubric, "pro", []), verdict, "pro")[2]
    assert s3.score == 0.5


def test_judge_error_leaves_stages_null():
    resolved = resolve(default_rubric(), "standard", [])
    s1, s2, s3 = scoring.judged_stages(resolved, JudgeVerdict("x", "1", [], error="down"), "standard")
    assert s1.score is None and s2.score is None and s3.score is None
    assert all("down" in i.rationale for i in s2.items)


def test_breach_zeroes_stages_and_task():
    st, metric = scoring.zero_for_breach(stages({"S1": 1.0, "S4": 1.0}), MetricBlock("m", 0.9, 0.9))
    assert all(s.score == 0.0 for s in st) and metric.strict == metric.partial == 0.0


def test_min_valid_share_and_partial_task_for_rating():
    th = RatingThresholds(0.4, 0.25, min_valid=0.5)
    half = evaluation(2, 2, strict=0.8)  # 2 of 4 present and valid: partial 0.4
    half.metric.used = "partial"
    assert scoring.rate(half, half.metric, th, False)[0] == "A"  # partial 0.4 >= good
    below = evaluation(1, 1, strict=0.8)
    below.metric.used = "partial"
    assert scoring.rate(below, below.metric, th, False) == ("F", "incomplete: 3 of 4 case(s) missing")
    invalid = evaluation(4, 1, strict=0.8)
    invalid.metric.used = "partial"
    assert scoring.rate(invalid, invalid.metric, th, False)[0] == "F"
    none_valid = evaluation(4, 0)
    assert scoring.rate(none_valid, none_valid.metric, RatingThresholds(0.4, 0.25, min_valid=0.0), False)[0] == "F"


def test_rating_floor_below_c_is_f():
    """Baseline-anchored bands (enhancement): A >= good, B >= okay, C >= floor, below the floor F."""
    th = RatingThresholds(0.9, 0.8, 1.0, 0.7)
    for value, letter in ((0.95, "A"), (0.85, "B"), (0.75, "C"), (0.7, "C"), (0.69, "F")):
        ev = evaluation(4, 4, strict=value)
        assert scoring.rate(ev, ev.metric, th, False)[0] == letter, value
    ev = evaluation(4, 4, strict=0.69)
    assert "below the C floor" in scoring.rate(ev, ev.metric, th, False)[1]
    assert scoring.rate(ev, ev.metric, RatingThresholds(0.9, 0.8), False)[0] == "C"  # no floor: C as before


def test_no_positive_evidence_rates_f_and_a_cap_holds_at_c():
    th = RatingThresholds(good=0.7, okay=0.3)
    ev = evaluation(4, 4, strict=0.9)
    assert scoring.rate(ev, ev.metric, th, False, positive_cases=1)[0] == "A"
    letter, reason = scoring.rate(ev, ev.metric, th, False, positive_cases=0)
    assert letter == "F" and "positive metric evidence" in reason
    letter, reason = scoring.rate(ev, ev.metric, th, False, positive_cases=2, cap="gaming")
    assert letter == "C" and "held at C: gaming" in reason
    low = evaluation(4, 4, strict=0.1)  # a cap never raises a C, and below B it changes nothing
    assert scoring.rate(low, low.metric, th, False, positive_cases=2, cap="gaming") == scoring.rate(
        low, low.metric, th, False, positive_cases=2)


def test_score_result_reads_one_inputs_record():
    """run, evaluate and rejudge hand score_result one ScoreInputs record: the facts (here a breach with a full,
    valid evaluation) and how to read them; the tier is the header's, the codes list the record's own."""
    import attrs
    from automedbench.plugins import registry
    from automedbench.records import BreachEvidence, Header, Isolation, Runtime, SubmissionManifest
    from automedbench.testing import register_toy_track

    register_toy_track()
    track, task = registry().task("toy/vowels")
    header = Header("r1", task.id, task.track, "lite", "a", "local", "rules", "2025-01-01T00:00:00+00:00")
    inputs = scoring.ScoreInputs(track=track, task=task, header=header, state="scored", end_reason="submitted",
                                 runtime=Runtime(), isolation=Isolation("local"), manifest=SubmissionManifest(),
                                 evaluation=evaluation(4, 4, strict=1.0), judged=False)
    clean = scoring.score_result(inputs)
    assert clean.header is header and clean.task.used == task.task_score and clean.error_codes == []
    assert [s.rule for s in clean.stages[:3]] == ["not graded: no agent run"] * 3  # judged=False: no S1–S3
    breach = Isolation("local", breached=True, evidence=[BreachEvidence(3, "read", "/data/private/x")])
    zeroed = scoring.score_result(attrs.evolve(inputs, isolation=breach, evaluation=evaluation(4, 4, strict=1.0),
                                               codes=[], task_score="partial"))
    assert zeroed.aggregate.overall == 0.0 and zeroed.aggregate.rating == "F" and zeroed.task.used == "partial"
    assert [c.code for c in zeroed.error_codes] == ["H-BREACH"] and zeroed.error_codes[0].evidence_turns == [3]


def test_an_evaluation_with_numbers_written_as_null_rates_no_better_than_c():
    """The evaluator writes NaN/inf as null and counts them (`non_finite_numbers`); a track's caps read a null as
    no value and would pass it, so the rating fails closed: a Task in the A band is held at C, naming why."""
    import attrs
    from automedbench.plugins import registry
    from automedbench.records import Header, Isolation, Runtime, SubmissionManifest
    from automedbench.testing import register_toy_track

    register_toy_track()
    track, task = registry().task("toy/vowels")
    header = Header("r1", task.id, task.track, "lite", "a", "local", "rules", "2025-01-01T00:00:00+00:00")
    made = evaluation(4, 4, strict=1.0)  # every case right (positive evidence)
    clean = attrs.evolve(made, metric=attrs.evolve(made.metric, per_case=[
        {"case_id": c.case_id, "correct": 1.0} for c in made.cases]))
    inputs = scoring.ScoreInputs(track=track, task=task, header=header, state="scored", end_reason="submitted",
                                 runtime=Runtime(), isolation=Isolation("local"), manifest=SubmissionManifest(),
                                 evaluation=clean, judged=False)
    assert scoring.score_result(inputs).aggregate.rating == "A"
    odd = attrs.evolve(clean, metric=attrs.evolve(clean.metric, components={"non_finite_numbers": 2.0}))
    held = scoring.score_result(attrs.evolve(inputs, evaluation=odd)).aggregate
    assert held.rating == "C" and "2 number(s) of the evaluation were not finite" in held.rating_reason


def test_s4_s5_items_name_the_cases_they_were_decided_from():
    """Where an item falls short it names the missing, invalid or non-positive cases (the run page links their
    rows); S5's evidence names the positive cases; an item every case earned names none (the whole table)."""
    s4, s5 = scoring.deterministic_stages(evaluation(2, 1), positive_cases=1, positive_ids=["c0"])
    completion, valid = s4.items
    assert completion.evidence_cases == ["c2", "c3"] and valid.evidence_cases == ["c1", "c2", "c3"]
    positive, all_valid = s5.items
    assert positive.evidence_cases == ["c0"] and all_valid.evidence_cases == ["c1", "c2", "c3"]
    s4, s5 = scoring.deterministic_stages(evaluation(4, 4), positive_cases=0, positive_ids=[])
    assert s4.items[0].evidence_cases == [] and s5.items[1].evidence_cases == []  # earned by every case
    assert s5.items[0].value == 0 and s5.items[0].evidence_cases == ["c0", "c1", "c2", "c3"]  # none positive
    many = evaluation(0, 0, expected=500)
    assert len(scoring.deterministic_stages(many, 0)[0].items[0].evidence_cases) == scoring.MAX_EVIDENCE_CASES
