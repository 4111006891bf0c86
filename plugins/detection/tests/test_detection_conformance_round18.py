"""Held-out metric values for detection against the original scorer's definitions (round 18).

The original (`eval_det2d/det2d_scorer.py`), restated here in our own words as `original_map` / `original_micro`:
- a box's class is compared stripped and lower-cased (" rbc " is "RBC");
- per image, predictions in descending score (a stable sort: equal scores keep file order) take the unmatched
  reference with the highest IoU >= the threshold, the first in the file among equal IoUs (a strict `>`);
- per class, detections are pooled over the images in order and sorted stably by score; AP is the mean over
  r = 0, 0.01, ..., 1 of the highest precision at recall >= r;
- micro precision/recall/F1 count every predicted box (no score cut), precision 1 with no box, recall 1 with no
  reference.
Before this round: among references of equal IoU ours took the last (pycocotools' rule), so a symmetric pair of
integer boxes scored AP 0.505 where the original scores 1.0; micro values counted only boxes scored >= 0.5, so
correct boxes at score 0.3 read recall 0 where the original reads 1.0; and " rbc " was an unknown class, making
its case invalid (strict Task 0). The mean over classes is held at "classes with a reference" (the spec; the
original also averages predicted-only classes), so the generated sets below predict only referenced classes.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from automedbench.testing import evaluate_outputs, load_task, stage_task
from automedbench_detection.average_precision import Boxes, mean_average_precision
from automedbench_detection.contract import Meta, class_key, parse_prediction
from automedbench_detection.data.staged import read_truth
from automedbench_detection.metric import micro_prf

DEMO = "detection/demo"


# ---------------------------------------------------------------- the original's definitions, restated


def _iou(a: list[float], b: list[float]) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    if inter <= 0:
        return 0.0
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _greedy(preds: list[tuple], refs: list[list[float]], iou: float) -> list[int]:
    """TP flags of `preds` ((score, box)) in the stable score order; the first of equal best IoUs wins."""
    used: set[int] = set()
    flags = []
    for _, box in sorted(preds, key=lambda p: p[0], reverse=True):
        best, best_iou = None, 0.0
        for j, ref in enumerate(refs):
            if j in used:
                continue
            value = _iou(box, ref)
            if value >= iou and value > best_iou:
                best, best_iou = j, value
        if best is not None:
            used.add(best)
        flags.append(0 if best is None else 1)
    return flags


def original_map(preds: dict[int, list[tuple]], refs: dict[int, list[tuple]], iou: float = 0.5) -> float:
    """preds: image -> [(class, score, box)], refs: image -> [(class, box)]; images in key order."""
    classes = sorted({c for boxes in refs.values() for c, _ in boxes})
    aps = []
    for cls in classes:
        pooled, n_ref = [], 0
        for image in sorted(refs):
            mine = [(s, b) for c, s, b in preds.get(image, []) if c == cls]
            theirs = [b for c, b in refs[image] if c == cls]
            n_ref += len(theirs)
            ordered = sorted(mine, key=lambda p: p[0], reverse=True)
            pooled += [(s, f) for (s, _), f in zip(ordered, _greedy(mine, theirs, iou), strict=True)]
        pooled.sort(key=lambda d: d[0], reverse=True)
        tp = fp = 0
        curve = []
        for _, flag in pooled:
            tp, fp = tp + flag, fp + 1 - flag
            curve.append((tp / (tp + fp), tp / n_ref))
        aps.append(sum(max([p for p, r in curve if r >= k / 100] or [0.0]) for k in range(101)) / 101)
    return float(np.mean(aps)) if aps else 0.0


def original_micro(preds: dict[int, list[tuple]], refs: dict[int, list[tuple]], iou: float = 0.5) -> dict:
    tp = n_pred = n_ref = 0
    for image in sorted(refs):
        for cls in {c for c, _ in refs[image]} | {c for c, _, _ in preds.get(image, [])}:
            mine = [(s, b) for c, s, b in preds.get(image, []) if c == cls]
            tp += sum(_greedy(mine, [b for c, b in refs[image] if c == cls], iou))
        n_pred += len(preds.get(image, []))
        n_ref += len(refs[image])
    precision = tp / n_pred if n_pred else 1.0
    recall = tp / n_ref if n_ref else 1.0
    return {"precision": precision, "recall": recall,
            "f1": 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)}


def ours(preds: dict[int, list[tuple]], refs: dict[int, list[tuple]], n_cls: int, iou: float = 0.5):
    def table(rows):
        a = np.array(rows, dtype=float).reshape(-1, 7)
        return a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 3:7], a[:, 2]

    image, cls, box, score = table([(i, c, s, *b) for i in sorted(preds) for c, s, b in preds[i]])
    det = Boxes(image, cls, box, score)
    rimage, rcls, rbox, _ = table([(i, c, 0.0, *b) for i in sorted(refs) for c, b in refs[i]])
    result = mean_average_precision(det, Boxes(rimage, rcls, rbox), n_cls, iou)
    return result.mean, micro_prf(int(result.tp.sum()), len(det), len(rimage))


# ---------------------------------------------------------------- held-out cases


SYMMETRIC = [2.5, 0.0, 14.5, 10.0]  # IoU 95/145 with each of the two references below: an exact tie


@pytest.mark.parametrize(("refs", "expected"), [
    ([[0.0, 0.0, 12.0, 10.0], [5.0, 0.0, 17.0, 10.0]], 1.0),  # the tie takes the first; the exact box the second
    ([[5.0, 0.0, 17.0, 10.0], [0.0, 0.0, 12.0, 10.0]], 51 / 101),  # the first is the exact box's: it then misses
])
def test_equal_iou_takes_the_first_reference_as_the_original(refs, expected):
    preds = {0: [(0, 0.9, SYMMETRIC), (0, 0.8, [5.0, 0.0, 17.0, 10.0])]}
    truth = {0: [(0, b) for b in refs]}
    value, _ = ours(preds, truth, 1)
    assert original_map(preds, truth) == pytest.approx(expected)
    assert value == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_integer_boxes_with_ties_agree_with_the_original(seed):
    """Boxes on a coarse integer grid and scores in tenths: equal IoUs and equal scores everywhere."""
    rng = np.random.default_rng(1800 + seed)
    n_cls, refs, preds = 3, {}, {}
    for image in range(8):
        refs[image] = []
        for _ in range(int(rng.integers(0, 6))):
            x, y = (int(v) for v in rng.integers(0, 12, 2) * 4)
            w, h = (int(v) for v in rng.integers(2, 5, 2) * 4)
            refs[image].append((int(rng.integers(n_cls)), [x, y, x + w, y + h]))
        preds[image] = []
        for cls, box in refs[image]:
            for _ in range(int(rng.integers(0, 3))):  # copies shifted by whole steps: ties in IoU
                dx, dy = (int(v) for v in rng.integers(-1, 2, 2) * 2)
                preds[image].append((cls, round(float(rng.random()), 1), [box[0] + dx, box[1] + dy,
                                                                          box[2] + dx, box[3] + dy]))
        for _ in range(int(rng.integers(0, 3))):  # false positives in a referenced class
            x, y = (int(v) for v in rng.integers(0, 12, 2) * 4)
            preds[image].append((int(rng.integers(n_cls)), round(float(rng.random()), 1), [x, y, x + 8, y + 8]))
    present = {c for boxes in refs.values() for c, _ in boxes}
    preds = {i: [p for p in boxes if p[0] in present] for i, boxes in preds.items()}
    value, micro = ours(preds, refs, n_cls)
    assert value == pytest.approx(original_map(preds, refs), abs=1e-12)
    assert micro == pytest.approx(original_micro(preds, refs), abs=1e-12)


def test_single_image_single_box_and_empty_sides():
    one = {0: [(0, [0.0, 0.0, 4.0, 4.0])]}
    assert ours({0: [(0, 1.0, [0.0, 0.0, 4.0, 4.0])]}, one, 1)[0] == original_map(
        {0: [(0, 1.0, [0.0, 0.0, 4.0, 4.0])]}, one) == 1.0
    # a reference, no prediction at all: AP 0, precision 1 (nothing claimed), recall 0
    assert original_micro({0: []}, one) == {"precision": 1.0, "recall": 0.0, "f1": 0.0}
    assert micro_prf(0, 0, 1) == original_micro({0: []}, one)
    # predictions on an image without references: AP undefined (no class with a reference), recall 1, precision 0
    stray = {0: [(0, 0.5, [0.0, 0.0, 4.0, 4.0])]}
    assert original_micro(stray, {0: []}) == micro_prf(0, 1, 0) == {"precision": 0.0, "recall": 1.0, "f1": 0.0}


# ---------------------------------------------------------------- through `automedbench evaluate`


def _submit(staged, folder: Path, name, score: float) -> Path:
    """Every reference box predicted exactly at `score`, its class written as `name(class)`."""
    for case_id in staged.case_ids:
        truth = read_truth(staged.private / case_id)["boxes"]
        (folder / case_id).mkdir(parents=True, exist_ok=True)
        (folder / case_id / "prediction.json").write_text(json.dumps({"boxes": [
            {"class": name(b["class"]), "score": score, **{k: b[k] for k in ("x1", "y1", "x2", "y2")}}
            for b in truth]}))
    return folder


def test_class_names_are_compared_as_the_original_does(amb_data_root, tmp_path):
    """" rbc ", "WBC " and "platelets": the original strips and lower-cases both sides, so every box is scored
    (mAP 1.0, rated A); before, each case was invalid (unknown class) and the strict Task 0."""
    staged = stage_task(DEMO, amb_data_root)
    outputs = _submit(staged, tmp_path / "outputs", lambda c: f"  {c.lower()} " if len(c) > 3 else c.upper() + " ",
                      0.9)
    result = evaluate_outputs(DEMO, data_root=amb_data_root, work=tmp_path / "w", submission=outputs)
    assert result.task.strict == result.task.partial == pytest.approx(1.0)
    assert result.aggregate.rating == "A"


def test_micro_values_count_every_box_as_the_original(amb_data_root, tmp_path):
    """Every reference box found at score 0.3: the original's micro precision and recall are 1.0 (it has no
    score cut); the operating point (score >= 0.5) sees no box, which `micro_*_at_threshold` keeps."""
    staged = stage_task(DEMO, amb_data_root)
    outputs = _submit(staged, tmp_path / "outputs", lambda c: c, 0.3)
    result = evaluate_outputs(DEMO, data_root=amb_data_root, work=tmp_path / "w", submission=outputs)
    comps = result.task.components
    assert result.task.partial == pytest.approx(1.0)
    assert comps["micro_precision"] == comps["micro_recall"] == comps["micro_f1"] == pytest.approx(1.0)
    assert comps["micro_recall_at_threshold"] == 0.0 and comps["micro_precision_at_threshold"] == 1.0


# ---------------------------------------------------------------- the release tasks' parameters


@pytest.mark.parametrize(("task_id", "classes", "task_class"), [
    ("detection/vindr-cxr", 14, "abnormality"),
    ("detection/bccd", 3, None),
    ("detection/dentex", 4, None),
    ("detection/grazpedwri-dx", 8, None),
])
def test_release_task_parameters(task_id, classes, task_class):
    """mAP at IoU 0.5 (the original's config; its code default 0.4 is not used), the class lists, and names that
    stay distinct under the original's comparison (stripped, lower case)."""
    _, task = load_task(task_id)
    names = [str(c) for c in task.params["classes"]]
    assert float(task.params["iou_threshold"]) == 0.5
    assert len(names) == classes and task.params.get("task_class") == task_class
    assert len({class_key(n) for n in names} | ({class_key(task_class)} if task_class else set())) == \
        classes + (1 if task_class else 0)


def test_names_that_differ_only_in_case_keep_exact_matching(tmp_path):
    """A task (a third party's) whose names differ only in case: those keep exact matching, the others are read as
    the original reads them; through the checker (review 19: "MASS" and " Mass " were read as "mass", the exact
    name equal to their shared key, instead of being unknown)."""
    meta = Meta(width=100, height=100, classes=["Mass", "mass", "Nodule"])

    def parsed(name: str):
        path = tmp_path / "prediction.json"
        path.write_text(json.dumps({"boxes": [{"class": name, "score": 0.9, "x1": 1, "y1": 1, "x2": 9, "y2": 9}]}))
        return parse_prediction(path, meta)

    assert [int(parsed(n).cls[0]) for n in ("Mass", "mass", "Nodule", " NODULE ", "nodule")] == [0, 1, 2, 2, 2]
    for name in ("MASS", " Mass ", "mass ", "Mass\n"):
        assert not parsed(name).valid and "unknown class" in parsed(name).reasons[0], name
