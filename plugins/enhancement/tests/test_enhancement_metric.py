"""SSIM as the original computed it: checked against MONAI, a hand computation, and why torchmetrics differs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from automedbench_enhancement import metric
from automedbench_enhancement.data import degrade
from scipy import ndimage


@pytest.fixture(scope="module")
def pair():
    rng = np.random.default_rng(7)
    ref = ndimage.gaussian_filter(rng.random((64, 64)), 2)
    return ref, ref + 0.05 * rng.standard_normal((64, 64))


def _hand_ssim(ref: np.ndarray, pred: np.ndarray, data_range: float) -> float:
    """SSIM by explicit loops: 11x11 Gaussian window (sigma 1.5), population moments, valid pixels only."""
    r = np.arange(-5, 6)
    g = np.exp(-(r ** 2) / (2 * 1.5 ** 2))
    window = np.outer(g, g) / np.outer(g, g).sum()
    c1, c2 = (0.01 * data_range) ** 2, (0.03 * data_range) ** 2
    values = []
    for i in range(5, ref.shape[0] - 5):
        for j in range(5, ref.shape[1] - 5):
            x, y = ref[i - 5:i + 6, j - 5:j + 6], pred[i - 5:i + 6, j - 5:j + 6]
            mx, my = (window * x).sum(), (window * y).sum()
            vx, vy = (window * x * x).sum() - mx * mx, (window * y * y).sum() - my * my
            cov = (window * x * y).sum() - mx * my
            values.append((2 * mx * my + c1) * (2 * cov + c2) / ((mx * mx + my * my + c1) * (vx + vy + c2)))
    return float(np.mean(values))


def test_ssim_equals_a_hand_computation():
    rng = np.random.default_rng(3)
    ref = rng.uniform(-1024, 3071, (17, 19))
    pred = np.clip(ref + rng.normal(0, 300, ref.shape), -1024, 3071)  # inside the window: clipping is a no-op
    expected = _hand_ssim(ref, pred, 4095.0)
    assert metric.ssim(ref, pred, -1024, 3071) == pytest.approx(expected, abs=1e-5)
    assert 0.0 < expected < 0.99


def test_ssim_matches_monai(pair):
    torch = pytest.importorskip("torch")
    monai_metrics = pytest.importorskip("monai.metrics")
    ref, pred = pair
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))[None, None]  # noqa: E731
    ssim_monai = monai_metrics.SSIMMetric(spatial_dims=2, data_range=1.0, kernel_type="gaussian", win_size=11,
                                         kernel_sigma=1.5)
    # compare on an unclipped, fixed range of 1 (both images lie inside [lo, lo + 1])
    lo = float(min(ref.min(), pred.min()))
    ours = metric.ssim(ref, pred, lo, lo + 1.0)
    assert ours == pytest.approx(float(ssim_monai(t(pred), t(ref)).mean()), abs=1e-5)


def test_torchmetrics_differs_because_it_averages_the_padded_border(pair):
    """torchmetrics reflect-pads (numpy/scipy 'mirror') and averages the whole map, border included;
    the original crops the 5-pixel border. Its value is exactly the uncropped mean of that map."""
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.functional.image")
    ref, pred = pair
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))[None, None]  # noqa: E731
    theirs = float(tm.structural_similarity_index_measure(t(pred), t(ref), data_range=1.0))

    def smooth(a):
        return ndimage.gaussian_filter(a, 1.5, truncate=3.5, mode="mirror")

    ux, uy = smooth(ref), smooth(pred)
    vx, vy, vxy = smooth(ref * ref) - ux * ux, smooth(pred * pred) - uy * uy, smooth(ref * pred) - ux * uy
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    smap = (2 * ux * uy + c1) * (2 * vxy + c2) / ((ux ** 2 + uy ** 2 + c1) * (vx + vy + c2))
    lo = float(min(ref.min(), pred.min()))
    ours = metric.ssim(ref, pred, lo, lo + 1.0)
    assert theirs == pytest.approx(float(smap.mean()), abs=1e-6)          # full map, padded border in
    assert ours == pytest.approx(float(smap[5:-5, 5:-5].mean()), abs=1e-6)  # border cropped
    assert abs(theirs - ours) > 1e-3


def test_fixed_range_not_per_image():
    """A per-image range would change the score; the metric clips both images to the task window first."""
    rng = np.random.default_rng(1)
    ref = rng.uniform(-200, 300, (48, 48))
    pred = ref + rng.normal(0, 40, ref.shape)
    fixed = metric.ssim(ref, pred, -1024, 3071)
    per_image = metric.ssim(ref, pred, float(ref.min()), float(ref.max()))
    assert fixed > per_image + 0.02
    # values outside the window are clipped on both sides: a prediction of 5000 HU scores as 3071
    assert metric.ssim(ref, np.full_like(ref, 5000.0), -1024, 3071) == metric.ssim(
        ref, np.full_like(ref, 3071.0), -1024, 3071)


def test_identical_images_score_exactly_one_and_psnr_caps():
    rng = np.random.default_rng(2)
    ref = rng.uniform(0, 1, (40, 30)).astype(np.float32)
    assert metric.ssim(ref, ref, 0, 1) == 1.0
    assert metric.psnr(ref, ref, 0, 1) == metric.PSNR_CAP_DB


def test_psnr_by_hand():
    ref = np.zeros((10, 10))
    pred = np.full((10, 10), 0.1)
    assert metric.psnr(ref, pred, 0, 1) == pytest.approx(10 * math.log10(1 / 0.01))


def test_composite_and_lpips_unavailable(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    lp = metric.LPIPS()
    assert not lp.available and "never downloaded" in lp.reason
    assert lp(np.zeros((8, 8)), np.zeros((8, 8))) is None
    assert metric.composite(40.0, 0.9, None, {"psnr_lo": 30, "psnr_hi": 45, "lpips_max": 0.3}) is None
    # (40-30)/15 = 0.667, 0.9, 1 - 0.06/0.3 = 0.8 -> mean 0.7889
    assert metric.composite(40.0, 0.9, 0.06, {"psnr_lo": 30, "psnr_hi": 45, "lpips_max": 0.3}) == pytest.approx(
        (2 / 3 + 0.9 + 0.8) / 3)



def test_lpips_input_scales_each_image_and_a_flat_one_is_zero_as_the_original():
    """Each image min-max scaled to [-1, 1] on its own (float32); an empty or constant output (max - min
    below 1e-9) is all zeros as in the original, not -1 (as ours was before)."""
    x = metric.lpips_input(np.array([[2.0, 4.0], [6.0, 10.0]]))
    assert x.dtype == np.float32 and x.tolist() == [[-1.0, -0.5], [0.0, 1.0]]
    for flat in (np.zeros((4, 4)), np.full((4, 4), -1000.0), np.full((4, 4), 3.0) + 1e-12):
        assert metric.lpips_input(flat).tolist() == np.zeros((4, 4)).tolist()
    assert metric.lpips_input(np.array([[0.0, 1e-6]])).tolist() == [[-1.0, 1.0]]  # a tiny span still scales

def test_fold_counts_missing_cases_as_zero():
    from automedbench.api import CaseScore, RatingThresholds, TaskSpec, TierInfo

    task = TaskSpec("enhancement/x", "enhancement", "t", "d", "m", ["input.npy"], ["enhanced.npy"], 4, 1, 1, 1,
                    False, True, RatingThresholds(0.9, 0.8, 0.5, 0.7), {"lite": TierInfo()}, "ssim",
                    {"clip": [0, 1]}, task_score="partial")
    scores = [CaseScore("a", {"ssim": 0.8, "psnr": 30.0}), None, CaseScore("c", {"ssim": 0.6, "psnr": 20.0}), None]
    block = metric.fold(task, scores, ["a", "b", "c", "d"])
    assert block.partial == pytest.approx(1.4 / 4) and block.strict == 0.0
    assert block.components["ssim_mean_valid"] == pytest.approx(0.7)
    assert block.components["psnr_mean_valid"] == pytest.approx(25.0)
    assert [r["ssim"] for r in block.per_case] == [0.8, 0.0, 0.6, 0.0]
    full = metric.fold(task, [CaseScore(c, {"ssim": 0.5, "psnr": 1.0}) for c in "ab"], ["a", "b"])
    assert full.strict == full.partial == 0.5


def test_zero_filling_inverts_kspace_truncation_of_a_band_limited_image():
    """The SR degradation keeps the k-space centre; an image with no energy outside it comes back exactly."""
    h, w = 64, 48
    k = np.zeros((h, w), dtype=complex)
    rng = np.random.default_rng(5)
    k[h // 4 + 1:h // 4 + h // 2 - 1, w // 4 + 1:w // 4 + w // 2 - 1] = rng.normal(size=(h // 2 - 2, w // 2 - 2))
    image = np.real(np.fft.ifft2(np.fft.ifftshift(k)))
    image = image - image.min() + 1.0  # positive: the magnitude step changes nothing
    low = degrade.kspace_down(image)
    assert low.shape == (h // 2, w // 2)
    assert np.allclose(degrade.zero_fill_up(low), image, atol=1e-9)
