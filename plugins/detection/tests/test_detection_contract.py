"""The prediction.json checker: every contract rule gives a per-case reason; bounded parsing."""

from __future__ import annotations

import json

import pytest
from automedbench_detection import contract
from automedbench_detection import reasons as phrase
from automedbench_detection.contract import Meta, parse_prediction

META = Meta(width=200, height=100, classes=["RBC", "WBC", "Platelets"])


def write(tmp_path, doc, raw=None):
    path = tmp_path / "prediction.json"
    path.write_bytes(raw if raw is not None else json.dumps(doc).encode())
    return path


def box(**kw):
    return {"class": "RBC", "score": 0.9, "x1": 10, "y1": 20, "x2": 50, "y2": 60, **kw}


def reasons(tmp_path, doc=None, raw=None, extra=()):
    return parse_prediction(write(tmp_path, doc, raw), META, extra).reasons


def test_valid_and_empty(tmp_path):
    parsed = parse_prediction(write(tmp_path, {"boxes": [box(), box(**{"class": "WBC", "score": 0})]}), META)
    assert parsed.valid and parsed.cls.tolist() == [0, 1] and parsed.box.shape == (2, 4)
    assert parse_prediction(write(tmp_path, {"boxes": []}), META).valid


@pytest.mark.parametrize(("bad", "phrase"), [
    (box(**{"class": "neutrophil"}), phrase.UNKNOWN_CLASS),  # "rbc" is RBC, as the original reads it (round 18)
    (box(score=1.5), phrase.BAD_SCORE),
    (box(score=True), phrase.BAD_SCORE),
    (box(x2=5), "x1 < x2"),
    (box(y1=70), "y1 < y2"),
    (box(x2=250), phrase.OUTSIDE),
    (box(x1=-1), phrase.OUTSIDE),
    (box(y2="60"), "y2 missing or not a finite number"),
    (box(x1=None), "x1 missing"),
])
def test_each_rule_gives_a_reason(tmp_path, bad, phrase):
    found = reasons(tmp_path, {"boxes": [box(), bad]})
    assert len(found) == 1 and found[0].startswith("box 1:") and phrase in found[0]


def test_non_finite_values_are_refused(tmp_path):
    found = reasons(tmp_path, raw=b'{"boxes": [{"class": "RBC", "score": 0.5, "x1": NaN, "y1": 0, "x2": 5, "y2": 5}]}')
    assert "x1 missing or not a finite number" in found[0]


def test_swapped_coordinates_get_a_hint(tmp_path):
    # on a 200x100 image, a box at x 120-180 written as y is outside, and fits once swapped
    found = reasons(tmp_path, {"boxes": [box(x1=10, x2=60, y1=120, y2=180)]})
    assert phrase.OUTSIDE in found[0] and phrase.SWAP_HINT in found[0]


def test_structure_size_and_depth(tmp_path):
    assert "must be an object" in reasons(tmp_path, [box()])[0]
    assert "must be an object" in reasons(tmp_path, {"detections": []})[0]
    assert "not valid JSON" in reasons(tmp_path, raw=b'{"boxes": [')[0]
    assert "not UTF-8" in reasons(tmp_path, raw=b'{"boxes": "\xff"}')[0]
    assert "nested deeper" in reasons(tmp_path, raw=b'{"boxes": [' + b"[" * 100000 + b"]" * 100000 + b"]}")[0]
    assert "larger than" in reasons(tmp_path, raw=b" " * (contract.MAX_BYTES + 1))[0]
    many = {"boxes": [box()] * (contract.MAX_BOXES + 1)}
    assert "at most" in reasons(tmp_path, many)[0]


def test_brackets_inside_strings_do_not_count_as_depth():
    assert contract.json_depth(b'{"boxes": [{"class": "[[[[[[[[[["}]}') == 3


def test_reasons_are_capped_with_a_total(tmp_path):
    found = reasons(tmp_path, {"boxes": [box(score=2)] * 40})
    assert len(found) == contract.MAX_REASONS + 1 and "40 of 40 boxes invalid" in found[-1]


def test_task_class_is_accepted_only_when_the_task_has_one(tmp_path):
    doc = {"boxes": [box(**{"class": "abnormality"})]}
    assert reasons(tmp_path, doc)
    parsed = parse_prediction(write(tmp_path, doc), META, ("abnormality",))
    assert parsed.valid and parsed.cls.tolist() == [3]


def test_missing_file(tmp_path):
    assert parse_prediction(tmp_path / "prediction.json", META).reasons == ["prediction.json missing"]
