"""Hostile-but-legal answer files against the original VQA checker (round 22), through `automedbench evaluate`.

The original (`eval_vqa/format_checker.py::check_answer_file`) checks the bookkeeping fields loosely:
`model_name` is any non-empty string (" " passes), `runtime_s` any JSON number not below 0 (`isinstance(x,
(int, float)) and not x < 0`: NaN, Infinity, `true` and an integer of any size pass). Ours asked for a stripped
non-empty name and a finite non-bool number, so such a record was invalid and its right answer counted 0 where
the original's checker passes it and its scorer credits it; a 400-digit `runtime_s` even raised OverflowError
inside our checker ("checker error"). Now both fields are checked as there. An integer past Python's
4300-digit limit is invalid JSON to both; ours now says so instead of "checker error".

Measured against the original's checker and scorer on 47 generated records per question kind (numbers, null,
lists and bools in every field, BOM, CRLF, duplicate keys, extra fields, Latin-1, non-ASCII, 120 KB and 1.2 MB
answers, case/space/punctuation variants, honest skips, placeholders): after this round, validity and score
agree except (a) records the original's checker refuses but its scorer credits (README item 4), (b) an MCQ text
equal to its option up to case and spacing, and a label such as "Answer: C" (valid and credited here; refused by
the original's checker, credited by its scorer), (c) files over the 1 MiB answer limit.
"""

from __future__ import annotations

import json

import pytest
from automedbench.testing import evaluate_outputs, stage_task
from automedbench_vqa.data.records import read_private

DEMO = "vqa/demo"

# each value is the raw JSON text written for the field
ODD_BOOKKEEPING = [
    ("runtime_s", "NaN"),
    ("runtime_s", "Infinity"),
    ("runtime_s", "true"),
    ("runtime_s", "1" + "0" * 400),
    ("model_name", '" "'),
]


def _right_answer(qid: str, gold: dict, field: str, raw_value: str) -> str:
    record = {"question_id": qid, "predicted_label": gold.get("answer_label") or "",
              "predicted_answer": gold["answer_text"], "raw_model_output": gold["answer_text"],
              "model_name": "held-out", "runtime_s": 0.5}
    text = json.dumps({k: v for k, v in record.items() if k != field})
    return text[:-1] + f', "{field}": {raw_value}}}'


@pytest.mark.parametrize(("field", "raw_value"), ODD_BOOKKEEPING)
def test_bookkeeping_fields_are_checked_as_the_original(amb_data_root, tmp_path, field, raw_value):
    """Every question answered right; every other question carries the odd field. All valid (the original's
    checker passes them) and accuracy 1.0 (its scorer credits them). Before: those records were invalid, the
    accuracy about 0.5."""
    staged = stage_task(DEMO, amb_data_root)
    outputs = tmp_path / "outputs"
    for k, qid in enumerate(staged.case_ids):
        gold = read_private(staged.private, qid)
        (outputs / qid).mkdir(parents=True)
        text = _right_answer(qid, gold, field, raw_value) if k % 2 else _right_answer(qid, gold, "runtime_s", "0.5")
        (outputs / qid / "answer.json").write_text(text, "utf-8")
    result = evaluate_outputs(DEMO, data_root=amb_data_root, work=tmp_path / "w", submission=outputs)
    assert all(c.valid for c in result.cases), [c.reasons for c in result.cases if not c.valid][:2]
    assert result.task.partial == pytest.approx(1.0)


@pytest.mark.parametrize(("field", "raw_value", "needle"), [
    ("runtime_s", '"1.2"', "runtime_s"),  # a number as text: refused by both checkers
    ("runtime_s", "-1", "runtime_s"),
    ("model_name", '""', "model_name"),
    ("runtime_s", "1" + "0" * 5000, "not valid JSON"),  # past Python's integer digit limit: unreadable in both
])
def test_what_the_original_refuses_stays_invalid_with_a_reason(amb_data_root, tmp_path, field, raw_value, needle):
    staged = stage_task(DEMO, amb_data_root)
    outputs = tmp_path / "outputs"
    bad = staged.case_ids[0]
    for qid in staged.case_ids:
        gold = read_private(staged.private, qid)
        (outputs / qid).mkdir(parents=True)
        text = _right_answer(qid, gold, field, raw_value) if qid == bad else _right_answer(qid, gold, "runtime_s", "1")
        (outputs / qid / "answer.json").write_text(text, "utf-8")
    result = evaluate_outputs(DEMO, data_root=amb_data_root, work=tmp_path / "w", submission=outputs)
    verdicts = {c.case_id: c for c in result.cases}
    reasons = " ".join(verdicts[bad].reasons)
    assert not verdicts[bad].valid and needle in reasons and "checker error" not in reasons, reasons
    assert all(c.valid for cid, c in verdicts.items() if cid != bad)
    n = len(staged.case_ids)
    assert result.task.partial == pytest.approx((n - 1) / n)
