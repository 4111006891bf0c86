"""Held-out metric values for enhancement against the original scorer's definitions (round 18).

The original (`eval_image_enhancement/enhancement_scorer.py`), restated here: PSNR = 10·log10(R²/MSE) on float32
images (MSE <= 1e-12 -> 99 dB), SSIM = scikit-image `structural_similarity(ref, pred, data_range=R,
gaussian_weights=True, use_sample_covariance=False)` on float32 images, means over the cases with an output, and
the clinical composite `clinical_score(mean_psnr, mean_ssim, mean_lpips)`: each cohort mean normalised and
clipped (PSNR by the task's window, SSIM to [0, 1], 1 - LPIPS/max), then averaged. R there is the reference's
max - min; ours is the task's fixed window (held, README): the cases below put the reference's range on the
window, where both definitions coincide.

Before this round our composite was the mean of per-case composites. Clipping is not linear, so a cohort with a
perfect case (99 dB) and a 30 dB case read 0.61 where the original's reads 0.66.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from automedbench.api import CaseScore
from automedbench.testing import load_task
from automedbench_enhancement import metric


def original_clinical(mean_psnr: float, mean_ssim: float, mean_lpips: float, lo: float, hi: float,
                      lpips_max: float) -> float:
    clip = lambda v: min(1.0, max(0.0, v))  # noqa: E731
    return (clip((mean_psnr - lo) / (hi - lo)) + clip(mean_ssim) + clip(1.0 - mean_lpips / lpips_max)) / 3


def original_psnr(pred: np.ndarray, ref: np.ndarray, data_range: float) -> float:
    mse = float(np.mean((pred.astype(np.float32) - ref.astype(np.float32)) ** 2))
    return 99.0 if mse <= 1e-12 else 10.0 * math.log10(data_range ** 2 / mse)


def original_ssim(pred: np.ndarray, ref: np.ndarray, data_range: float) -> float:
    from skimage.metrics import structural_similarity

    return float(structural_similarity(ref.astype(np.float32), pred.astype(np.float32), data_range=data_range,
                                       gaussian_weights=True, use_sample_covariance=False))


@pytest.mark.parametrize(("task_id", "cases"), [
    ("enhancement/ldct", [(99.0, 1.0, 0.0), (30.0, 0.80, 0.50)]),  # a perfect case beside a poor one
    ("enhancement/ldct", [(50.0, 0.99, 0.01), (41.0, 0.95, 0.06), (28.0, 0.70, 0.40)]),
    ("enhancement/mri-sr", [(37.0, 0.62, 0.60), (18.0, -0.05, 0.20)]),  # a negative SSIM, LPIPS past its max
])
def test_composite_normalises_the_cohort_means_as_the_original(task_id, cases):
    _, task = load_task(task_id)
    scores = [CaseScore(f"c{k}", {"ssim": s, "psnr": p, "lpips": lp}) for k, (p, s, lp) in enumerate(cases)]
    block = metric.fold(task, [*scores, None], [s.case_id for s in scores] + ["missing"])
    params = task.params["composite"]
    means = [float(np.mean([c[i] for c in cases])) for i in range(3)]
    expected = original_clinical(*means, params["psnr_lo"], params["psnr_hi"], params["lpips_max"])
    assert block.components["composite"] == pytest.approx(expected, abs=1e-12)
    # the original's means skip the case with no output; the Task counts it 0 (the paper's rule, held)
    assert block.components["psnr_mean_valid"] == pytest.approx(means[0])
    assert block.components["ssim_mean_valid"] == pytest.approx(means[1])
    assert block.partial == pytest.approx(sum(c[1] for c in cases) / (len(cases) + 1), abs=1e-6)


def test_composite_is_null_without_lpips():
    _, task = load_task("enhancement/ldct")
    block = metric.fold(task, [CaseScore("a", {"ssim": 0.9, "psnr": 40.0, "lpips": None})], ["a"])
    assert block.components["composite"] is None


def _ct_pair(seed: int, offset: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """A CT-like slice spanning exactly [-1024, 3071] HU (its max - min is the window's 4095) and a noisy copy
    that stays inside the window."""
    rng = np.random.default_rng(seed)
    ref = np.clip(rng.normal(40.0, 300.0, (64, 64)), -1000, 3000).astype(np.float32)
    ref[0, 0], ref[-1, -1] = -1024.0, 3071.0
    pred = np.clip(ref + rng.normal(offset, 20.0, ref.shape), -1024, 3071).astype(np.float32)
    return ref, pred


@pytest.mark.parametrize("seed", range(3))
def test_psnr_and_ssim_equal_the_originals_where_the_ranges_coincide(seed):
    ref, pred = _ct_pair(seed, offset=5.0 * seed)
    r = float(ref.max() - ref.min())
    assert r == 4095.0
    assert metric.psnr(ref, pred, -1024, 3071) == pytest.approx(original_psnr(pred, ref, r), abs=1e-4)
    # the original casts to float32 (scikit-image then filters in float32); ours works in float64
    assert metric.ssim(ref, pred, -1024, 3071) == pytest.approx(original_ssim(pred, ref, r), abs=1e-5)


def test_identical_and_all_equal_images():
    ref, _ = _ct_pair(7)
    assert metric.psnr(ref, ref.copy(), -1024, 3071) == original_psnr(ref, ref.copy(), 4095.0) == 99.0
    assert metric.ssim(ref, ref.copy(), -1024, 3071) == pytest.approx(1.0)
    flat = np.full((32, 32), 0.25, dtype=np.float32)
    # all-equal images: SSIM 1 by the luminance and contrast constants; the original's R would be 0 there (the
    # reference's own range), so ours, on the fixed range, is the defined value
    assert metric.ssim(flat, flat.copy(), 0.0, 1.0) == pytest.approx(1.0)
    assert metric.psnr(flat, flat + np.float32(0.1), 0.0, 1.0) == pytest.approx(20.0, abs=1e-4)
