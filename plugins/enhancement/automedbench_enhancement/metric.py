"""The enhancement metric: per-case SSIM (Task), PSNR, soft-tissue-window SSIM and the pre-paper composite.

SSIM is scikit-image's `structural_similarity` with the original settings (11-tap Gaussian window,
sigma 1.5, population covariance, K1 0.01, K2 0.03, the 5-pixel border cropped) on a FIXED data range
per task: both images are clipped to the task's window first (LDCT [-1024, 3071] HU, R 4095; MRI
[0, 1], R 1). A per-image range would move SSIM by ~0.17 on the same pair. Task = the mean over all
cases with a missing or invalid case counting 0 (the partial value, the paper's rule); the strict value
is that mean only when every case is valid, else 0.
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import CasePicture, CaseScore, MetricBlock, StagedData, TaskEvaluation, TaskSpec

from . import contract, refssim

SIGMA = 1.5
K1, K2 = 0.01, 0.03
PSNR_CAP_DB = 99.0  # upstream: an MSE at or below 1e-12 counts as 99 dB
ALEXNET_WEIGHTS = "alexnet-owt-7be5be79.pth"


def window(task: TaskSpec) -> tuple[float, float]:
    lo, hi = task.params["clip"]
    return float(lo), float(hi)


def ssim(reference: np.ndarray, prediction: np.ndarray, lo: float, hi: float) -> float:
    """SSIM on [lo, hi]-clipped images (read as float32, computed in float64) with data range hi - lo
    (identical images give exactly 1)."""
    from skimage.metrics import structural_similarity

    ref, pred = refssim.windowed(reference, lo, hi), refssim.windowed(prediction, lo, hi)
    return float(structural_similarity(ref, pred, data_range=hi - lo, gaussian_weights=True, sigma=SIGMA,
                                       use_sample_covariance=False, K1=K1, K2=K2))


def psnr(reference: np.ndarray, prediction: np.ndarray, lo: float, hi: float) -> float:
    """PSNR on the window, both images read as float32 as the original reads them (its 99 dB cap then holds
    for an output equal to the reference up to float32 rounding)."""
    ref, pred = refssim.windowed(reference, lo, hi), refssim.windowed(prediction, lo, hi)
    mse = float(np.mean((ref - pred) ** 2))
    if mse <= 1e-12:
        return PSNR_CAP_DB
    return float(10.0 * math.log10((hi - lo) ** 2 / mse))


def composite(psnr_db: float, ssim_value: float, lpips_value: float | None, params: dict[str, Any]) -> float | None:
    """The original (pre-paper) clinical score: mean of normalised PSNR, SSIM and 1 - LPIPS/max; None without LPIPS."""
    if lpips_value is None:
        return None
    lo, hi, lpips_max = params["psnr_lo"], params["psnr_hi"], params["lpips_max"]
    parts = [(psnr_db - lo) / (hi - lo), ssim_value, 1.0 - lpips_value / lpips_max]
    return float(sum(min(1.0, max(0.0, p)) for p in parts) / 3)


def lpips_weights_on_disk() -> Path | None:
    """The AlexNet trunk LPIPS needs, if it is already in the torch hub cache (never downloaded)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    home = Path(os.environ.get("TORCH_HOME") or cache / "torch")
    path = home / "hub" / "checkpoints" / ALEXNET_WEIGHTS
    return path if path.is_file() else None


FLAT_SPAN = 1e-9  # the original: an image whose max - min is below this is flat


def lpips_input(image: np.ndarray) -> np.ndarray:
    """One image as LPIPS reads it, as the original prepared it: float32, min-max scaled to [-1, 1] on its own;
    a flat image (an empty or constant output) becomes all zeros, mid-grey, not -1."""
    x = np.asarray(image, dtype=np.float32)
    lo, hi = float(x.min()), float(x.max())
    if hi - lo < FLAT_SPAN:
        return np.zeros_like(x)
    return ((x - lo) / (hi - lo) * 2.0 - 1.0).astype(np.float32)


class LPIPS:
    """LPIPS (AlexNet, v0.1 heads) as upstream computed it, or unavailable: weights absent, lpips or torchvision
    not installed. Each image is min-max normalised to [-1, 1] on its own and repeated to 3 channels."""

    def __init__(self) -> None:
        self.reason = ""
        self.model: Any = None
        if lpips_weights_on_disk() is None:
            self.reason = f"unavailable: {ALEXNET_WEIGHTS} not in the torch hub cache (never downloaded)"
        elif importlib.util.find_spec("lpips") is None or importlib.util.find_spec("torchvision") is None:
            self.reason = "unavailable: the lpips and torchvision packages are not installed"

    @property
    def available(self) -> bool:
        return not self.reason

    def __call__(self, reference: np.ndarray, prediction: np.ndarray) -> float | None:
        if not self.available:
            return None
        import lpips
        import torch

        if self.model is None:
            self.model = lpips.LPIPS(net="alex", verbose=False)

        def tensor(image: np.ndarray) -> Any:
            return torch.from_numpy(lpips_input(image))[None, None].repeat(1, 3, 1, 1)

        with torch.no_grad():
            return float(self.model(tensor(reference), tensor(prediction)).item())


def score_pair(task: TaskSpec, reference: np.ndarray, prediction: np.ndarray,
               lpips_fn: LPIPS | None = None, key: str | None = None) -> dict[str, Any]:
    """Every per-case number: SSIM (the Task value), PSNR, the soft-tissue-window SSIM (CT), LPIPS, composite.
    With `key` (the reference's file) the reference's share of each SSIM is kept for the next evaluation."""
    lo, hi = window(task)
    values: dict[str, Any] = {"ssim": _against(reference, lo, hi, key)(prediction),
                              "psnr": psnr(reference, prediction, lo, hi)}
    soft = task.params.get("soft_window")
    if soft:
        # the window mapped to [0, 1] and R = 1: the same SSIM as clipping to the window with R = its width
        values["ssim_soft_tissue"] = _against(reference, float(soft[0]), float(soft[1]), key)(prediction)
    lp = lpips_fn(reference, prediction) if lpips_fn is not None else None
    values["lpips"] = lp
    values["composite"] = composite(values["psnr"], values["ssim"], lp, task.params["composite"])
    return values


def _against(reference: np.ndarray, lo: float, hi: float, key: str | None) -> refssim.ReferenceSSIM:
    """SSIM against `reference` on [lo, hi]: the same values as `ssim`, cached by `key` when one is given."""
    return refssim.for_reference(key, reference, lo, hi) if key else refssim.ReferenceSSIM(reference, lo, hi)


SAME_AS_INPUT_RMS = 1e-3  # RMS change below this share of the window's range: the input submitted unrepaired


def output_facts(low: np.ndarray, prediction: np.ndarray, data_range: float = 1.0) -> dict[str, Any]:
    """Facts the error-code detectors read: the output's range and whether it is the input copied (for x2
    SR: each input pixel repeated 2x2), compared by RMS difference within 0.1% of the data range, so a
    copy with a little noise added (1 HU on a 4095 HU window) is still a copy."""
    pred = np.asarray(prediction, dtype=np.float64)
    copy = np.asarray(low, dtype=np.float64)
    if copy.shape != pred.shape and pred.shape == (2 * copy.shape[0], 2 * copy.shape[1]):
        copy = np.repeat(np.repeat(copy, 2, axis=0), 2, axis=1)
    rms = float(np.sqrt(np.mean((pred - copy) ** 2))) if copy.shape == pred.shape else float("inf")
    same = rms <= SAME_AS_INPUT_RMS * max(data_range, 1e-12)
    return {"out_min": float(pred.min()), "out_max": float(pred.max()), "same_as_input": same,
            "rms_change_from_input": round(rms, 6) if np.isfinite(rms) else None}


def _mean(values: list[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return float(sum(found) / len(found)) if found else None


def fold(task: TaskSpec, scores: list[CaseScore | None], case_ids: list[str], lpips_note: str = "") -> MetricBlock:
    """Task = sum of per-case SSIM over ALL cases / N (missing = 0); strict = that value only if all are valid."""
    n = len(case_ids)
    valid = [s for s in scores if s is not None]
    partial = sum(s.values["ssim"] for s in valid) / n if n else 0.0
    strict = partial if n and len(valid) == n else 0.0
    rows: list[dict[str, Any]] = []
    for case_id, score in zip(case_ids, scores, strict=True):
        rows.append({"case_id": case_id, "valid": score is not None, **(score.values if score else {"ssim": 0.0})})
    components: dict[str, float | None] = {
        "ssim_mean_valid": _mean([s.values["ssim"] for s in valid]),
        "psnr_mean_valid": _mean([s.values["psnr"] for s in valid]),
        "lpips_mean_valid": _mean([s.values.get("lpips") for s in valid]),
        "valid_cases": float(len(valid)),
        "expected_cases": float(n),
    }
    # the original's composite normalises the cohort means (its `clinical_score(mean_psnr, mean_ssim, mean_lpips)`),
    # not each case: clipping is not linear, so one 99 dB case beside a 30 dB one is 1.0 there, not 0.5
    means = (components["psnr_mean_valid"], components["ssim_mean_valid"], components["lpips_mean_valid"])
    components["composite"] = None if None in means else composite(*means, task.params["composite"])
    if task.params.get("soft_window"):
        components["ssim_soft_tissue_mean_valid"] = _mean([s.values.get("ssim_soft_tissue") for s in valid])
    notes: dict[str, str] = {}
    if lpips_note and rows:
        rows[0]["lpips_note"] = lpips_note
        if components["lpips_mean_valid"] is None:
            notes["lpips_mean_valid"] = f"LPIPS {lpips_note}"
        if components["composite"] is None:
            notes["composite"] = "needs the LPIPS mean (the original's composite of PSNR, SSIM and LPIPS)"
    return MetricBlock("ssim", round(strict, 6), round(partial, 6), task.task_score, components, rows,
                       counts=["valid_cases", "expected_cases"], units=units(task), notes=notes)


# PSNR in decibels, whatever the modality's intensity unit (HU for CT, normalised for MRI): printed beside it
UNITS = {"psnr": "dB", "psnr_mean_valid": "dB"}
# each case's output range and change from its input, in the images' intensity unit
INTENSITY = ("out_min", "out_max", "rms_change_from_input")


def units(task: TaskSpec) -> dict[str, str]:
    """The values' units: PSNR in dB; a CT task's (kind ldct) intensities in HU. A super-resolution task's images
    are normalised (no unit), so its intensities are printed bare."""
    return {**UNITS, **dict.fromkeys(INTENSITY, "HU")} if task.params.get("kind") == "ldct" else dict(UNITS)


class EnhancementEvaluation(TaskEvaluation):
    """One evaluation: reads each case's reference from private/ and the frozen output, scores the pair."""

    def __init__(self, task: TaskSpec, staged: StagedData, options: dict[str, str] | None = None) -> None:
        super().__init__(task, staged, options)
        self.lpips = LPIPS()
        self.last: tuple[str, np.ndarray, np.ndarray, np.ndarray] | None = None  # the case just scored, for its picture

    def score_case(self, case_id: str, submitted: Path) -> CaseScore:
        reference_file = self.staged.private / case_id / contract.REFERENCE
        reference = np.load(reference_file, allow_pickle=False)
        shape = contract.output_shape(self.task)
        prediction, reasons, _ = contract.read_output(submitted.parent, case_id, contract.OUTPUT, shape)
        if prediction is None:
            raise ValueError("; ".join(reasons))
        values = score_pair(self.task, reference, prediction, self.lpips, key=str(reference_file))
        low = np.load(self.staged.public / case_id / contract.INPUT, allow_pickle=False)
        lo, hi = window(self.task)
        values.update(output_facts(low, prediction, hi - lo))
        # S5's positive evidence: SSIM above the identity baseline's (the input, SR: each pixel repeated 2x2)
        identity = low if low.shape == reference.shape else np.repeat(np.repeat(low, 2, axis=0), 2, axis=1)
        values["ssim_identity"] = _against(reference, lo, hi, str(reference_file)).of_identity(identity)
        self.last = (case_id, low, prediction, reference)
        return CaseScore(case_id, values)

    def case_picture(self, case_id: str, submitted: Path | None) -> CasePicture | None:
        from .picture import case_picture

        last, self.last = self.last, None
        if last is not None and last[0] == case_id and submitted is not None:
            return case_picture(self.task, *last[1:])
        low = np.load(self.staged.public / case_id / contract.INPUT, allow_pickle=False)
        reference = np.load(self.staged.private / case_id / contract.REFERENCE, allow_pickle=False)
        return case_picture(self.task, low, None, reference)

    def aggregate(self, scores: list[CaseScore | None], case_ids: list[str]) -> MetricBlock:
        return fold(self.task, scores, case_ids, self.lpips.reason)
