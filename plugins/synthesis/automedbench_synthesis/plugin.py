"""Entry point of the synthesis track: registers the track, its axial-SSIM metric and its error-code detector."""

from __future__ import annotations

from typing import Any

from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import SynthesisTrack

    register("synthesis", SynthesisTrack, "CT x4 z super-resolution and MRI -> CT (completion-adjusted axial SSIM)")


class AxialSSIMMetric:
    """Mean axial SSIM (array axis 2) of two HU volumes, PSNR, MAE and RMSE; `mask` optional."""

    name = "axial-ssim"

    def __call__(self, prediction: Any, reference: Any, **options: Any) -> dict[str, Any]:
        from .metric import score_pair

        return score_pair(reference, prediction, options.get("mask"))


@hookimpl
def automedbench_register_metrics(register: Register) -> None:
    register("axial-ssim", AxialSSIMMetric, "mean axial SSIM on HU clipped to [-1024, 3071] (R 4095), PSNR, MAE, RMSE")


@hookimpl
def automedbench_register_code_detectors(register: Register) -> None:
    from .codes import SynthesisOutputDetector

    register("synthesis-output", SynthesisOutputDetector,
             "error codes, synthesis: the degraded input copied unchanged, outputs not in HU")
