"""The answer judge: levels, shortcuts, raw-output fallback, the model judge's requests, the JSONL cache."""

from __future__ import annotations

import pytest
from automedbench.api import Grade
from automedbench_vqa.answer_judge import (
    AnswerJudgeCache,
    JudgeRequest,
    OfflineAnswerJudge,
    cached_judge,
    fold_answer_grades,
    make_answer_judge,
    model_grade_requests,
    snap,
)


def req(prediction, gold="left lower lobe", raw="", raw_fallback=False):
    return JudgeRequest("q1", "Where is the mass?", gold, prediction, raw, raw_fallback)


def test_snap_levels():
    assert [snap(v) for v in (0.0, 0.24, 0.25, 0.74, 0.75, 1.0)] == [0.0, 0.0, 0.5, 0.5, 1.0, 1.0]


def test_offline_judge_levels_and_shortcuts():
    judge = OfflineAnswerJudge()
    assert judge.judge(req("")).score == 0.0
    assert judge.judge(req("Left Lower Lobe")).rationale == "exact string match"
    # {left, lower, lobe, of, lung} vs gold {left, lower, lobe}: P 3/5 R 1 -> F1 0.75 -> 0.5
    assert judge.judge(req("left lower lobe of lung")).score == 0.5
    assert judge.judge(req("lower lobe left")).score == 1.0      # F1 1.0 (bag of tokens)
    assert judge.judge(req("heart")).score == 0.0
    assert judge.judge(req("yes", gold="no")).score == 0.0


def test_raw_output_fallback_keeps_the_better_verdict():
    judge = OfflineAnswerJudge()
    # the original's rule, now only with --eval-option raw_fallback=true (off by default: a second guess)
    assert judge.judge(req("mass", raw="The mass is in the left lower lobe")).score == 0.0
    verdict = judge.judge(req("mass", raw="The mass is in the left lower lobe", raw_fallback=True))
    # answer alone: F1 0 -> 0; raw: {the, mass, is, in, the, left, lower, lobe} P 3/8 R 1 -> F1 0.545 -> 0.5
    assert verdict.score == 0.5 and verdict.rationale.startswith("raw-fallback")


def test_model_judge_requests_and_folding():
    """answer_judge=llm: one request per open answer (none for the shortcuts), the raw output asked too only
    with raw_fallback; grades snapped, the better one kept, a null grade falls back to the offline verdict."""
    assert model_grade_requests(req("")) == [] and model_grade_requests(req("Left lower lobe")) == []
    (asked,) = model_grade_requests(req("LLL", raw="LLL is the left lower lobe"))
    assert asked.grader == "answer_judge" and asked.levels == [0.0, 0.5, 1.0] and asked.tag == "answer"
    assert [(p.label, p.agent) for p in asked.parts] == [("Question", False), ("Gold answer", False),
                                                         ("Prediction", True)]
    both = model_grade_requests(req("LLL", raw="LLL is the left lower lobe", raw_fallback=True))
    assert [(r.tag, r.parts[2].text) for r in both] == [("answer", "LLL"), ("raw", "LLL is the left lower lobe")]
    rows = [{"case_id": "q1", "score": 0.0, "judge_fallback": False},
            {"case_id": "q2", "score": 0.5, "judge_fallback": False}, {"case_id": "q3", "score": 1.0}]
    grades = [Grade("q1", "answer_judge", "answer", 0.3, "partly", "openai:m"),
              Grade("q1", "answer_judge", "raw", 0.8, "same", "openai:m"),
              Grade("q2", "answer_judge", "answer", None, model="openai:m", error="backend error: down")]
    fold_answer_grades(rows, grades)
    assert rows[0] == {"case_id": "q1", "score": 1.0, "judge_score": 1.0, "judge_fallback": False,
                            "judge_cached": False, "judge_rationale": "raw-fallback: same",
                            "judge": "llm@3:openai:m"}
    assert rows[1]["score"] == 0.5 and rows[1]["judge_fallback"] and rows[1]["judge_score"] is None
    assert rows[1]["judge_error"] == "backend error: down"
    assert rows[2] == {"case_id": "q3", "score": 1.0}


def test_cache_lives_for_one_evaluation_only(tmp_path):
    """Before: verdicts persisted in <staged task>/answer_judge_cache.jsonl, a file a run could write and
    every later run trusted. Now a cache is one evaluation's memory: a fresh one has seen nothing."""
    judge = OfflineAnswerJudge()
    cache = AnswerJudgeCache()
    first = cached_judge(judge, cache, req("left lower lobe of lung"))
    second = cached_judge(judge, cache, req("left lower lobe of lung"))
    assert first.score == second.score == 0.5 and not first.cached and second.cached
    fresh = cached_judge(judge, AnswerJudgeCache(), req("left lower lobe of lung"))
    assert not fresh.cached and not list(tmp_path.iterdir())


def test_unknown_judge_is_a_user_error():
    from automedbench.api import UserError

    assert make_answer_judge("offline", {}).name == "offline"
    with pytest.raises(UserError, match=r"unknown answer judge 'gpt'.*answer_judge=llm answer_judge.provider=NAME"):
        make_answer_judge("gpt", {})


class AgreeingJudge(OfflineAnswerJudge):
    """Grades every answer 1: shows which questions reach the judge."""

    name = "agreeing"

    def grade(self, question, gold, prediction):
        return 1.0, "agrees", False


def test_the_judge_grades_yes_no_answers_too_and_yes_no_accuracy_stays_strict():
    """The original sends every answered text question to the answer judge, yes/no ones included, and its
    accuracy is the mean judge score; its yes_no_accuracy stays the strict yes/no value."""
    from automedbench_vqa.metric import EvaluationState, score_question, summarize

    state = EvaluationState(judge=AgreeingJudge())
    rows = []
    for qid, gold, answer in [("q1", "yes", "yes, a mass is present"), ("q2", "no", "No."),
                              ("q3", "left lobe", "the lobe on the left")]:
        values, _ = score_question({"predicted_answer": answer}, {"question_id": qid, "answer_text": gold},
                                   {"question": "Is there a mass?"}, state)
        rows.append({"case_id": qid, **values})
    assert [r["kind"] for r in rows] == ["closed", "closed", "open"]
    assert [r["score"] for r in rows] == [1.0, 1.0, 1.0]  # the judge's verdicts
    assert [r.get("yes_no_strict") for r in rows] == [0.0, 1.0, None]
    accuracy, by_kind, _ = summarize(rows)
    assert accuracy == 1.0 and by_kind["yes_no_accuracy"] == 0.5 and by_kind["yes_no_count"] == 2.0
    # without a judge the yes/no question is strict: "yes, a mass is present" is not "yes"
    plain, _ = score_question({"predicted_answer": "yes, a mass is present"},
                              {"question_id": "q1", "answer_text": "yes"}, {"question": "Is there a mass?"},
                              EvaluationState())
    assert plain["score"] == 0.0 and "judge_score" not in plain
