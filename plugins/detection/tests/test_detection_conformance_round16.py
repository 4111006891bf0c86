"""Held-out file-contract cases for detection against the original (round 16).

The original's VinDr-CXR task (`eval_det2d`) scores mAP@0.5 of one class "abnormality" that matches any class:
a box's `class` must be a non-empty string, and whatever it says, the box counts for the one class. Before this
round a VinDr-CXR box named outside the 14 `meta.json` names (a model's own label, e.g. "Nodule" for "Nodule/Mass")
made its case invalid, so the strict Task was 0 where the original scores the boxes. Tasks that score per class
(BCCD, DENTEX, GRAZPEDWRI-DX) keep refusing an unknown name: there a name decides which class a box is scored in.

The original's box schema makes `score` optional (1.0 when absent). Before this round a box without a score made
its case invalid (strict Task 0); now it counts as 1.0, ties ranked by case id then box order (the original's
stable sort over images read in order), and the count is kept (`unscored_boxes`) for the E5 detector.
"""

from __future__ import annotations

import json
from pathlib import Path

import detection_layouts as layouts
import pytest
from automedbench.testing import evaluate_frozen, load_task, stage_from_folder
from automedbench_detection.contract import Meta, parse_prediction
from automedbench_detection.data.staged import read_truth

META = Meta(64, 64, ["RBC", "WBC", "Platelets"])


def _write(folder: Path, case_id: str, boxes: list[dict]) -> None:
    (folder / case_id).mkdir(parents=True, exist_ok=True)
    (folder / case_id / "prediction.json").write_text(json.dumps({"boxes": boxes}))


def _submission(staged, folder: Path, name) -> Path:
    """Every reference box predicted exactly, its class replaced by `name(reference class)`."""
    for case_id in staged.case_ids:
        truth = read_truth(staged.private / case_id)["boxes"]
        _write(folder, case_id, [{"class": name(b["class"]), "score": 0.9,
                                  **{k: b[k] for k in ("x1", "y1", "x2", "y2")}} for b in truth])
    return folder


@pytest.fixture(scope="module")
def vindr(tmp_path_factory):
    root = tmp_path_factory.mktemp("vindr")
    track, task = load_task("detection/vindr-cxr")
    download = layouts.vindr(root / "download", positives=10, negatives=3, kaggle=True, png=True, varied=True)
    stage_from_folder(track, task, root / "data", download)
    return root


@pytest.mark.parametrize("naming", ["exact class", "abnormality", "free-form name"])
def test_vindr_scores_any_class_name_as_the_one_task_class(vindr, tmp_path, naming):
    """The original: every box, whatever its name, is an "abnormality". Perfect boxes score mAP 1.0 under any
    naming, and the case is valid (before: "free-form name" was invalid in every case, strict Task 0)."""
    from automedbench.testing import stage_task

    staged = stage_task("detection/vindr-cxr", vindr / "data")
    name = {"exact class": lambda c: c, "abnormality": lambda c: "abnormality",
            "free-form name": lambda c: "suspicious " + c.split("/")[0].lower()}[naming]
    outputs = _submission(staged, tmp_path / "outputs", name)
    evaluation = evaluate_frozen("detection/vindr-cxr", outputs, data_root=vindr / "data", work=tmp_path / "w")
    assert all(c.valid for c in evaluation.cases), [c.reasons for c in evaluation.cases if not c.valid]
    assert evaluation.metric.value == pytest.approx(1.0)
    assert evaluation.metric.components["ap_abnormality"] == pytest.approx(1.0)


def test_vindr_still_refuses_what_the_original_refuses(tmp_path):
    """An empty or non-string class is not a box in the original either (its schema: a non-empty string)."""
    for bad in ("", "   ", None, 3):
        _write(tmp_path, "c", [{"class": bad, "score": 0.5, "x1": 1, "y1": 1, "x2": 9, "y2": 9}])
        parsed = parse_prediction(tmp_path / "c" / "prediction.json", META, ("abnormality",), "abnormality")
        assert not parsed.valid, bad


def test_a_free_form_name_counts_for_the_task_class_only(tmp_path):
    """Read as the task class (index after the named classes), never as one of the named classes; per-class AP
    stays on the exact names."""
    _write(tmp_path, "c", [{"class": "Nodule", "score": 0.5, "x1": 1, "y1": 1, "x2": 9, "y2": 9},
                           {"class": "WBC", "score": 0.5, "x1": 1, "y1": 1, "x2": 9, "y2": 9}])
    parsed = parse_prediction(tmp_path / "c" / "prediction.json", META, ("abnormality",), "abnormality")
    assert parsed.valid and parsed.cls.tolist() == [3, 1]


def test_per_class_tasks_keep_refusing_unknown_names(tmp_path):
    """Without a task class (BCCD and the other per-class tasks) a name decides the class: unknown is refused."""
    _write(tmp_path, "c", [{"class": "white cell", "score": 0.5, "x1": 1, "y1": 1, "x2": 9, "y2": 9}])
    parsed = parse_prediction(tmp_path / "c" / "prediction.json", META)
    assert not parsed.valid and "unknown class" in parsed.reasons[0]


@pytest.mark.parametrize("task_id", ["detection/vindr-cxr", "detection/bccd"])
def test_a_box_without_a_score_counts_as_one(vindr, tmp_path, task_id):
    """The same boxes with no `score` key and with `score: 1.0` score the same Task; the case is valid."""
    from automedbench.testing import stage_task

    if task_id == "detection/bccd":
        root = tmp_path / "bccd"
        track, task = load_task(task_id)
        stage_from_folder(track, task, root / "data", layouts.voc(root / "download", count=80, split=76, varied=True))
    else:
        root = vindr
    staged = stage_task(task_id, root / "data")
    values = []
    for scored in (True, False):
        outputs = tmp_path / f"outputs-{scored}"
        for k, case_id in enumerate(staged.case_ids):
            truth = read_truth(staged.private / case_id)["boxes"]
            boxes = [{"class": b["class"] if task_id.endswith("bccd") else "abnormality",
                      **{c: b[c] for c in ("x1", "y1", "x2", "y2")}} for b in truth]
            if k % 2:  # a false positive in every other image, so the ranking matters
                boxes.append({"class": boxes[0]["class"] if boxes else "abnormality",
                              "x1": 0.0, "y1": 0.0, "x2": 3.0, "y2": 3.0})
            if scored:
                boxes = [{**b, "score": 1.0} for b in boxes]
            _write(outputs, case_id, boxes)
        evaluation = evaluate_frozen(task_id, outputs, data_root=root / "data", work=tmp_path / f"w-{scored}")
        assert all(c.valid for c in evaluation.cases), [c.reasons for c in evaluation.cases if not c.valid]
        values.append((evaluation.metric.value, evaluation.metric.components["unscored_boxes"]))
    (with_scores, none_unscored), (without, unscored) = values
    assert without == pytest.approx(with_scores) and 0.0 < without < 1.0
    assert none_unscored == 0.0 and unscored > 0


def test_a_score_outside_the_range_is_still_refused(tmp_path):
    for bad in (1.5, -0.1, "0.9", True, None):
        _write(tmp_path, "c", [{"class": "RBC", "score": bad, "x1": 1, "y1": 1, "x2": 9, "y2": 9}])
        assert not parse_prediction(tmp_path / "c" / "prediction.json", META).valid, bad
