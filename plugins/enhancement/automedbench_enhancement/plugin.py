"""Entry point of the enhancement track: registers the track and its error-code detector."""

from __future__ import annotations

from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import EnhancementTrack

    register("enhancement", EnhancementTrack, "low-dose CT denoising and MRI x2 super-resolution (mean SSIM)")


@hookimpl
def automedbench_register_code_detectors(register: Register) -> None:
    from .codes import EnhancementOutputDetector

    register("enhancement-output", EnhancementOutputDetector,
             "error codes, enhancement: identity copies, HU vs [0, 1] scale errors, SR shape not doubled")
