"""S5's positive evidence on a VQA run that left questions unanswered: judged on the answers it gave.

The rating cap counts a blank as a blind guess that missed (kappa over every question), which suits a cap but
denied evidence to a reader that answered half the demo's questions, every one right (kappa -0.04: F). A blind
reader that answers half the questions with one answer still shows none."""

from __future__ import annotations

from automedbench.api import MetricBlock
from automedbench.testing import load_task
from automedbench_vqa.chance import UNANSWERED, agreement_beyond_chance
from automedbench_vqa.metric import repeat_share
from automedbench_vqa.track import VQATrack

GOLD = ["yes", "no"] * 12  # 24 polar questions, the gold answers alternating


def _block(answers: list[str | None]) -> MetricBlock:
    rows = []
    for i, (gold, answer) in enumerate(zip(GOLD, answers, strict=True)):
        rows.append({"case_id": f"q{i:02d}", "kind": "closed", "form": "polar", "question_key": f"is there {i}",
                     "gold_key": gold, "answer_key": UNANSWERED if answer is None else answer,
                     "score": 1.0 if answer == gold else 0.0, "valid": answer is not None})
    comps = {"answer_repeat_share": repeat_share(rows, "answer_key"),
             "gold_repeat_share": repeat_share(rows, "gold_key"), **agreement_beyond_chance(rows)}
    acc = sum(r["score"] for r in rows) / len(rows)
    return MetricBlock("accuracy", 0.0, acc, components=comps, per_case=rows)


def _task():
    return load_task("vqa/demo")[1]


def test_half_answered_every_one_right_shows_evidence():
    block = _block([g if i < 12 else None for i, g in enumerate(GOLD)])  # the first half, every one right
    assert block.components["chance_kappa"] is None or block.components["chance_kappa"] < 0.1  # the cap's view
    assert VQATrack().no_positive_evidence(_task(), block) is None


def test_half_answered_with_one_blind_answer_shows_none():
    block = _block(["yes" if i < 12 else None for i in range(24)])  # the first half, "yes" to each
    reason = VQATrack().no_positive_evidence(_task(), block)
    assert reason is not None and "one answer" in reason


def test_every_question_answered_is_judged_as_before():
    right = _block(list(GOLD))
    assert VQATrack().no_positive_evidence(_task(), right) is None
    constant = _block(["yes"] * 24)
    assert VQATrack().no_positive_evidence(_task(), constant) is not None
