"""Legal but unusual classification submissions against the release (round 23), through `automedbench evaluate`.

The release (`eval_cls`; tracks-full-research §3.1 and §3.3), restated as `release_task`: a `predictions.csv` whose
header names `patient_id` and `label` answers ahead of a case's `prediction.json` {"label": ...}; a label is its
class when equal to one of the task's canonical names up to case (and the spaces around it, round 17); anything
else (another spelling such as "Melanocytic Nevi" or "melanocytic-nevi", a class index "5" or "5.0", a number in
the JSON) is no class, so that case is wrong; balanced accuracy over the reference's classes, a missing or unusable
prediction wrong in its true class. Other columns (a probability per class, a confidence) and other JSON keys
(probabilities that do not sum to 1) are not read. Round 17 pinned the BOM, CRLF, case, precedence and duplicate
rows. These held before this round (no difference found): the test pins them.
"""

from __future__ import annotations

import json

import pytest
from automedbench.testing import evaluate_outputs, load_task, stage_task
from automedbench_classification import contract
from automedbench_classification.data.staged import read_label

TASK = "classification/demo"


@pytest.fixture(scope="module")
def truth(amb_data_root):
    staged = stage_task(TASK, amb_data_root)
    return {case_id: read_label(staged.private / case_id) for case_id in staged.case_ids}


def _classes() -> list[str]:
    return [str(c) for c in load_task(TASK)[1].params["classes"]]


def release_label(raw: object) -> str | None:
    if not isinstance(raw, str):
        return None
    return {c.lower(): c for c in _classes()}.get(raw.strip().lower())


def release_task(truth: dict[str, str], answers: dict[str, object]) -> float:
    """Balanced accuracy as the release computes it from each case's raw answer (None: no answer)."""
    recalls = []
    for label in dict.fromkeys(truth.values()):
        cases = [c for c, t in truth.items() if t == label]
        recalls.append(sum(release_label(answers.get(c)) == label for c in cases) / len(cases))
    return sum(recalls) / len(recalls)


def _probabilities(label: str, total: float) -> dict[str, float]:
    """A probability per class, the highest on `label`, summing to `total` (not 1 when a model's logits leak)."""
    others = [c for c in _classes() if c != label]
    share = total * 0.4 / len(others)
    return {label: total * 0.6, **{c: share for c in others}}


def _csv(outputs, truth: dict[str, str], spell) -> dict[str, object]:
    """`predictions.csv` with the label between probability columns and a confidence column; the raw answers."""
    classes = _classes()
    lines = [",".join(["label", *(f"p_{c}" for c in classes), "confidence", "patient_id"])]
    answers = {}
    for case_id, label in truth.items():
        probs = _probabilities(label, 1.0)
        answers[case_id] = spell(label)
        lines.append(",".join([str(answers[case_id]), *(f"{probs[c]:.4f}" for c in classes), "0.6", case_id]))
    outputs.mkdir(parents=True)
    (outputs / contract.CSV_FILE).write_text("\n".join(lines) + "\n", "utf-8")
    return answers


def _jsons(outputs, truth: dict[str, str], spell) -> dict[str, object]:
    answers = {}
    for case_id, label in truth.items():
        answers[case_id] = spell(label)
        (outputs / case_id).mkdir(parents=True)
        doc = {"label": answers[case_id], "probabilities": _probabilities(label, 1.7), "model": "vit"}
        (outputs / case_id / contract.PREDICTION_FILE).write_text(json.dumps(doc), "utf-8")
    return answers


SPELLINGS = {  # name -> how the agent wrote each case's (true) class
    "canonical": lambda label: label,
    "title case with spaces": lambda label: label.replace("_", " ").title(),
    "hyphens": lambda label: label.replace("_", "-"),
    "class index": lambda label: str(_classes().index(label)),
    "class index as a float": lambda label: f"{_classes().index(label)}.0",
}


@pytest.mark.parametrize("form", ["csv", "json"])
@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_unusual_spellings_and_extra_fields_score_as_the_release(amb_data_root, tmp_path, truth, form, spelling):
    outputs = tmp_path / "outputs"
    answers = (_csv if form == "csv" else _jsons)(outputs, truth, SPELLINGS[spelling])
    expected = release_task(truth, answers)
    result = evaluate_outputs(TASK, data_root=amb_data_root, work=tmp_path / "w", submission=outputs)
    valid = {c.case_id: c.valid for c in result.cases}
    assert valid == {c: release_label(a) is not None for c, a in answers.items()}
    assert result.task.partial == pytest.approx(expected, abs=1e-9)
    if spelling == "canonical":
        assert expected == 1.0
    if spelling == "title case with spaces":  # one-word classes still read, the others not
        assert 0 < sum(valid.values()) < len(valid)


def test_a_number_as_the_json_label_and_probability_columns_alone(amb_data_root, tmp_path, truth):
    """{"label": 5} is no class (the release compares strings); a CSV of a probability per class with no label
    column answers nothing and, answering first, leaves every case unscored though each has a right JSON."""
    ids = list(truth)
    outputs = tmp_path / "outputs"
    _jsons(outputs, truth, lambda label: label)
    (outputs / ids[0] / contract.PREDICTION_FILE).write_text(json.dumps({"label": 5}), "utf-8")
    result = evaluate_outputs(TASK, data_root=amb_data_root, work=tmp_path / "w1", submission=outputs)
    assert [c.case_id for c in result.cases if not c.valid] == [ids[0]]
    assert result.task.partial == pytest.approx(release_task(truth, {**truth, ids[0]: 5}))
    header = ",".join(["patient_id", *(f"p_{c}" for c in _classes())])
    (outputs / contract.CSV_FILE).write_text(header + "\n" + "\n".join(f"{c},0.5" for c in ids) + "\n", "utf-8")
    result = evaluate_outputs(TASK, data_root=amb_data_root, work=tmp_path / "w2", submission=outputs)
    assert not any(c.valid for c in result.cases) and result.task.partial == 0.0
