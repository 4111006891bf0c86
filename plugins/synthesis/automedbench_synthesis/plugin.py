"""Entry point of the synthesis track: registers the track and its error-code detector."""

from __future__ import annotations

from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import SynthesisTrack

    register("synthesis", SynthesisTrack, "CT x4 z super-resolution and MRI -> CT (completion-adjusted axial SSIM)")


@hookimpl
def automedbench_register_code_detectors(register: Register) -> None:
    from .codes import SynthesisOutputDetector

    register("synthesis-output", SynthesisOutputDetector,
             "error codes, synthesis: the degraded input copied unchanged, outputs not in HU")
