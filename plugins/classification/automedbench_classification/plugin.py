"""Entry point of the classification track: registers the track and its error-code detector."""

from __future__ import annotations

from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import ClassificationTrack

    register(
        "classification",
        ClassificationTrack,
        "2-D image classification (one label per image; balanced accuracy for skin lesions, accuracy for the"
        " other release tasks)",
    )


@hookimpl
def automedbench_register_code_detectors(register: Register) -> None:
    from .codes import LabelDetector

    register("classification-labels", LabelDetector,
             "error codes, classification: abbreviations left unmapped, unknown classes, one-class collapse")
