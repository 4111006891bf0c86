"""Held-out conformance cases for detection's micro precision/recall/F1 against the original scorer (round 15).

The original (`eval_det2d/det2d_scorer.py::score_all`):
    micro_precision = total_tp / (total_tp + total_fp) if (total_tp + total_fp) else 1.0
    micro_recall = total_tp / (total_tp + total_fn) if (total_tp + total_fn) else 1.0
    micro_f1 = 0.0 if (micro_precision + micro_recall) == 0 else 2 * P * R / (P + R)
so a cohort with reference boxes and no claimed box has precision 1.0 (not 0.0), and predictions on a cohort
without reference boxes have recall 1.0. F1 is 0 on either one-sided case, as before.
"""

from __future__ import annotations

import pytest
from automedbench_detection.metric import micro_prf


def original_micro(tp: int, n_pred: int, n_gt: int) -> dict[str, float]:
    """The original's formulas, restated over totals (fp = n_pred - tp, fn = n_gt - tp)."""
    fp, fn = n_pred - tp, n_gt - tp
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return {"precision": precision, "recall": recall, "f1": f1}


@pytest.mark.parametrize(("tp", "n_pred", "n_gt"), [
    (0, 0, 5),  # nothing claimed, boxes to find: precision 1.0 (was 0.0)
    (0, 3, 0),  # claims on a cohort without findings: recall 1.0 (was 0.0)
    (0, 0, 0),
    (0, 4, 4),
    (2, 2, 7),
    (5, 9, 5),
])
def test_micro_matches_the_original_on_empty_and_full_sides(tp, n_pred, n_gt):
    assert micro_prf(tp, n_pred, n_gt) == pytest.approx(original_micro(tp, n_pred, n_gt))
