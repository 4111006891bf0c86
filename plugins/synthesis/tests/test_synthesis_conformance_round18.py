"""Held-out metric values for synthesis against the release's `synth_scorer` definitions (round 18).

The release (as third parties read it; tracks-full-research §4.3), restated as `release_case_ssim`: both volumes
clipped to [-1024, 3071] HU, scikit-image's default 2-D SSIM (7x7 uniform window) with data range 4095 on every
plane along array axis 2 whose smaller side is at least 7, the mean over those planes; Task = clip(mean over
scored cases, 0, 1) x scored / expected. The edge inputs below (values far outside the window on both sides,
integer voxels, a constant volume, a 7-voxel-wide plane, one plane) held before this round; the test pins them,
and the release tasks' windows and bands.
"""

from __future__ import annotations

import numpy as np
import pytest
from automedbench.api import CaseScore
from automedbench.testing import load_task
from automedbench_synthesis.metric import DATA_RANGE, HU_HI, HU_LO, axial_ssim, fold


def release_case_ssim(ref: np.ndarray, pred: np.ndarray) -> float | None:
    from skimage.metrics import structural_similarity

    r = np.clip(ref.astype(np.float64), -1024, 3071)
    p = np.clip(pred.astype(np.float64), -1024, 3071)
    planes = [structural_similarity(r[:, :, k], p[:, :, k], data_range=4095.0) for k in range(r.shape[2])
              if min(r.shape[0], r.shape[1]) >= 7]
    return float(np.mean(planes)) if planes else None


def _ref(shape: tuple[int, int, int], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.normal(0, 400, shape).cumsum(axis=0), -3000, 6000).astype(np.float32)


CASES = {
    "beyond the window both ways": lambda r: (r * 50.0).astype(np.float32),
    "int16 voxels": lambda r: np.clip(np.rint(r + 30.0), -32768, 32767).astype(np.int16),
    "constant air": lambda r: np.full(r.shape, -1000.0, dtype=np.float32),
    "constant beyond the window": lambda r: np.full(r.shape, 1e6, dtype=np.float64),
    "the reference itself": lambda r: r.copy(),
    "the reference as float64 plus noise": lambda r: r.astype(np.float64) + np.random.default_rng(1).normal(
        0, 50, r.shape),
}


@pytest.mark.parametrize("shape", [(24, 20, 5), (7, 30, 3), (16, 16, 1)])
@pytest.mark.parametrize("name", list(CASES))
def test_case_ssim_equals_the_release(shape, name):
    ref = _ref(shape)
    pred = CASES[name](ref)
    ours = axial_ssim(ref, pred)["ssim"]
    assert ours == pytest.approx(release_case_ssim(ref, pred), abs=1e-9)


def test_planes_narrower_than_the_window_leave_the_case_unscored_as_the_release():
    ref = _ref((6, 40, 4))
    assert axial_ssim(ref, ref)["ssim"] is None and release_case_ssim(ref, ref) is None


def test_task_is_the_clipped_mean_times_completion():
    ids = ["a", "b", "c"]
    values = {"a": -0.4, "b": 0.1}  # a negative mean over the scored cases clips to 0
    block = fold([CaseScore(i, {"ssim": v}) for i, v in values.items()] + [None], ids, {})
    assert block.partial == 0.0
    values = {"a": 0.99, "b": 0.93}
    block = fold([CaseScore(i, {"ssim": v}) for i, v in values.items()] + [None], ids, {})
    assert block.partial == pytest.approx(round(min(1.0, 0.96) * 2 / 3, 6))


@pytest.mark.parametrize(("task_id", "kind", "bands"), [
    ("synthesis/msd-pancreas-ctsr", "ctsr", (0.98, 0.95)), ("synthesis/ctorg-ctsr", "ctsr", (0.98, 0.95)),
    ("synthesis/totalsegmentator-ctsr", "ctsr", (0.98, 0.95)), ("synthesis/synthrad2025-mrct", "mrct", (0.90, 0.75)),
])
def test_release_task_parameters(task_id, kind, bands):
    _, task = load_task(task_id)
    assert (HU_LO, HU_HI, DATA_RANGE) == (-1024.0, 3071.0, 4095.0)
    assert task.params["kind"] == kind and task.case_count == 20
    assert (task.rating.good, task.rating.okay) == bands  # the CT-SR bands are raised per staging (README)
