"""The answer.json contract: valid records, skips, placeholders and broken files get clear verdicts."""

from __future__ import annotations

import json

import pytest
from automedbench_vqa.contract import MAX_ANSWER_BYTES, check_answer_file, check_record

OPEN = {"question_id": "q1", "mode": "open_ended", "question": "Is there a lesion?"}
MCQ = {"question_id": "q2", "mode": "multiple_choice", "question": "Shape?",
       "options": {"A": "circle", "B": "square", "C": "triangle", "D": "ring", "E": "star"}}


def record(qid="q1", label="", answer="yes", raw="Yes, there is a lesion.", model="m", runtime=0.5):
    return {"question_id": qid, "predicted_label": label, "predicted_answer": answer, "raw_model_output": raw,
            "model_name": model, "runtime_s": runtime}


def test_valid_open_and_mcq():
    assert check_record(record(), "q1", OPEN).kind == "valid"
    mcq = record("q2", "B", "Square", "It is a square, answer B")
    assert check_record(mcq, "q2", MCQ).kind == "valid"


@pytest.mark.parametrize("label", ["b", "(B)", "B.", "answer: b", "Answer: (b)", " B ", "Option b"])
def test_mcq_labels_are_normalised_before_the_check(label):
    mcq = record("q2", label, "Square", "It is a square, answer B")
    assert check_record(mcq, "q2", MCQ).kind == "valid"


@pytest.mark.parametrize(("changes", "question", "needle"), [
    ({"question_id": "q9"}, OPEN, "does not match the folder"),
    ({"predicted_label": "F", "question_id": "q2"}, MCQ, "names none of the options A, B, C, D, E"),
    ({"predicted_label": "2", "question_id": "q2"}, MCQ, "names none of the options"),
    ({"predicted_label": "Option b", "predicted_answer": "circle", "question_id": "q2"}, MCQ,
     "not the text of option B"),
    ({"predicted_label": "A", "predicted_answer": "square", "question_id": "q2"}, MCQ, "not the text of option A"),
    ({"predicted_answer": ""}, OPEN, "half-empty"),
    ({"runtime_s": -1}, OPEN, "runtime_s"),
    ({"runtime_s": "1.2"}, OPEN, "runtime_s"),
    ({"runtime_s": None}, OPEN, "runtime_s"),
    ({"model_name": ""}, OPEN, "model_name"),
    ({"predicted_answer": 3}, OPEN, "must be a string"),
])
def test_invalid_records(changes, question, needle):
    rec = {**record(), **changes}
    folder = "q1" if question is OPEN else "q2"
    result = check_record(rec, folder, question)
    assert result.kind == "invalid"
    assert needle in " ".join(result.reasons)


def test_missing_fields_are_listed():
    rec = record()
    del rec["model_name"], rec["runtime_s"]
    result = check_record(rec, "q1", OPEN)
    assert result.kind == "invalid" and "model_name, runtime_s" in result.reasons[0]


@pytest.mark.parametrize("raw", ["", "unknown", " N/A ", "null", "mock: yes", "Placeholder: none", "stub:x",
                                 "heuristic: keyword"])
def test_placeholders_are_invalid(raw):
    result = check_record(record(raw=raw), "q1", OPEN)
    assert result.kind == "placeholder"
    assert result.reasons[0].startswith("placeholder:")


def test_honest_skip_is_recorded_as_a_skip():
    result = check_record(record(answer="", raw=""), "q1", OPEN)
    assert result.kind == "skip" and result.reasons[0].startswith("skip:")
    assert check_record(record("q2", "", "", ""), "q2", MCQ).kind == "skip"


def test_broken_files(tmp_path):
    path = tmp_path / "answer.json"
    assert "missing" in check_answer_file(path, "q1", OPEN).reasons[0]
    path.write_bytes(b'{"question_id": "q1", "predicted_answer": "caf\xe9"}')
    assert "not UTF-8 (byte 0xe9 at offset" in check_answer_file(path, "q1", OPEN).reasons[0]
    path.write_text(json.dumps(record())[:40])
    assert "not valid JSON" in check_answer_file(path, "q1", OPEN).reasons[0]
    path.write_text("")
    assert "empty file" in check_answer_file(path, "q1", OPEN).reasons[0]
    path.write_text("[1, 2]")
    assert "expected a JSON object, got list" in check_answer_file(path, "q1", OPEN).reasons[0]
    path.write_text(json.dumps(record(raw="x" * (MAX_ANSWER_BYTES + 10))))
    reason = check_answer_file(path, "q1", OPEN).reasons[0]
    assert "larger than" in reason and str(MAX_ANSWER_BYTES) in reason
    path.write_text(json.dumps(record()))
    assert check_answer_file(path, "q1", OPEN).kind == "valid"
