"""The metric against scikit-image, a hand-written SSIM and hand-computed cases; the fold's completion adjustment."""

from __future__ import annotations

import math

import numpy as np
import pytest
from automedbench.api import CaseScore
from automedbench_synthesis.metric import DATA_RANGE, axial_ssim, errors, fold


def hand_ssim(a: np.ndarray, b: np.ndarray, r: float, win: int = 7) -> float:
    """SSIM written out: uniform win x win means, sample (co)variances, K1 0.01, K2 0.03, border cropped."""
    from scipy.ndimage import uniform_filter

    a, b = a.astype(np.float64), b.astype(np.float64)
    n = win * win
    mu_a, mu_b = uniform_filter(a, win), uniform_filter(b, win)
    cov = n / (n - 1)
    va = cov * (uniform_filter(a * a, win) - mu_a ** 2)
    vb = cov * (uniform_filter(b * b, win) - mu_b ** 2)
    vab = cov * (uniform_filter(a * b, win) - mu_a * mu_b)
    c1, c2 = (0.01 * r) ** 2, (0.03 * r) ** 2
    s = ((2 * mu_a * mu_b + c1) * (2 * vab + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (va + vb + c2))
    p = (win - 1) // 2
    return float(s[p:-p, p:-p].mean())


def volumes(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ref = rng.normal(0, 300, (40, 36, 9)).cumsum(axis=0)  # structure, and values beyond the clip window
    return ref, ref + rng.normal(0, 400, ref.shape)


def test_axial_ssim_equals_scikit_image_and_a_hand_written_ssim():
    from skimage.metrics import structural_similarity

    ref, pred = volumes()
    ours = axial_ssim(ref, pred)["ssim"]
    rc, pc = np.clip(ref, -1024, 3071), np.clip(pred, -1024, 3071)
    sk = np.mean([structural_similarity(rc[:, :, k], pc[:, :, k], data_range=4095) for k in range(9)])
    hand = np.mean([hand_ssim(rc[:, :, k], pc[:, :, k], 4095.0) for k in range(9)])
    assert ours == pytest.approx(sk, abs=1e-12) and ours == pytest.approx(hand, abs=1e-7)
    assert 0.2 < ours < 0.99


def test_constant_planes_give_the_luminance_term_by_hand():
    ref, pred = np.full((16, 16, 3), 100.0), np.full((16, 16, 3), 300.0)
    c1 = (0.01 * DATA_RANGE) ** 2
    expected = (2 * 100 * 300 + c1) / (100 ** 2 + 300 ** 2 + c1)  # zero variances: the structure term is 1
    assert axial_ssim(ref, pred)["ssim"] == pytest.approx(expected, abs=1e-12)
    # clipping: -5000 and -1024 are the same after the HU window
    assert axial_ssim(np.full((16, 16, 2), -1024.0), np.full((16, 16, 2), -5000.0))["ssim"] == 1.0


def test_mask_rules_all_ones_mask_equals_unmasked_and_sparse_planes_are_skipped():
    ref, pred = volumes(1)
    ones = np.ones(ref.shape, dtype=np.uint8)
    assert axial_ssim(ref, pred, ones)["ssim"] == pytest.approx(axial_ssim(ref, pred)["ssim"], abs=1e-12)
    mask = np.zeros(ref.shape, dtype=np.uint8)
    mask[10:30, 8:28, 2] = 1  # only plane 2 has >= 16 mask voxels
    mask[10:13, 8:13, 5] = 1  # 15 voxels: skipped
    from skimage.metrics import structural_similarity

    rc, pc = np.clip(ref, -1024, 3071), np.clip(pred, -1024, 3071)
    _, smap = structural_similarity(rc[:, :, 2], pc[:, :, 2], data_range=4095, full=True)
    out = axial_ssim(ref, pred, mask)
    assert out["ssim"] == pytest.approx(float(smap[10:30, 8:28].mean()), abs=1e-12)
    assert out["ssim_full_plane"] == pytest.approx(structural_similarity(rc[:, :, 2], pc[:, :, 2], data_range=4095))
    assert axial_ssim(np.zeros((6, 40, 3)), np.zeros((6, 40, 3)))["ssim"] is None  # planes under 7 px: none scored


def test_errors_by_hand():
    ref = np.zeros((4, 4, 2))
    pred = ref.copy()
    pred[0, 0, 0] = 4095.0  # one voxel off by the full range, unclipped
    e = errors(ref, pred)
    assert e["mae_hu"] == pytest.approx(4095 / 32) and e["rmse_hu"] == pytest.approx(4095 / math.sqrt(32))
    assert e["psnr"] == pytest.approx(10 * math.log10(4095 ** 2 / ((3071 ** 2) / 32)))  # clipped to 3071
    mask = np.zeros(ref.shape)
    mask[1:, 1:, :] = 1  # the bad voxel outside the mask: no error inside it
    assert errors(ref, pred, mask)["mae_hu"] == 0.0 and errors(ref, pred, mask)["psnr"] is None
    assert errors(ref, ref)["psnr"] is None  # perfect: left out of the mean


def test_fold_is_completion_adjusted_and_reports_the_gain_over_the_input():
    ids = ["a", "b", "c", "d"]
    scores = [CaseScore("a", {"ssim": 0.9}), None, CaseScore("c", {"ssim": 0.8}), None]
    block = fold(scores, ids, {"a": 0.7, "b": 0.7, "c": 0.7, "d": 0.7})
    assert block.partial == pytest.approx(0.85 * 2 / 4) and block.strict == 0.0
    assert block.components["ssim_identity_mean"] == pytest.approx(0.7)
    assert block.components["gain_over_input"] == pytest.approx(0.425 - 0.7)
    full = fold([CaseScore(i, {"ssim": 1.2 if i == "a" else 0.95}) for i in ids], ids, {})
    assert full.partial == full.strict == pytest.approx(min(1.0, (1.2 + 3 * 0.95) / 4))  # clipped to [0, 1]
    assert fold([CaseScore("a", {"ssim": -0.5})], ["a"], {}).partial == 0.0
