"""The answer judge: levels, shortcuts, raw-output fallback, a pluggable LLM backend, the JSONL cache."""

from __future__ import annotations

import json
import threading

import pytest
from automedbench_vqa.answer_judge import (
    AnswerJudgeCache,
    JudgeRequest,
    LLMAnswerJudge,
    OfflineAnswerJudge,
    cached_judge,
    make_answer_judge,
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


def test_llm_judge_parses_retries_and_falls_back():
    replies = iter(["not json", RuntimeError("503"), '{"score": 0.8, "rationale": "equivalent"}'])
    sent = []

    def complete(messages):
        sent.append(messages)
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    judge = LLMAnswerJudge(complete, "fake-model", attempts=3)
    verdict = judge.judge(req("LLL"))
    assert verdict.score == 1.0 and not verdict.fallback and len(sent) == 3
    assert sent[0][0]["role"] == "system" and "Gold answer: left lower lobe" in sent[0][1]["content"]
    assert judge.identity == "llm@2:fake-model"  # version 2: fenced prediction

    def broken(messages):
        raise ConnectionError("down")

    down = LLMAnswerJudge(broken, "fake-model", attempts=2).judge(req("left lower lobe of lung"))
    assert down.fallback and down.score == 0.5 and "ConnectionError" in down.rationale


def test_cache_persists_and_skips_torn_lines(tmp_path):
    path = tmp_path / "cache.jsonl"
    calls = []

    def complete(messages):
        calls.append(1)
        return '{"score": 1, "rationale": "same"}'

    judge = LLMAnswerJudge(complete, "m")
    first = cached_judge(judge, AnswerJudgeCache(path), req("LLL"))
    with path.open("a") as handle:
        handle.write('{"key": "torn')
    second = cached_judge(judge, AnswerJudgeCache(path), req("LLL"))
    assert first.score == second.score == 1.0 and not first.cached and second.cached
    assert len(calls) == 1
    # a different judge identity never reuses the verdict
    other = cached_judge(LLMAnswerJudge(complete, "other"), AnswerJudgeCache(path), req("LLL"))
    assert not other.cached and len(calls) == 2


def test_fallback_verdicts_are_not_cached(tmp_path):
    path = tmp_path / "cache.jsonl"

    def broken(messages):
        raise TimeoutError

    cached_judge(LLMAnswerJudge(broken, "m", attempts=1), AnswerJudgeCache(path), req("x"))
    assert not path.exists() or path.read_text() == ""


def test_concurrent_appends_never_interleave(tmp_path):
    path = tmp_path / "cache.jsonl"
    cache = AnswerJudgeCache(path)

    def writer(n):
        for i in range(50):
            cache.append({"key": f"{n}-{i}", "score": 1.0, "rationale": "x" * 2000})

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = path.read_text().splitlines()
    assert len(lines) == 200 and all(json.loads(line)["score"] == 1.0 for line in lines)
    assert len(AnswerJudgeCache(path).entries) == 200


def test_unknown_judge_is_a_user_error():
    from automedbench.errors import UserError

    assert make_answer_judge("offline", {}).name == "offline"
    with pytest.raises(UserError, match="unknown answer judge 'gpt'"):
        make_answer_judge("gpt", {})


def test_add_on_judges_come_from_the_entry_point_group(monkeypatch):
    from automedbench_vqa import answer_judge

    class EchoJudge(answer_judge.AnswerJudge):
        name = "echo"

        def grade(self, question, gold, prediction):
            return 0.6, "echo", False

    class Entry:
        def __init__(self, name, factory):
            self.name, self.factory = name, factory

        def load(self):
            if self.factory is None:
                raise ImportError("broken add-on")
            return self.factory

    seen = {}

    def entry_points(group):
        seen["group"] = group
        return [Entry("echo", lambda options: EchoJudge()), Entry("broken", None)]

    monkeypatch.setattr(answer_judge.metadata, "entry_points", entry_points)
    judges = answer_judge.available_judges()
    assert seen["group"] == "automedbench_vqa.answer_judges"
    assert set(judges) == {"offline", "echo"}  # the broken one is simply absent
    assert make_answer_judge("echo", {}).judge(req("x")).score == 0.5
