"""Adversarial review of the rating rules: boundaries that a float or a rounding step could misplace."""

from __future__ import annotations

import pytest
from automedbench import scoring
from automedbench.records import CaseVerdict, Evaluation, MetricBlock, RatingThresholds


def evaluation(valid: int, expected: int, value: float) -> Evaluation:
    cases = [CaseVerdict(f"c{i}", True, i < valid) for i in range(expected)]
    return Evaluation("t/x", expected, expected, valid, cases, MetricBlock("m", 0.0, value, used="partial"))


@pytest.mark.parametrize("share,valid,expected", [(0.55, 55, 100), (0.28, 7, 25), (0.56, 14, 25), (0.7, 7, 10)])
def test_exactly_the_minimum_valid_share_is_not_failed(share, valid, expected):
    """55 of 100 valid meets min_valid 0.55, though 0.55 * 100 is 55.00000000000001 in floating point."""
    ev = evaluation(valid, expected, 0.5)
    letter, why = scoring.rate(ev, ev.metric, RatingThresholds(0.7, 0.3, share), False)
    assert letter == "B", why
    ev = evaluation(valid - 1, expected, 0.5)
    assert scoring.rate(ev, ev.metric, RatingThresholds(0.7, 0.3, share), False)[0] == "F"


def test_rating_agrees_with_the_reported_task_value():
    """A Task reported as 0.7 (4 decimals) must not be rated below the 0.70 'good' line."""
    ev = evaluation(4, 4, 0.699996)
    letter, why = scoring.rate(ev, ev.metric, RatingThresholds(0.7, 0.3, 1.0), False)
    agg = scoring.aggregate([], ev.metric, (letter, why))
    assert agg.task == 0.7
    assert letter == "A", why


@pytest.mark.xfail(strict=True, reason="upstream parity (spec: 'raw-fallback'): when the prediction scores < 1 the "
                   "agent-written raw_model_output is graded too and the better verdict kept, so one answer.json "
                   "can carry two guesses; removing it changes VQA scores against upstream")
def test_raw_output_is_not_a_second_guess():
    from automedbench_vqa.answer_judge import JudgeRequest, OfflineAnswerJudge

    request = JudgeRequest("q1", "Which organ is enlarged?", "left kidney", "right kidney",
                           raw_output="the left kidney")
    assert OfflineAnswerJudge().judge(request).score <= 0.5


def test_rules_judge_step_count_is_linear_in_a_blank_plan():
    """A plan.md of blank lines made the step regex quadratic: 20 MB (the copy limit) would hang the judge."""
    import time
    import types

    from automedbench.judges.rules import RulesJudge

    judge_input = types.SimpleNamespace(plan_md="1. load\n2. predict\n3. save\n" + "\n" * 20_000 + "end")
    started = time.monotonic()
    value, why, _ = RulesJudge()._s1b(None, judge_input, None)
    assert time.monotonic() - started < 0.5
    assert value == 1.0 and why.startswith("3 listed steps"), why
