"""The output checker: canonical names only, abbreviations refused with the fix, bounded reads."""

from __future__ import annotations

import json
import os

import pytest
from automedbench_classification import contract
from automedbench_classification.track import ClassificationTrack

TRACK = ClassificationTrack()
TASK = next(t for t in TRACK.tasks() if t.id == "classification/skin-lesion")


def check(tmp_path, payload: bytes | str | None):
    case = tmp_path / "case"
    case.mkdir(exist_ok=True)
    if payload is not None:
        data = payload.encode() if isinstance(payload, str) else payload
        (case / "prediction.json").write_bytes(data)
    return TRACK.check_case(TASK, "case", case, tmp_path)


def test_canonical_names_pass_case_insensitively(tmp_path):
    assert check(tmp_path, '{"label": "melanoma"}').valid
    assert check(tmp_path, '{"label": " Melanocytic_Nevi ", "probabilities": [0.1, 0.9]}').valid


def test_abbreviation_is_refused_in_one_line_with_the_fix(tmp_path):
    verdict = check(tmp_path, '{"label": "nv"}')
    assert not verdict.valid and len(verdict.reasons) == 1
    reason = verdict.reasons[0]
    assert "\n" not in reason and contract.ABBREVIATION in reason and "'melanocytic_nevi'" in reason


@pytest.mark.parametrize("payload, phrase", [
    (None, "prediction.json missing"),
    ('{"label": "naevus"}', contract.UNKNOWN_CLASS),
    ('["melanoma"]', contract.SHAPE),
    ('{"label": 4}', contract.SHAPE),
    ('{"label": "mel"', "not valid JSON"),
    (b'{"label": "\xff"}', "not UTF-8"),
    ('{"a": [[[["melanoma"]]]]}', "nested deeper"),
    ('{"label": "melanoma", "pad": "' + "x" * (contract.MAX_BYTES + 10) + '"}', "larger than"),
])
def test_bad_files_fail_with_a_fixed_phrase(tmp_path, payload, phrase):
    verdict = check(tmp_path, payload)
    assert not verdict.valid and phrase in verdict.reasons[0]


def test_links_and_fifos_are_not_followed(tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"label": "melanoma"}))
    case = tmp_path / "case"
    case.mkdir()
    (case / "prediction.json").symlink_to(target)
    verdict = TRACK.check_case(TASK, "case", case, tmp_path)
    assert not verdict.valid and "unreadable" in verdict.reasons[0]
    (case / "prediction.json").unlink()
    os.mkfifo(case / "prediction.json")
    verdict = TRACK.check_case(TASK, "case", case, tmp_path)  # must not block on the pipe
    assert not verdict.valid


def test_every_task_has_abbreviation_free_canonical_classes():
    for task in TRACK.tasks():
        classes, aliases = contract.task_labels(task.params)
        assert len(set(classes)) == len(classes) >= 2
        assert not set(aliases) & {c.lower() for c in classes}
        assert set(aliases.values()) <= set(classes)
