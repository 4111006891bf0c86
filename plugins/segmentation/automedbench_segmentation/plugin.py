"""Entry point of the segmentation track: registers the track and its error-code detector."""

from __future__ import annotations

from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import SegmentationTrack

    register("segmentation", SegmentationTrack, "CT tumour / organ and MRI tissue segmentation (Dice)")


@hookimpl
def automedbench_register_code_detectors(register: Register) -> None:
    from .codes import LesionMaskDetector

    register("segmentation-lesion", LesionMaskDetector, "error codes, segmentation: empty or misplaced lesion masks")
