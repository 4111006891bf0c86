"""Class hedging (issue 22): mAP rewards the same box under every class; the components that expose it and
the rating cap, on hand-made boxes and on the demo's `class-hedge` baseline."""

from __future__ import annotations

import numpy as np
from automedbench.testing import evaluate_folder, registry
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


def test_cap_per_image_keeps_the_highest_scored_boxes_of_each_image():
    det = boxes([(0, 0, s, 0, 0, 1, 1) for s in (0.1, 0.9, 0.5)] + [(1, 0, 0.2, 0, 0, 1, 1)])
    capped = cap_per_image(det, limit=2)
    assert sorted(capped.score.tolist()) == [0.2, 0.5, 0.9]


def test_the_class_hedge_baseline_keeps_its_map_but_rates_c(tmp_path, amb_data_root):
    reg = registry()
    honest = evaluate_folder(reg, "detection/demo", None, "classical", amb_data_root, tmp_path / "honest")
    hedged = evaluate_folder(reg, "detection/demo", None, "class-hedge", amb_data_root, tmp_path / "hedged")
    assert hedged.task.strict >= honest.task.strict  # the paper's mAP rewards (or ignores) the repeats
    assert honest.task.components["cross_class_duplicate_share"] == 0.0
    assert abs(hedged.task.components["cross_class_duplicate_share"] - 2 / 3) < 1e-3
    assert honest.aggregate.rating == "A"
    assert hedged.aggregate.rating == "C" and "class hedging" in hedged.aggregate.rating_reason
