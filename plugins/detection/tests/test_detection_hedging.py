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
