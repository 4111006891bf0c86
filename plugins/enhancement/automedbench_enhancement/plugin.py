"""Entry point of the enhancement track: registers the track, its SSIM metric and its error-code detector."""

from __future__ import annotations

from typing import Any

from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import EnhancementTrack

    register("enhancement", EnhancementTrack, "low-dose CT denoising and MRI x2 super-resolution (mean SSIM)")


class SSIMMetric:
    """SSIM and PSNR of one (prediction, reference) pair on a fixed window: `lo`, `hi` (default [0, 1])."""

    name = "ssim"

    def __call__(self, prediction: Any, reference: Any, **options: Any) -> dict[str, float]:
        from .metric import psnr, ssim

        lo, hi = float(options.get("lo", 0.0)), float(options.get("hi", 1.0))
        return {"ssim": ssim(reference, prediction, lo, hi), "psnr": psnr(reference, prediction, lo, hi)}


@hookimpl
def automedbench_register_metrics(register: Register) -> None:
    register("ssim", SSIMMetric, "SSIM (Gaussian 11x11, sigma 1.5, population covariance) and PSNR on a fixed window")


@hookimpl
def automedbench_register_code_detectors(register: Register) -> None:
    from .codes import EnhancementOutputDetector

    register("enhancement-output", EnhancementOutputDetector,
             "error codes, enhancement: identity copies, HU vs [0, 1] scale errors, SR shape not doubled")
