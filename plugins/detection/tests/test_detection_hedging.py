"""Class hedging (issue 22): mAP rewards the same box under every class; the components that expose it and
the rating cap, on hand-made boxes and on the demo's `class-hedge` baseline."""

from __future__ import annotations

import numpy as np
from automedbench.testing import evaluate_outputs
from automedbench_detection.average_precision import Boxes
from automedbench_detection.hedging import cap_per_image, cross_class_duplicates


def boxes(rows):
    """rows: (image, class, score, x1, y1, x2, y2)."""
    a = np.array(rows, dtype=np.float64).reshape(-1, 7)
    return Boxes(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 3:7], a[:, 2])


def test_cross_class_duplicates_count_the_lower_scored_repeats_only():
    det = boxes([(0, 0, 0.9, 0, 0, 10, 10),     # kept: the first of its object
                 (0, 1, 0.09, 0, 0, 10, 10),    # the same box under class 1: a duplicate
                 (0, 2, 0.09, 0, 0, 10, 10.5),  # class 2, IoU 0.95: a duplicate
                 (0, 0, 0.8, 0, 0, 10, 10),     # same class: per-class NMS's business, not hedging
                 (0, 1, 0.7, 20, 20, 30, 30),   # another object
                 (1, 1, 0.5, 0, 0, 10, 10)])    # another image
    assert cross_class_duplicates(det) == 2
    assert cross_class_duplicates(boxes([])) == 0


def _all_pairs(det: Boxes, iou: float) -> int:
    """The count from the whole pairwise matrix of each image (what the blocked version must equal)."""
    from automedbench_detection.hedging import _iou

    count = 0
    for image in np.unique(det.image):
        idx = np.flatnonzero(det.image == image)
        order = idx[np.lexsort((idx, -det.score[idx]))]
        close = _iou(det.box[order], det.box[order]) >= iou
        other = det.cls[order][:, None] != det.cls[order][None, :]
        count += int(np.sum(np.any(close & other & np.tri(len(order), k=-1, dtype=bool), axis=1)))
    return count


def test_blocked_duplicate_count_equals_the_whole_matrix():
    """Near-copies, exact copies and tied scores over several images and block boundaries, at two IoUs."""
    rng = np.random.default_rng(5)
    for _ in range(12):
        n = int(rng.integers(1, 700))
        corner = rng.uniform(0, 100, (n, 2))
        box = np.hstack([corner, corner + rng.uniform(1, 60, (n, 2))])
        box = np.vstack([box, box[: n // 2] + rng.uniform(-1.2, 1.2, (n // 2, 4)), box[: n // 4]])
        box[:, 2:] = np.maximum(box[:, 2:], box[:, :2] + 0.5)
        m = len(box)
        det = Boxes(rng.integers(0, 3, m), rng.integers(0, 3, m), box, rng.choice([0.2, 0.5, 0.9], m))
        for iou in (0.9, 0.5):
            assert cross_class_duplicates(det, iou) == _all_pairs(det, iou)


def test_cap_per_image_keeps_the_highest_scored_boxes_of_each_image():
    det = boxes([(0, 0, s, 0, 0, 1, 1) for s in (0.1, 0.9, 0.5)] + [(1, 0, 0.2, 0, 0, 1, 1)])
    capped = cap_per_image(det, limit=2)
    assert sorted(capped.score.tolist()) == [0.2, 0.5, 0.9]


def test_the_class_hedge_baseline_keeps_its_map_but_rates_c(tmp_path, amb_data_root):
    honest = evaluate_outputs("detection/demo", baseline="classical", data_root=amb_data_root, work=tmp_path / "honest")
    hedged = evaluate_outputs("detection/demo", baseline="class-hedge", data_root=amb_data_root,
                              work=tmp_path / "hedged")
    assert hedged.task.strict >= honest.task.strict  # the paper's mAP rewards (or ignores) the repeats
    assert honest.task.components["cross_class_duplicate_share"] == 0.0
    assert abs(hedged.task.components["cross_class_duplicate_share"] - 2 / 3) < 1e-3
    assert honest.aggregate.rating == "A"
    assert hedged.aggregate.rating == "C" and "class hedging" in hedged.aggregate.rating_reason


def test_copies_moved_or_resized_below_the_duplicate_iou_still_count_when_they_match_one_object():
    """Wrong-class copies shrunk a few per cent (IoU 0.87 and 0.74 with the original box) all still match the
    ground truth at the metric's 0.5, so mAP credits every class: before, they counted 0 duplicates (C -> B on
    the demo, red team round 8). Two boxes on one ground-truth object under two classes are one hedge."""
    det = boxes([(0, 0, 0.9, 0, 0, 100, 100),      # the object, class 0
                 (0, 1, 0.1, 3.5, 3.5, 96.5, 96.5),  # class 1, shrunk: IoU 0.865 with it
                 (0, 2, 0.1, 7, 7, 93, 93),          # class 2, shrunk more: IoU 0.74
                 (0, 1, 0.8, 200, 200, 260, 260),    # another object of class 1, alone on its truth
                 (0, 2, 0.7, 150, 0, 190, 40)])      # a box on no truth at all
    truth = boxes([(0, 0, 1.0, 0, 0, 100, 100), (0, 1, 1.0, 200, 200, 260, 260)])
    assert cross_class_duplicates(det) == 0  # no pair reaches the duplicate IoU
    assert cross_class_duplicates(det, gt=truth, match_iou=0.5) == 2
    same = boxes([(0, 0, 0.9, 0, 0, 100, 100), (0, 0, 0.5, 5, 5, 95, 95)])  # one class twice: not hedging
    assert cross_class_duplicates(same, gt=truth, match_iou=0.5) == 0


def test_a_shrunk_hedge_through_the_evaluator_is_held_at_c(tmp_path, amb_data_root):
    """The demo's class-hedge baseline with each wrong-class copy shrunk 3.5 % a side per copy: same mAP,
    still rated C."""
    import json

    exact = evaluate_outputs("detection/demo", baseline="class-hedge", data_root=amb_data_root, work=tmp_path / "exact")
    sub = tmp_path / "shrunk"
    for path in sorted((tmp_path / "exact" / "baseline").glob("*/prediction.json")):
        data = json.loads(path.read_text())
        seen: dict[tuple, int] = {}
        for box in data["boxes"]:
            key = (box["x1"], box["y1"], box["x2"], box["y2"])
            k = seen[key] = seen.get(key, -1) + 1  # 0 for the first copy of a box, then 1, 2, ...
            w, h = box["x2"] - box["x1"], box["y2"] - box["y1"]
            box.update(x1=key[0] + 0.035 * k * w, x2=key[2] - 0.035 * k * w,
                       y1=key[1] + 0.035 * k * h, y2=key[3] - 0.035 * k * h)
        (sub / path.parent.name).mkdir(parents=True)
        (sub / path.parent.name / "prediction.json").write_text(json.dumps(data))
    shrunk = evaluate_outputs("detection/demo", submission=sub, data_root=amb_data_root, work=tmp_path / "shrunk-eval")
    assert abs(shrunk.task.strict - exact.task.strict) < 0.02  # the hedge keeps its mAP
    assert shrunk.task.components["cross_class_duplicate_share"] > 0.5
    assert shrunk.aggregate.rating == "C" and "class hedging" in shrunk.aggregate.rating_reason
