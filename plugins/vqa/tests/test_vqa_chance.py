"""Agreement beyond chance (the blind-answer rating cap): kappa against hand-computed values."""

from __future__ import annotations

import pytest
from automedbench_vqa.chance import KAPPA_MIN, agreement_beyond_chance, blind_answers


def row(answer: str, gold: str, question: str = "is there a lesion", form: str = "yes_no_form") -> dict:
    return {"kind": "closed", "answer_key": answer, "gold_key": gold, "question_key": question, "form": form,
            "score": 1.0 if answer == gold else 0.0}


def test_blind_yes_is_chance_and_a_reader_is_not():
    gold = ["yes"] * 14 + ["no"] * 6
    blind = agreement_beyond_chance([row("yes", g) for g in gold])
    assert blind["chance_observed"] == blind["chance_expected"] == 0.7 and blind["chance_kappa"] == 0.0
    assert blind_answers(blind)
    # 17 of 20 right, answers yes 15 times: observed 0.85, chance (15*14 + 5*6) / 400 = 0.6, kappa 0.25 / 0.4
    answers = ["yes"] * 13 + ["no"] + ["yes"] * 2 + ["no"] * 4
    reader = agreement_beyond_chance([row(a, g) for a, g in zip(answers, gold, strict=True)])
    assert reader["chance_kappa"] == pytest.approx(0.625) and not blind_answers(reader)


def test_templates_are_their_own_groups_and_one_gold_answer_is_no_evidence():
    # per-template constants: right half the time in each template, exactly what chance gives there
    rows = [row("1", g, "how many lesions", "open_form") for g in ["1", "2"] * 6]
    rows += [row("left", g, "which side", "open_form") for g in ["left", "right"] * 6]
    assert agreement_beyond_chance(rows)["chance_kappa"] == 0.0
    # a template whose gold never varies is left out: only 12 informative questions remain, no verdict
    rows = [row("1", g, "how many lesions", "open_form") for g in ["1", "2"] * 6]
    rows += [row("yes", "yes", "is this a ct", "yes_no_form")] * 12
    assert agreement_beyond_chance(rows)["chance_kappa"] is None


def test_a_weak_honest_mcq_reader_keeps_its_band():
    """30 % on five options (chance 20 %): kappa 0.125, above the cap's line."""
    letters = "ABCDE"
    rows = []
    for i in range(100):
        gold = letters[i % 5]
        answer = gold if i % 10 < 3 else letters[(i % 5 + 1 + (i // 10) % 4) % 5]  # wrong: offset 1-4
        rows.append({"kind": "mcq", "answer_key": answer.lower(), "gold_key": gold.lower(), "question_key": f"q{i}",
                     "form": "open_form", "answer_text_key": f"opt {answer}{i}", "gold_text_key": f"opt {gold}{i}",
                     "score": float(answer == gold)})
    out = agreement_beyond_chance(rows)
    assert out["chance_observed"] == pytest.approx(0.3)
    assert out["chance_kappa"] > KAPPA_MIN and not blind_answers(out)
