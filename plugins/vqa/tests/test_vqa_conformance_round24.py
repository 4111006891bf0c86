"""Option lists past E in the secret order (round 24), through the real MedFrameQA stager and `evaluate`.

The original stages every option list in the dataset's order (`stage_hf_datasets.py` draws which questions, never
an order), so a dataset's gold-by-position skew is public. Ours deals options by the staging's secret
(`data/option_order.py`), but until this round a list longer than five kept the dataset's order: an agent that
sees six options could answer with the public prior on exactly those questions. On a MedFrameQA layout whose gold
is "A" on every six-option question, "A" to everything scored 1.0 before; now the golds spread over the six
letters, a right answer still scores, and a question naming a letter past E ("both A and F") keeps its order.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from automedbench.testing import evaluate_outputs
from automedbench_vqa.data.option_order import deal_options, names_letters
from automedbench_vqa.data.records import read_private, read_question

pytest.importorskip("pyarrow")

SIX = ["cyst", "abscess", "haemangioma", "metastasis", "lymphoma", "adenoma"]


def _answer_all(outputs, staged, pick) -> None:
    for qid in staged.case_ids:
        label = pick(qid)
        record = {"question_id": qid, "predicted_label": label, "predicted_answer": "", "raw_model_output": label,
                  "model_name": "held-out", "runtime_s": 0.5}
        (outputs / qid).mkdir(parents=True)
        (outputs / qid / "answer.json").write_text(json.dumps(record), "utf-8")


def test_six_option_lists_are_dealt_so_the_public_position_is_no_prior(tmp_path, stage_medframeqa):
    """24 six-option questions, gold "A" in the dataset (each a rotation of SIX, so the gold text varies). Before:
    options kept in order, gold "A" 24 of 24, the blind "A" answer Task 1.0. Now the golds fall on several letters,
    each gold letter names its text, the blind "A" scores like a guess and the right letters score 1.0."""
    rows = [{"options": SIX[k % 6:] + SIX[:k % 6], "answer": "A"} for k in range(24)]
    spec, staged = stage_medframeqa(tmp_path, rows)
    golds = {q: read_private(staged.private, q) for q in staged.case_ids}
    for qid, gold in golds.items():
        options = read_question(staged.public / qid)["options"]
        assert sorted(options.values()) == sorted(SIX) and list(options) == list("ABCDEF")
        assert options[gold["answer_label"]] == gold["answer_text"]
    spread = Counter(g["answer_label"] for g in golds.values())
    assert len(spread) >= 4 and spread["A"] <= 10, spread  # P(A >= 11 of 24 at 1/6) < 1e-3

    _answer_all(tmp_path / "blind", staged, lambda q: "A")
    blind = evaluate_outputs(spec.id, data_root=tmp_path / "data", work=tmp_path / "w1", submission=tmp_path / "blind")
    assert blind.task.strict <= 10 / 24
    _answer_all(tmp_path / "right", staged, lambda q: golds[q]["answer_label"])
    right = evaluate_outputs(spec.id, data_root=tmp_path / "data", work=tmp_path / "w2", submission=tmp_path / "right")
    assert all(c.valid for c in right.cases) and right.task.strict == pytest.approx(1.0)


def test_letters_past_e_named_in_the_text_keep_the_order():
    """A question naming "F" (or "G" among seven options) keeps its order, as "both A and B" does; an embedded
    "Answer Choices: (A) .. (F)" list is rewritten in the dealt order; "F" stays a plain word on five options."""
    import random

    six = dict(zip("ABCDEF", SIX, strict=True))
    named = [("Is it both A and F?", six), ("Which, except F, is benign?", six),
             ("Option G is?", dict(zip("ABCDEFG", [*SIX, "normal"], strict=True)))]
    for text, options in named:
        for seed in range(8):
            q, g = deal_options({"question": text, "options": options}, {"answer_label": "A"}, random.Random(seed))
            assert q["options"] == options and g["answer_label"] == "A", text
    assert names_letters("both A and F", "F") and not names_letters("both A and F")  # five letters: F is a word
    listed = "Which lesion? Answer Choices: " + " ".join(f"({k}) {t}" for k, t in six.items())
    moved = 0
    for seed in range(8):
        q, g = deal_options({"question": listed, "options": six}, {"answer_label": "F"}, random.Random(seed))
        assert q["question"].endswith(" ".join(f"({k}) {t}" for k, t in q["options"].items()))
        assert q["options"][g["answer_label"]] == "adenoma"
        moved += g["answer_label"] != "F"
    assert moved >= 4
