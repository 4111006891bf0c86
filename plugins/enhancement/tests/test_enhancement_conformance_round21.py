"""Held-out metric values for enhancement against the original scorer (round 21): outputs in float64.

The original (`eval_image_enhancement/enhancement_scorer.py`) reads every array as float32 (`_as_float32_2d`)
before PSNR and SSIM, so an output within float32 rounding of the reference IS the reference there (MSE 0,
99 dB). Ours took a float64 output as it came: an output 1e-5 HU off a CT reference scored ~172 dB, not 99, and
float64 outputs with small noise read up to 0.003 dB off the original's PSNR. Now both images are rounded to
float32 first (then computed in float64, clipped to the task's window: the held departures of round 18).
Measured against the original's functions on 320 generated pairs (CT/MR, float16/32/64, constant, gradient
and noisy images inside the window): PSNR worst 3.4e-3 dB before, 7.8e-7 dB after; SSIM worst 1.7e-5 (the
original filters in float32, ours in float64; left as it is, below the Task's 6-decimal rounding but one).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from automedbench.testing import load_task
from automedbench_enhancement import metric, refssim


def original_psnr(pred: np.ndarray, ref: np.ndarray, data_range: float) -> float:
    mse = float(np.mean((pred.astype(np.float32) - ref.astype(np.float32)) ** 2))
    return 99.0 if mse <= 1e-12 else 10.0 * math.log10(data_range ** 2 / mse)


def _ct_reference(seed: int) -> np.ndarray:
    """A float32 CT-like slice spanning exactly the window [-1024, 3071] (the original's R is then ours)."""
    rng = np.random.default_rng(seed)
    ref = np.clip(rng.normal(2500.0, 200.0, (64, 64)), 2048, 3000).astype(np.float32)
    ref[0, 0], ref[-1, -1] = -1024.0, 3071.0
    return ref


def test_a_float64_output_equal_up_to_float32_rounding_is_99_db():
    """Before: 10·log10(4095² / 1e-10) = 172 dB; the original reads the output as float32, equal to the reference."""
    _, task = load_task("enhancement/ldct")
    ref = _ct_reference(0)
    pred = ref.astype(np.float64) + 1e-5
    assert np.array_equal(pred.astype(np.float32), ref)  # what the original scores
    values = metric.score_pair(task, ref, pred)
    assert values["psnr"] == original_psnr(pred, ref, 4095.0) == 99.0
    assert values["ssim"] == 1.0


@pytest.mark.parametrize("seed", range(4))
def test_float64_outputs_have_the_originals_psnr(seed):
    """Small float64 noise (a few thousandths of a HU): before, up to 0.003 dB off the original."""
    _, task = load_task("enhancement/ldct")
    ref = _ct_reference(seed)
    rng = np.random.default_rng(100 + seed)
    pred = np.clip(ref + rng.normal(0.0, 0.004, ref.shape), -1024, 3071)
    values = metric.score_pair(task, ref, pred, key=f"/round21/{seed}")
    assert values["psnr"] == pytest.approx(original_psnr(pred, ref, 4095.0), abs=1e-5)
    # the cached reference-side SSIM reads the output the same way as the direct one, bit for bit
    assert values["ssim"] == metric.ssim(ref, pred, -1024, 3071) == refssim.ReferenceSSIM(ref, -1024, 3071)(pred)
