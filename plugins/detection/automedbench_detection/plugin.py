"""Entry point of the detection track: registers the track and its error-code detector."""

from __future__ import annotations

from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import DetectionTrack

    register("detection", DetectionTrack, "2-D lesion and object detection (boxes, mAP@0.5)")


@hookimpl
def automedbench_register_code_detectors(register: Register) -> None:
    from .codes import BoxFormatDetector

    register("detection-boxes", BoxFormatDetector,
             "error codes, detection: normalised or x/y-swapped coordinates, unknown classes, missing scores")
