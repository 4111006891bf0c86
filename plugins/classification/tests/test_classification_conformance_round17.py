"""Held-out file-contract cases for classification against the release (round 17).

The release (`eval_cls`, `acc_scorer.py` and `format_checker.py`, as third parties read them): the agent writes
`agents_outputs/predictions.csv` (`patient_id,label`) or `agents_outputs/<id>/prediction.json` `{"label": ...}`;
labels are case-insensitive; a CSV row takes precedence over the case's JSON, which is the fallback per id; a
later CSV row for an id overwrites an earlier one. Before this round only the per-case JSON was read: a
submission of one correct `predictions.csv` (the release's first form) had every case missing, Task 0, rated F.
Each case goes through `evaluate` (frozen copy, isolated evaluator, rating).
"""

from __future__ import annotations

import json

import pytest
from automedbench.testing import evaluate_frozen, evaluate_outputs, load_task, stage_task
from automedbench_classification import contract
from automedbench_classification.data.staged import read_label

TASK = "classification/demo"


@pytest.fixture(scope="module")
def truth(amb_data_root):
    staged = stage_task(TASK, amb_data_root)
    return {case_id: read_label(staged.private / case_id) for case_id in staged.case_ids}


def wrong(label: str) -> str:
    classes = load_task(TASK)[1].params["classes"]
    return classes[(classes.index(label) + 1) % len(classes)]


def write_csv(outputs, rows, header="patient_id,label", encoding="utf-8", newline="\n"):
    outputs.mkdir(parents=True, exist_ok=True)
    text = newline.join([header, *(f"{case},{label}" for case, label in rows)]) + newline
    (outputs / contract.CSV_FILE).write_bytes(text.encode(encoding))


def write_json(outputs, case_id, label):
    (outputs / case_id).mkdir(parents=True, exist_ok=True)
    (outputs / case_id / contract.PREDICTION_FILE).write_text(json.dumps({"label": label}))


def evaluate(amb_data_root, tmp_path, outputs):
    return evaluate_outputs(TASK, data_root=amb_data_root, work=tmp_path / "work", submission=outputs)


def test_a_correct_predictions_csv_scores_as_the_per_case_files(amb_data_root, tmp_path, truth):
    """Excel's way of writing it (a BOM, CRLF, upper case and spaces around cells): the release reads the labels
    case-insensitively; every case present and valid, Task 1.0, A, and the CSV is not an extra file."""
    outputs = tmp_path / "outputs"
    write_csv(outputs, [(f" {c} ", f" {label.upper()} ") for c, label in truth.items()], header="patient_id, label",
              encoding="utf-8-sig", newline="\r\n")
    result = evaluate(amb_data_root, tmp_path, outputs)
    assert all(v.present and v.valid for v in result.cases) and len(result.cases) == len(truth)
    evaluation = evaluate_frozen(TASK, outputs, data_root=amb_data_root, work=tmp_path / "frozen")
    assert evaluation.valid_cases == len(truth) and contract.CSV_FILE not in evaluation.extra_files
    assert result.task.partial == result.task.strict == pytest.approx(1.0)
    assert result.aggregate.rating == "A", result.aggregate.rating_reason


def test_csv_precedence_fallback_and_duplicates_as_the_release(amb_data_root, tmp_path, truth):
    """Case 0: CSV wrong, JSON right -> wrong (the CSV wins). Case 1: no CSV row, JSON right -> right (fallback).
    Case 2: a wrong row, then a right one -> right (the later row overwrites). Case 3: neither -> missing."""
    ids = list(truth)
    outputs = tmp_path / "outputs"
    rows = [(ids[0], wrong(truth[ids[0]])), (ids[2], wrong(truth[ids[2]])), (ids[2], truth[ids[2]])]
    rows += [(c, truth[c]) for c in ids[4:]]
    write_csv(outputs, rows)
    write_json(outputs, ids[0], truth[ids[0]])
    write_json(outputs, ids[1], truth[ids[1]])
    result = evaluate(amb_data_root, tmp_path, outputs)
    verdicts = {v.case_id: v for v in result.cases}
    assert not verdicts[ids[3]].present and verdicts[ids[1]].valid
    assert sum(v.present for v in result.cases) == sum(v.valid for v in result.cases) == len(ids) - 1
    per_case = {row["case_id"]: row for row in result.task.per_case}
    assert [per_case[c]["correct"] for c in ids[:4]] == [False, True, True, False]
    assert all(per_case[c]["correct"] for c in ids[4:])
    assert result.task.strict == 0.0 and result.aggregate.rating == "F"  # one case missing (held: see README)


@pytest.mark.parametrize("header, rows, phrase", [
    ("case_id,label", None, "header must name"),
    ("patient_id,label", [("{id}", "nv")], "is an abbreviation"),
    ("patient_id,label", [("{id}", "naevus")], contract.UNKNOWN_CLASS),
])
def test_a_csv_the_release_refuses_scores_nothing_here(amb_data_root, tmp_path, truth, header, rows, phrase):
    """A header without `patient_id` (the release finds no predictions), or labels it fails (an abbreviation, an
    unknown class): no case scores, though each case also has a correct JSON (a CSV row answers first)."""
    outputs = tmp_path / "outputs"
    write_csv(outputs, [(c, truth[c]) for c in truth] if rows is None else
              [(r[0].format(id=c), r[1]) for c in truth for r in rows], header=header)
    for case_id, label in truth.items():
        write_json(outputs, case_id, label)
    result = evaluate(amb_data_root, tmp_path, outputs)
    assert not any(v.valid for v in result.cases) and phrase in result.cases[0].reasons[0]
    assert result.task.partial == 0.0 and result.aggregate.rating == "F"


def test_a_linked_csv_is_not_followed(amb_data_root, tmp_path, truth):
    """A `predictions.csv` that is a symlink to correct answers elsewhere is refused at the freeze; every case
    it might answer is invalid rather than read through the link."""
    outputs = tmp_path / "outputs"
    elsewhere = tmp_path / "elsewhere"
    write_csv(elsewhere, list(truth.items()))
    outputs.mkdir()
    (outputs / contract.CSV_FILE).symlink_to(elsewhere / contract.CSV_FILE)
    result = evaluate(amb_data_root, tmp_path, outputs)
    assert result.task.partial == 0.0 and result.aggregate.rating == "F"


def test_parse_csv_bounds_and_encoding():
    """The parser's own refusals, one line each: size, encoding, a broken quote; rows without an id skipped."""
    big = b"patient_id,label\n" + b"x," + b"y" * contract.MAX_CSV_BYTES
    assert "larger than" in contract.parse_csv(big).problem
    assert "not UTF-8" in contract.parse_csv(b"patient_id,label\na,\xff\n").problem
    assert contract.parse_csv(b"patient_id,label\n,melanoma\na\nb,melanoma,extra\n").labels == {"b": "melanoma"}
