"""Held-out answer records against the original VQA checker and scorer (round 19), through `automedbench evaluate`.

The original (`eval_vqa/format_checker.py`, `vqa_scorer.py`), as read for this round:
- its placeholder rule flags a record whose raw output is empty while its predicted_answer *text* is not; with both
  texts empty the record is an honest skip there, and an MCQ skip that still carries a letter is a valid answer
  (the checker reads the label, the scorer credits it). Ours called every record with an empty raw output a
  placeholder, so a label-only MCQ answer counted 0 and its run rated F where the original scored it;
- a label is valid when it is one of A-E, whatever letters the question's options use: "E" on a four-option
  question is a wrong answer (0), not a broken file. Ours refused it, so the strict Task was 0;
- an open-ended question's predicted_label is never read: a number or a list there does not make the record
  invalid. Ours required a string and refused the record (its answer counted 0).
Expected scores below come from the staged gold answers directly (the gold text verbatim is right, a nonsense
word is wrong), never from the track's scorer.
"""

from __future__ import annotations

import json

import pytest
from automedbench.testing import evaluate_outputs, stage_task
from automedbench_vqa.contract import check_record
from automedbench_vqa.data.records import read_private
from automedbench_vqa.metric import EvaluationState, score_question

DEMO = "vqa/demo"
WRONG_TEXT = "zzqx"  # no gold answer of the demo shares a token with it


def _write(outputs, qid: str, **fields) -> None:
    record = {"question_id": qid, "predicted_label": "", "predicted_answer": "", "raw_model_output": "",
              "model_name": "held-out", "runtime_s": 0.5, **fields}
    (outputs / qid).mkdir(parents=True)
    (outputs / qid / "answer.json").write_text(json.dumps(record), "utf-8")


def test_label_only_mcq_answers_without_raw_output_are_scored(amb_data_root, tmp_path):
    """Every MCQ answered by its letter alone (predicted_answer and raw_model_output empty): valid and credited, as
    the original; every text question answered with its gold text. Before: each MCQ was a placeholder (0), the
    strict Task 0."""
    staged = stage_task(DEMO, amb_data_root)
    outputs = tmp_path / "outputs"
    expected, mcq = [], 0
    for k, qid in enumerate(staged.case_ids):
        gold = read_private(staged.private, qid)
        if gold.get("answer_label"):
            right = mcq % 4 != 0  # counted over MCQs: which cases are MCQs is the staging's draw
            mcq += 1
            letter = gold["answer_label"] if right else ("A" if gold["answer_label"] != "A" else "B")
            _write(outputs, qid, predicted_label=letter.lower() if k % 2 else letter)
            expected.append(1.0 if right else 0.0)
        else:
            _write(outputs, qid, predicted_answer=gold["answer_text"], raw_model_output=gold["answer_text"])
            expected.append(1.0)
    assert mcq >= 4
    result = evaluate_outputs(DEMO, data_root=amb_data_root, work=tmp_path / "w", submission=outputs)
    assert all(c.valid for c in result.cases), [c.reasons for c in result.cases if not c.valid][:3]
    assert result.task.strict == pytest.approx(sum(expected) / len(expected), abs=1e-12)
    assert result.task.components["placeholders"] == 0.0
    assert 0 < sum(expected) < len(expected)


@pytest.mark.parametrize("label", [3, 0, ["B"], {"x": 1}, True, 2.5])
def test_an_open_questions_label_is_never_read(amb_data_root, tmp_path, label):
    """A text question's predicted_label of any JSON type: the record stands on its text, as the original's."""
    staged = stage_task(DEMO, amb_data_root)
    outputs = tmp_path / "outputs"
    expected = []
    for k, qid in enumerate(staged.case_ids):
        gold = read_private(staged.private, qid)
        if gold.get("answer_label"):
            _write(outputs, qid, predicted_label=gold["answer_label"], raw_model_output="B")
            expected.append(1.0)
        else:
            text = gold["answer_text"] if k % 3 else WRONG_TEXT
            _write(outputs, qid, predicted_label=label, predicted_answer=text, raw_model_output=text)
            expected.append(1.0 if k % 3 else 0.0)
    result = evaluate_outputs(DEMO, data_root=amb_data_root, work=tmp_path / "w", submission=outputs)
    assert all(c.valid for c in result.cases), [c.reasons for c in result.cases if not c.valid][:3]
    assert result.task.strict == pytest.approx(sum(expected) / len(expected), abs=1e-12)


FOUR = {"question_id": "q1", "mode": "multiple_choice", "question": "Which organ?",
        "options": {"A": "Liver", "B": "Spleen", "C": "Kidney", "D": "Heart"}}


@pytest.mark.parametrize(("label", "kind", "score"), [
    ("E", "valid", 0.0),  # a letter the question does not use: a wrong answer, as the original
    ("(e)", "valid", 0.0),
    ("B", "valid", 1.0),
    ("F", "invalid", None),  # no letter A-E: invalid there too
    ("", "skip", None),  # nothing at all: the honest skip
])
def test_any_letter_a_to_e_is_an_answer(label, kind, score):
    record = {"question_id": "q1", "predicted_label": label, "predicted_answer": "", "raw_model_output": "",
              "model_name": "m", "runtime_s": 1}
    check = check_record(record, "q1", FOUR)
    assert check.kind == kind, check.reasons
    if score is not None:
        values, _ = score_question(record, {"answer_label": "B", "answer_text": "Spleen"}, FOUR, EvaluationState())
        assert values["score"] == score


@pytest.mark.parametrize(("fields", "kind"), [
    ({"predicted_label": "B", "predicted_answer": "Spleen", "raw_model_output": ""}, "placeholder"),  # text, no raw
    ({"predicted_label": "B", "predicted_answer": "", "raw_model_output": "unknown"}, "placeholder"),
    ({"predicted_label": "zz", "predicted_answer": "", "raw_model_output": ""}, "invalid"),  # no letter, no text
])
def test_placeholders_keep_the_originals_rule(fields, kind):
    """The original's placeholder: an answer text with no raw output, or a generic / prefixed raw output."""
    record = {"question_id": "q1", "model_name": "m", "runtime_s": 1, **fields}
    assert check_record(record, "q1", FOUR).kind == kind
