"""mAP@0.5: pycocotools as the oracle on generated sets, hand-computed cases for every rule."""

from __future__ import annotations

import numpy as np
import pytest
from automedbench_detection.average_precision import RECALL_POINTS, Boxes, class_ap, match, mean_average_precision
from automedbench_detection.comparison import coco_per_class, generated_set
from automedbench_detection.metric import micro_prf

pytest.importorskip("pycocotools")


def boxes(rows, scores=None):
    """rows: (image, class, x1, y1, x2, y2)."""
    a = np.array(rows, dtype=float).reshape(-1, 6)
    return Boxes(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2:],
                 None if scores is None else np.array(scores, dtype=float))


@pytest.mark.parametrize("seed", range(6))
def test_agrees_with_pycocotools(seed):
    det, gt = generated_set(seed)
    ours = mean_average_precision(det, gt, 3).per_class
    oracle = coco_per_class(det, gt, 40, 3, recall_points=RECALL_POINTS)
    assert np.array_equal(np.isnan(ours), np.isnan(oracle))
    assert np.nanmax(np.abs(ours - oracle)) < 1e-9
    assert 0.1 < np.nanmean(ours) < 0.95  # a set that exercises both hits and misses


@pytest.mark.parametrize("seed", range(3))
def test_agrees_with_pycocotools_on_tied_scores_and_crowded_images(seed):
    # scores rounded to one decimal: many ties, broken by (image order, box index) in both
    det, gt = generated_set(100 + seed, n_img=12, n_cls=4, gt_per=(20, 60), tied=True, extra_fp=30)
    assert len(det) / 12 > 40  # more than COCO's default 100 per image is tested by maxDets below
    ours = mean_average_precision(det, gt, 4).per_class
    oracle = coco_per_class(det, gt, 12, 4, recall_points=RECALL_POINTS)
    assert np.nanmax(np.abs(ours - oracle)) < 1e-9


def test_more_than_a_hundred_detections_per_image_are_all_counted():
    det, gt = generated_set(7, n_img=3, n_cls=1, gt_per=(150, 160), dup=0.0, extra_fp=0)
    assert np.bincount(det.image).min() > 100
    ours = mean_average_precision(det, gt, 1).mean
    assert abs(ours - coco_per_class(det, gt, 3, 1, recall_points=RECALL_POINTS)[0]) < 1e-9
    assert ours > 0.7


def test_hand_computed_ap():
    # two references; detections: 0.9 hit, 0.8 miss, 0.7 hit
    gt = boxes([(0, 0, 0, 0, 10, 10), (0, 0, 20, 20, 30, 30)])
    det = boxes([(0, 0, 0, 0, 10, 10), (0, 0, 50, 50, 60, 60), (0, 0, 20, 20, 30, 30)], [0.9, 0.8, 0.7])
    # recall 0.5, 0.5, 1.0; precision 1, 0.5, 2/3: 51 recall points at 1.0, 50 at 2/3
    assert mean_average_precision(det, gt, 1).mean == pytest.approx((51 + 50 * 2 / 3) / 101, abs=1e-12)


def test_greedy_match_takes_the_best_unmatched_reference_in_score_order():
    gt = boxes([(0, 0, 0, 0, 10, 10), (0, 0, 2, 0, 12, 10)])
    # the higher-scored detection overlaps the second reference best and takes it; the lower one gets the first
    det = boxes([(0, 0, 1, 0, 11, 10), (0, 0, 2, 0, 12, 10)], [0.5, 0.9])
    assert match(det, gt).tolist() == [True, True]
    # a duplicate of a matched reference is a false positive
    dup = boxes([(0, 0, 0, 0, 10, 10), (0, 0, 0, 0, 10, 10)], [0.9, 0.8])
    assert match(dup, boxes([(0, 0, 0, 0, 10, 10)])).tolist() == [True, False]


def test_iou_exactly_at_the_threshold_matches():
    gt = boxes([(0, 0, 0, 0, 10, 10)])
    det = boxes([(0, 0, 0, 0, 20, 10)], [1.0])  # IoU 100 / 200 = 0.5
    assert match(det, gt).tolist() == [True]
    assert match(det, gt, 0.51).tolist() == [False]


def test_matching_stays_within_image_and_class():
    gt = boxes([(0, 0, 0, 0, 10, 10)])
    det = boxes([(1, 0, 0, 0, 10, 10), (0, 1, 0, 0, 10, 10)], [0.9, 0.9])
    assert match(det, gt).tolist() == [False, False]


def test_ties_broken_by_case_order_then_box_index():
    # equal scores: image 0's miss ranks before image 1's hit, so precision at the hit is 1/2
    gt = boxes([(1, 0, 0, 0, 10, 10)])
    det = boxes([(0, 0, 0, 0, 10, 10), (1, 0, 0, 0, 10, 10)], [0.5, 0.5])
    assert class_ap(det.score, match(det, gt), 1) == pytest.approx(0.5)
    reversed_order = boxes([(1, 0, 0, 0, 10, 10), (0, 0, 0, 0, 10, 10)], [0.5, 0.5])
    assert mean_average_precision(reversed_order, gt, 1).mean == pytest.approx(0.5)  # input order is irrelevant


def test_classes_without_reference_are_left_out_of_the_mean():
    gt = boxes([(0, 0, 0, 0, 10, 10)])
    det = boxes([(0, 0, 0, 0, 10, 10), (0, 1, 30, 30, 40, 40)], [0.9, 0.9])
    result = mean_average_precision(det, gt, 3)
    assert result.per_class[0] == 1.0 and np.isnan(result.per_class[1:]).all()
    assert result.mean == 1.0


def test_empty_sides():
    gt = boxes([(0, 0, 0, 0, 10, 10)])
    assert mean_average_precision(Boxes.empty(with_scores=True), gt, 1).mean == 0.0
    assert np.isnan(mean_average_precision(boxes([(0, 0, 0, 0, 5, 5)], [1.0]), Boxes.empty(), 1).mean)


def test_micro_precision_recall_f1():
    assert micro_prf(3, 4, 6) == pytest.approx({"precision": 0.75, "recall": 0.5, "f1": 0.6})
    assert micro_prf(0, 0, 0) == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    assert micro_prf(0, 0, 5) == {"precision": 1.0, "recall": 0.0, "f1": 0.0}


def test_voc_variants_hand_computed():
    from automedbench_detection.comparison import voc_per_class

    gt = boxes([(0, 0, 0, 0, 10, 10), (0, 0, 20, 20, 30, 30)])
    det = boxes([(0, 0, 0, 0, 10, 10), (0, 0, 50, 50, 60, 60), (0, 0, 20, 20, 30, 30)], [0.9, 0.8, 0.7])
    # envelope 1 up to recall 0.5, then 2/3 up to recall 1
    assert voc_per_class(det, gt, 1, None)[0] == pytest.approx(0.5 + 0.5 * 2 / 3)
    assert voc_per_class(det, gt, 1, 11)[0] == pytest.approx((6 + 5 * 2 / 3) / 11)
