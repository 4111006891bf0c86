"""Entry point of the segmentation track: registers the track and its Dice metric."""

from __future__ import annotations

from typing import Any

from automedbench.api import Register, hookimpl


@hookimpl
def automedbench_register_tracks(register: Register) -> None:
    from .track import SegmentationTrack

    register("segmentation", SegmentationTrack, "CT tumour / organ and MRI tissue segmentation (Dice)")


def dice_metric(**options: Any) -> Any:
    """Imports numpy only when the metric is made, so listing plugins stays fast."""
    from .dice import DiceMetric

    return DiceMetric(**options)


@hookimpl
def automedbench_register_metrics(register: Register) -> None:
    register("dice", dice_metric, "per-label Dice from one joint histogram (both empty = 1)")


@hookimpl
def automedbench_register_code_detectors(register: Register) -> None:
    from .codes import LesionMaskDetector

    register("segmentation-lesion", LesionMaskDetector, "error codes, segmentation: empty or misplaced lesion masks")
