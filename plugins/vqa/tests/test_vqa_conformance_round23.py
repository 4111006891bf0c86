"""Option lists the answer contract did not foresee, against the original VQA stagers, checker and scorer (round 23).

The original (`eval_vqa/stage_hf_datasets.py::_stage_medframeqa`, `stage_data.py::_normalize_options`,
`answer_utils.py`, `format_checker.py`, `vqa_scorer.py`), as read for this round:
- MedFrameQA: every option of the list is staged, lettered A, B, ... past E when the list is longer; the gold is
  the dataset's letter. Its checker takes only A-E as a label and its scorer reads none past E, so a question whose
  gold is F can never be answered there. Ours cut the list to A-E: the sixth option was dropped and a gold "F"
  failed the whole staging. Now every option is staged and "F" naming a sixth option is valid and scored (README,
  difference 5: a departure, since with options dealt in a secret order any question's gold could land on F).
- MedXpertQA: a mapping of options is staged as given, a list longer than five refuses the staging (ours now
  letters it on; its release has five). MMMU (no original code): questions with more than five options were left
  out; now staged, lettered on (tests/test_vqa_release_sets.py).
- Twin option texts: both staged, the gold letter decides (matched already: the text check compares texts, the
  score compares letters). A letter A-E naming no option: valid, wrong (round 19, unchanged). No options at all:
  the original stages an option-less question; ours refuses the staging with the row named (README).
"""

from __future__ import annotations

import json

import pytest
from automedbench.api import UserError
from automedbench.testing import evaluate_outputs
from automedbench_vqa.contract import check_record
from automedbench_vqa.data.records import read_private, read_question

pytest.importorskip("pyarrow")

SIX = ["cyst", "abscess", "haemangioma", "metastasis", "lymphoma", "adenoma"]


def _write(outputs, qid: str, label: str, text: str = "") -> None:
    record = {"question_id": qid, "predicted_label": label, "predicted_answer": text, "raw_model_output": label,
              "model_name": "held-out", "runtime_s": 0.5}
    (outputs / qid).mkdir(parents=True)
    (outputs / qid / "answer.json").write_text(json.dumps(record), "utf-8")


def _by_source(staged) -> dict[str, str]:
    return {read_private(staged.private, q)["source_id"]: q for q in staged.case_ids}


def test_six_options_are_all_staged_and_a_gold_f_is_answerable(tmp_path, stage_medframeqa):
    """Three six-option questions (gold F, gold A, gold given as the sixth option's text) and one five-option one.
    Before: the staging failed ("answer 'F' is neither an option letter nor an option's text"). Now all six options
    are staged (in the secret order since round 24), and the right letters (F written "F" and "f") score 1.0, all
    valid."""
    rows = [{"options": SIX, "answer": "F"}, {"options": SIX, "answer": "A"},
            {"options": [f"F. {t}" if k == 5 else t for k, t in enumerate(SIX)], "answer": "adenoma"},
            {"options": SIX[:5], "answer": "C"}]
    spec, staged = stage_medframeqa(tmp_path, rows)
    ids = _by_source(staged)
    for source, text in (("v0", "adenoma"), ("v1", "cyst"), ("v2", "adenoma")):
        question = read_question(staged.public / ids[source])
        # the sixth kept, its "F. " removed; dealt in the secret order since round 24, the gold following its text
        assert list(question["options"]) == list("ABCDEF") and sorted(question["options"].values()) == sorted(SIX)
        assert question["options"][read_private(staged.private, ids[source])["answer_label"]] == text
    outputs = tmp_path / "outputs"
    for qid in staged.case_ids:
        gold = read_private(staged.private, qid)
        label = gold["answer_label"]
        _write(outputs, qid, label.lower() if gold["source_id"] == "v2" else label, gold["answer_text"])
    result = evaluate_outputs(spec.id, data_root=tmp_path / "data", work=tmp_path / "w", submission=outputs)
    assert all(c.valid for c in result.cases), [c.reasons for c in result.cases if not c.valid]
    assert result.task.strict == pytest.approx(1.0)


def test_letters_past_e_read_as_the_question_has_them(tmp_path):
    """On a six-option question: "F" is an answer (right or wrong), "G" names no option (invalid, as a label past
    E is in the original), "I think F" reads no letter (a letter past E is read only as the whole label). On a
    five-option question "F" stays invalid (the original's rule)."""
    six = {"question_id": "q", "mode": "multiple_choice", "options": dict(zip("ABCDEF", SIX, strict=True))}
    five = {**six, "options": dict(zip("ABCDE", SIX, strict=False))}

    def verdict(question, label):
        record = {"question_id": "q", "predicted_label": label, "predicted_answer": "", "raw_model_output": label,
                  "model_name": "m", "runtime_s": 1}
        return check_record(record, "q", question).kind

    assert [verdict(six, x) for x in ("F", " f ", "(B)", "G", "I think F")] == [
        "valid", "valid", "valid", "invalid", "invalid"]
    assert [verdict(five, x) for x in ("F", "E")] == ["invalid", "valid"]


def test_a_wrong_letter_and_twin_texts_score_as_the_original(tmp_path, stage_medframeqa):
    """Twin option texts ("cyst" at A and at C, gold C) and a five-option question answered "F": the twin's text
    under the wrong letter is valid and wrong, under the right letter valid and right (the original compares the
    text to its own option, then the letters); "F" on five options is invalid, scored 0. Task 1/3 either way."""
    twins = ["cyst", "abscess", "cyst", "lymphoma"]
    rows = [{"options": twins, "answer": "C"}, {"options": twins, "answer": "C"}, {"options": SIX[:5], "answer": "B"}]
    spec, staged = stage_medframeqa(tmp_path, rows)
    ids = _by_source(staged)
    assert read_question(staged.public / ids["v0"])["options"] == dict(zip("ABCD", twins, strict=True))  # not dealt
    outputs = tmp_path / "outputs"
    _write(outputs, ids["v0"], "A", "cyst")
    _write(outputs, ids["v1"], "C", "cyst")
    _write(outputs, ids["v2"], "F")
    result = evaluate_outputs(spec.id, data_root=tmp_path / "data", work=tmp_path / "w", submission=outputs)
    cases = {c.case_id: c for c in result.cases}
    assert [cases[ids[s]].valid for s in ("v0", "v1", "v2")] == [True, True, False]
    assert result.task.partial == pytest.approx(1 / 3)


def test_an_option_list_longer_than_the_alphabet_or_empty_refuses_the_staging(tmp_path, stage_medframeqa):
    with pytest.raises(UserError, match="27 options"):
        stage_medframeqa(tmp_path / "a", [{"options": [f"o{k}" for k in range(27)], "answer": "A"}])
    with pytest.raises(UserError, match="medframeqa row 0: options must be lettered"):
        stage_medframeqa(tmp_path / "b", [{"options": [], "answer": "A"}])
