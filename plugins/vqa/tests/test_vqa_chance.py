"""Agreement beyond chance (the blind-answer rating cap): kappa against hand-computed values."""

from __future__ import annotations

import pytest
from automedbench_vqa.chance import KAPPA_MIN, UNANSWERED, agreement_beyond_chance, blind_answers


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


def test_a_blank_is_a_missed_guess_and_the_chance_side_takes_the_commonest_gold():
    """Hand-computed: 20 questions of one template, gold yes x12 / no x8. The answerer is right on 10 (yes on 8
    yes, no on 2 no) and leaves 10 blank. Observed 10; chance pairs: yes x8, no x2, and the 10 blanks as "yes"
    (the commonest gold): answers yes 18 / no 2 -> (18*12 + 2*8) / 20 = 11.6; kappa (10 - 11.6) / (20 - 11.6)."""
    gold = ["yes"] * 12 + ["no"] * 8
    answers = ["yes"] * 8 + [None] * 4 + ["no"] * 2 + [None] * 6
    rows = [row(a, g) if a else {**row("yes", g), "answer_key": UNANSWERED, "score": 0.0}
            for a, g in zip(answers, gold, strict=True)]
    out = agreement_beyond_chance(rows)
    assert out["chance_observed"] == 0.5 and out["chance_expected"] == pytest.approx(0.58)
    assert out["chance_kappa"] == pytest.approx(round(-1.6 / 8.4, 4))


def _random_group(rng, n: int) -> list[dict]:
    """Questions under two wordings (one a template, one pooled by form) with answers right, wrong or made up."""
    out = []
    for i in range(n):
        wording = "is there a lesion" if i % 3 else f"odd wording {i}"
        gold = str(rng.integers(0, 3))
        answer = [gold, str(rng.integers(0, 3)), f"made up {i}"][int(rng.integers(0, 3))]
        out.append(row(answer, gold, wording, "open_form"))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_leaving_any_question_out_never_raises_kappa_over_any_answer_to_it(seed):
    """The class behind every omission attack: for random answer sets, replacing one question's answer (right,
    wrong or made up) by a blank never raises kappa, whichever question it is (an oracle that blanks exactly its
    wrong answers included: that is a sequence of such steps)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    rows = _random_group(rng, 30)
    before = agreement_beyond_chance(rows)["chance_kappa"]
    assert before is not None
    for i in range(len(rows)):
        blanked = [*rows[:i], {**rows[i], "answer_key": UNANSWERED, "score": 0.0}, *rows[i + 1:]]
        after = agreement_beyond_chance(blanked)["chance_kappa"]
        assert after is not None and after <= before + 1e-9, (i, rows[i], before, after)


# ------------------------------------------------------------------ omissions through the evaluator (issue 35)


@pytest.fixture(scope="module")
def blind(amb_registry, amb_data_root, tmp_path_factory):
    """The question-prior baseline (answers from the question's wording alone, no image opened), scored."""
    from automedbench.testing import evaluate_outputs

    work = tmp_path_factory.mktemp("blind")
    result = evaluate_outputs("vqa/demo", baseline="question-prior", data_root=amb_data_root, work=work / "all",
                              registry=amb_registry)
    return work, result


@pytest.mark.parametrize("left_out", [5, 8, 11, 12])
def test_leaving_questions_unanswered_never_turns_a_cap_off(amb_registry, amb_data_root, blind, left_out):
    """A blind answerer leaves out the questions it got wrong: its accuracy is unchanged (they scored 0 either
    way) but, before, the chance check then had fewer than QUESTIONS_MIN answered questions and said nothing
    (kappa None): C -> A with five blanks. Now an unanswered question is the blind answer it stands for, the
    check keeps every question, and the rating stays held."""
    from automedbench.testing import evaluate_outputs

    work, full = blind
    assert full.aggregate.rating not in ("A", "B"), full.aggregate.rating_reason
    wrong = [r["case_id"] for r in full.task.per_case if r["score"] == 0.0]
    right = [r["case_id"] for r in full.task.per_case if r["score"] > 0.0]
    gone = (wrong + right)[:left_out]  # the wrong ones first: what an agent gaming the cap would drop
    sub = work / f"minus{left_out}"
    for case in full.task.per_case:
        if case["case_id"] not in gone:
            src = work / "all" / "baseline" / case["case_id"] / "answer.json"
            (sub / case["case_id"]).mkdir(parents=True)
            (sub / case["case_id"] / "answer.json").write_bytes(src.read_bytes())
    fewer = evaluate_outputs("vqa/demo", submission=sub, data_root=amb_data_root, work=work / f"eval{left_out}",
                             registry=amb_registry)
    assert fewer.task.components["answered"] == len(full.task.per_case) - left_out
    assert fewer.task.components["chance_kappa"] is not None
    assert fewer.aggregate.rating not in ("A", "B"), (fewer.task.partial, fewer.aggregate.rating_reason)
    assert "kappa" in fewer.aggregate.rating_reason or "one answer per question kind" in fewer.aggregate.rating_reason


def test_nonsense_in_place_of_the_wrong_answers_is_no_way_out(amb_registry, amb_data_root, blind):
    """The same blind answerer writes a made-up string (a different one each time) wherever its wording-based
    guess was wrong: before, such answers lowered the chance the check expects (no made-up string agrees by
    chance) while the right ones stayed, so kappa rose from 0.00 to 0.23 and the rating from C to A. Now a
    wrong answer that is no gold answer of its group stands for the blind answer, as a blank does."""
    import json

    from automedbench.testing import evaluate_outputs

    work, full = blind
    sub = work / "nonsense"
    for n, row in enumerate(full.task.per_case):
        answer = json.loads((work / "all" / "baseline" / row["case_id"] / "answer.json").read_text())
        if row["score"] == 0.0 and row["kind"] != "mcq":
            answer["predicted_answer"] = answer["raw_model_output"] = f"zq{n}x"
        (sub / row["case_id"]).mkdir(parents=True)
        (sub / row["case_id"] / "answer.json").write_text(json.dumps(answer))
    made_up = evaluate_outputs("vqa/demo", submission=sub, data_root=amb_data_root, work=work / "eval-nonsense",
                               registry=amb_registry)
    assert made_up.task.partial == full.task.partial  # the Task is the same: only the cap's evidence differs
    assert made_up.task.components["chance_kappa"] is not None and made_up.task.components["chance_kappa"] < 0.1
    assert made_up.aggregate.rating not in ("A", "B"), made_up.aggregate.rating_reason


@pytest.mark.parametrize("spelling", ["punctuation", "synonyms"])
def test_spellings_the_scorer_credits_are_no_way_out(amb_registry, amb_data_root, blind, spelling):
    """The same blind answerer writes every text answer in a spelling the scorer credits but no gold answer
    has ("yes ???", "positive" for yes, "two" for 2): the Task is the same, but before, the chance check keyed
    answers more loosely than the scorer, so no answer could agree by chance: kappa 0.48, C -> A (red team,
    round 8). Now the check keys answers as the scorer compares them."""
    import json

    from automedbench.testing import evaluate_outputs

    words = {"yes": "positive", "no": "negative", "1": "one", "2": "two", "3": "three", "4": "four", "0": "zero"}
    work, full = blind
    sub = work / f"spelled-{spelling}"
    for row in full.task.per_case:
        answer = json.loads((work / "all" / "baseline" / row["case_id"] / "answer.json").read_text())
        if row["kind"] != "mcq":
            text = answer["predicted_answer"]
            answer["predicted_answer"] = f"{text} ???" if spelling == "punctuation" else words.get(text, f"{text}!")
        (sub / row["case_id"]).mkdir(parents=True)
        (sub / row["case_id"] / "answer.json").write_text(json.dumps(answer))
    spelled = evaluate_outputs("vqa/demo", submission=sub, data_root=amb_data_root, work=work / f"eval-{spelling}",
                               registry=amb_registry)
    assert spelled.task.partial == full.task.partial  # credited exactly as before
    assert spelled.task.components["chance_kappa"] == full.task.components["chance_kappa"]
    assert spelled.aggregate.rating not in ("A", "B"), spelled.aggregate.rating_reason
