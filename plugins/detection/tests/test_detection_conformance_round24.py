"""Held-out mAP values against the original scorer's recall points (round 24).

The original (`eval_det2d/det2d_scorer.py::_compute_ap_101`) samples the precision envelope at
`r = recall_threshold / 100.0` for recall_threshold in 0..100, a recall reaching r when `recall >= r`. Ours took
the points from `np.linspace(0, 1, 101)` (pycocotools' choice), which rounds ten of them one ulp up (0.35, 0.41,
0.47, 0.57, 0.69, 0.70, 0.82, 0.83, 0.94, 0.95): a recall of exactly 7/10 then missed the 0.70 sample, and the AP
fell to the next precision there. Fuzzed on 400 generated cohorts (ties, duplicates, integer and float boxes):
worst mAP difference 0.0063 before, 0 after. pycocotools stays the oracle in test_detection_metric.py, given
the same recall points.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from automedbench_detection.average_precision import Boxes, mean_average_precision


def original_ap(ranked_hits: list[bool], n_gt: int) -> float:
    """101-point AP as the original writes it: r = k / 100.0, the highest precision at a recall >= r."""
    points, found = [], 0
    for rank, hit in enumerate(ranked_hits, start=1):
        found += hit
        points.append((found / rank, found / n_gt))
    return sum(max((p for p, rc in points if rc >= k / 100.0), default=0.0) for k in range(101)) / 101.0


def _ours(ranked_hits: list[bool], n_gt: int) -> float:
    """The same ranking through the track's matcher: disjoint unit references, hits on them, misses far off."""
    refs = np.array([[10.0 * j, 0.0, 10.0 * j + 5.0, 5.0] for j in range(n_gt)])
    dets, j = [], 0
    for hit in ranked_hits:
        if hit:
            dets.append(refs[j])
            j += 1
        else:
            dets.append([1000.0, 1000.0, 1005.0, 1005.0])
    det = Boxes(np.zeros(len(dets), np.int64), np.zeros(len(dets), np.int64), np.array(dets).reshape(-1, 4),
                np.linspace(1.0, 0.01, len(dets)) if dets else np.zeros(0))
    gt = Boxes(np.zeros(n_gt, np.int64), np.zeros(n_gt, np.int64), refs)
    return mean_average_precision(det, gt, 1).mean


def test_a_recall_of_seven_tenths_reaches_the_070_sample():
    """Ten references: seven hits, three misses, then the other three hits. The original: precision 1 at the
    71 samples up to recall 0.70, 10/13 at the other 30. Before: the 0.70 sample read 10/13 (AP 0.0023 lower)."""
    hits = [True] * 7 + [False] * 3 + [True] * 3
    expected = (71 + 30 * 10 / 13) / 101
    assert original_ap(hits, 10) == pytest.approx(expected, abs=1e-12)
    assert _ours(hits, 10) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n_gt", [10, 20, 50, 100])
def test_generated_rankings_equal_the_originals(n_gt):
    """Rankings whose recalls land on every multiple of 1/n_gt: the counts that divide 100 hit the ten points
    np.linspace rounds up."""
    rng = random.Random(n_gt)
    worst = 0.0
    for _ in range(60):
        hits: list[bool] = []
        for _ in range(rng.randint(n_gt // 2, 2 * n_gt)):
            hits.append(rng.random() < 0.7 and sum(hits) < n_gt)  # no more hits than references
        worst = max(worst, abs(_ours(hits, n_gt) - original_ap(hits, n_gt)))
    assert worst < 1e-12
