"""Classical baselines (scikit-image / scipy only), the rating bands they anchor, and `python -m` to recompute them.

Every baseline maps one case's input to the task's output grid. LDCT works on the input scaled from the
clip window to [0, 1]; SR denoisers run on the low-resolution image before bicubic upsampling. On LDCT
(scale 1) `bicubic` and `zero-filled` reduce to the identity. BM3D is never used here (non-commercial
licence); an agent may install it in its sandbox.

Bands (the original's construction from the best classical baseline by mean SSIM on the task's own
data): A >= best + 0.02 (capped at 1), B >= best - 0.02, C >= best - 0.05, below that F.
    python -m automedbench_enhancement.baselines enhancement/demo-ldct [--data-root PATH]
prints each baseline's mean SSIM/PSNR and the `rating:` line to put in the task file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from automedbench.api import StagedData, TaskSpec

from . import contract
from .data import degrade

BASELINES: dict[str, str] = {
    "perfect": "the references themselves",
    "identity": "the input unchanged (SR: each pixel repeated 2x2)",
    "gaussian": "Gaussian filter (LDCT sigma 1.2 px; SR sigma 0.8 px on the input, then bicubic)",
    "nlm": "scikit-image non-local means (fast mode, patch 7, distance 6, h = the estimated noise level; "
           "SR: then bicubic)",
    "tv": "scikit-image total-variation denoising (Chambolle; SR: then bicubic)",
    "bicubic": "bicubic interpolation to the output grid (LDCT: the identity)",
    "zero-filled": "zero-filled k-space to the output grid (LDCT: the identity)",
    "empty": "an all-zero image (LDCT: the window's low end, air) for every case",
    "constant": "the input's mean value everywhere (no structure)",
    "identity-noise": "the input copied with 1 unit of Gaussian noise (LDCT: 1 HU; SR: 0.0005) added",
}
# Trivial and gaming submissions the bands must hold below B (checked on every demo by the tests).
TRIVIAL: dict[str, str] = {
    "empty": "nothing restored",
    "constant": "one value everywhere",
    "identity": "the input copied (SR: pixel repetition)",
    "identity-noise": "the input copied with noise that escapes an exact-copy check",
}
CLASSICAL = ("identity", "gaussian", "nlm", "tv", "bicubic", "zero-filled")
BAND_A, BAND_B, BAND_C = 0.02, -0.02, -0.05
NLM_H = 1.0
NOISE_CORRELATION = 1.7


def _to_unit(task: TaskSpec, image: np.ndarray) -> tuple[np.ndarray, float, float]:
    lo, hi = task.params["clip"]
    return (np.asarray(image, dtype=np.float64) - lo) / (hi - lo), float(lo), float(hi)


def noise_sigma(x: np.ndarray) -> float:
    """Noise level from the MAD of the residual after a 3-px Gaussian, x1.7 for the ramp-correlated CT grain
    (the plain residual MAD under-reads it; calibrated on the demo's known noise). No PyWavelets needed."""
    from scipy import ndimage

    residual = x - ndimage.gaussian_filter(x, 3)
    return float(NOISE_CORRELATION * 1.4826 * np.median(np.abs(residual - np.median(residual))))


def _nlm(x: np.ndarray) -> np.ndarray:
    from skimage.restoration import denoise_nl_means

    sigma = noise_sigma(x)
    return denoise_nl_means(x, h=NLM_H * sigma, sigma=sigma, patch_size=7, patch_distance=6, fast_mode=True)


def _tv(x: np.ndarray) -> np.ndarray:
    from skimage.restoration import denoise_tv_chambolle

    return denoise_tv_chambolle(x, weight=0.05)


def _gauss(sigma: float) -> Callable[[np.ndarray], np.ndarray]:
    from scipy import ndimage

    return lambda x: ndimage.gaussian_filter(x, sigma)


def _bicubic(x: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    from skimage.transform import resize

    return resize(x, shape, order=3, mode="reflect", anti_aliasing=False)


def restore(task: TaskSpec, name: str, low: np.ndarray) -> np.ndarray:
    """The baseline `name` applied to one input; float32 on the task's output grid."""
    shape = contract.output_shape(task)
    if name in ("empty", "constant", "identity-noise"):
        return _trivial(task, name, low, shape)
    if task.params["kind"] == "ldct":
        unit, lo, hi = _to_unit(task, low)
        ops = {"identity": lambda x: x, "gaussian": _gauss(1.2), "nlm": _nlm, "tv": _tv,
               "bicubic": lambda x: x, "zero-filled": lambda x: x}
        return (ops[name](unit) * (hi - lo) + lo).astype(np.float32)
    x = np.asarray(low, dtype=np.float64)
    if name == "identity":
        out = np.repeat(np.repeat(x, 2, axis=0), 2, axis=1)
    elif name == "zero-filled":
        out = degrade.zero_fill_up(x)
    else:
        pre = {"gaussian": _gauss(0.8), "nlm": _nlm, "tv": _tv, "bicubic": lambda v: v}[name]
        out = _bicubic(pre(x), shape)
    return np.clip(out, 0.0, 1.0).astype(np.float32)


def _trivial(task: TaskSpec, name: str, low: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    x = np.asarray(low, dtype=np.float64)
    if name == "empty":
        return np.full(shape, 0.0 if task.params["kind"] != "ldct" else float(task.params["clip"][0]), np.float32)
    if name == "constant":
        return np.full(shape, float(x.mean()), np.float32)
    copy = x if x.shape == tuple(shape) else np.repeat(np.repeat(x, 2, axis=0), 2, axis=1)
    sigma = 1.0 if task.params["kind"] == "ldct" else 0.0005
    return (copy + np.random.default_rng(0).normal(0.0, sigma, copy.shape)).astype(np.float32)


def write_baseline(task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
    """The baseline's outputs for every case, in the submission layout."""
    if name not in BASELINES:
        from automedbench.api import UserError, did_you_mean

        raise UserError(f"unknown baseline {name!r}{did_you_mean(name, list(BASELINES))}")
    for case_id in staged.case_ids:
        target = dest / case_id
        target.mkdir(parents=True, exist_ok=True)
        if name == "perfect":
            out = np.load(staged.private / case_id / contract.REFERENCE, allow_pickle=False)
        else:
            out = restore(task, name, np.load(staged.public / case_id / contract.INPUT, allow_pickle=False))
        np.save(target / contract.OUTPUT, out)


def measure(task: TaskSpec, staged: StagedData, names: tuple[str, ...] = CLASSICAL) -> dict[str, dict[str, float]]:
    """Mean SSIM and PSNR of each baseline over the staged cases (in process: references are read directly)."""
    from .metric import psnr, ssim, window

    lo, hi = window(task)
    table: dict[str, dict[str, float]] = {}
    for name in names:
        s, p = [], []
        for case_id in staged.case_ids:
            ref = np.load(staged.private / case_id / contract.REFERENCE, allow_pickle=False)
            out = restore(task, name, np.load(staged.public / case_id / contract.INPUT, allow_pickle=False))
            s.append(ssim(ref, out, lo, hi))
            p.append(psnr(ref, out, lo, hi))
        table[name] = {"ssim": float(np.mean(s)), "psnr": float(np.mean(p))}
    return table


def bands(table: dict[str, dict[str, float]]) -> dict[str, float]:
    """A/B/C edges from the best classical baseline by mean SSIM (the original's construction)."""
    best = max(v["ssim"] for v in table.values())
    return {"good": round(min(1.0, best + BAND_A), 4), "okay": round(best + BAND_B, 4),
            "floor": round(max(0.0, best + BAND_C), 4), "min_valid": 1.0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m automedbench_enhancement.baselines",
                                     description="Measure the classical baselines on a staged enhancement task "
                                                 "and print the rating bands for its task file.")
    parser.add_argument("task", help="task id, e.g. enhancement/demo-ldct or enhancement/ldct")
    parser.add_argument("--data-root", type=Path, default=None, help="data root [default: AUTOMEDBENCH_DATA]")
    args = parser.parse_args(argv)
    from automedbench.api import UserError, stage_task

    from .track import EnhancementTrack

    try:
        task = EnhancementTrack().task(args.task)
        staged = stage_task(task.id, args.data_root)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    table = measure(task, staged)
    for name, row in sorted(table.items(), key=lambda kv: kv[1]["ssim"]):
        print(f"{name:12s} SSIM {row['ssim']:.4f}  PSNR {row['psnr']:.2f} dB")
    b = bands(table)
    print(f"rating: {{good: {b['good']}, okay: {b['okay']}, floor: {b['floor']}, min_valid: {b['min_valid']}}}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
