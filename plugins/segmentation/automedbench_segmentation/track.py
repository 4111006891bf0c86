"""The segmentation track: organ + lesion (binary pair) and multi-label tasks on NIfTI volumes. Wiring only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from automedbench.api import CaseVerdict, MetricBlock, PackagedTrack, Rubric, StagedData, TaskEvaluation, TaskSpec


def _above(dice: Any, blind: Any) -> bool:
    """A Dice above a blind mask's on the same case (or a perfect 1.0, where the structure fills the volume and the
    two are one mask)."""
    value = dice if isinstance(dice, (int, float)) else 0.0
    bar = blind if isinstance(blind, (int, float)) else 0.0
    return value > bar or (value >= 1.0 and bar > 0)


class SegmentationTrack(PackagedTrack):
    name = "segmentation"
    demo_stager = ".data.demo:stage_demo"
    source_stager = ".data.stagers:stage_real"
    # real data needs a real model: no scripted method stands in for it
    demo_solution = ".solution:demo_solution"
    demo_solution_scope = "the phantom demos"
    baseline_module = ".baselines"

    def __init__(self) -> None:
        super().__init__()
        self._case_cache: Any = None

    @property
    def _cache(self) -> Any:
        """Made on first use: numpy and nibabel load only when a case is checked (fast `automedbench plugins`)."""
        if self._case_cache is None:
            from .io import CaseCache

            self._case_cache = CaseCache()
        return self._case_cache

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        from . import contract

        self._cache.begin(case_id)
        return contract.check_case(task, case_id, submitted, public, self._cache)

    def evaluation(self, task: TaskSpec, staged: StagedData, options: dict[str, str]) -> TaskEvaluation:
        from .metric import SegmentationEvaluation

        # the contract check's case cache, so scoring reuses the volumes it loaded
        return SegmentationEvaluation(task, staged, options, cache=self._cache)

    def rating_cap(self, task: TaskSpec, metric: MetricBlock) -> str | None:
        """A label map whose Task comes from labels absent from both sides (scored 1) rates no better than C:
        on the structures the references contain, its Dice must reach the okay band too."""
        present = metric.components.get("present_dice")
        if task.params.get("kind") != "multilabel" or present is None or present >= task.rating.okay:
            return None
        return (f"Dice {present:.3f} on the structures the references contain (below the okay band "
                f"{task.rating.okay}); the rest of the Task is labels absent from both sides, scored 1")

    def rubric(self, task: TaskSpec) -> Rubric:
        from .rubric import segmentation_rubric

        return segmentation_rubric(task)

    def positive_evidence(self, task: TaskSpec) -> str:
        if task.params.get("kind") == "multilabel":
            return "Dice for a label the reference contains above that label's uniform mask's on the case"
        return ("organ or lesion Dice against a non-empty reference above the constant mask's (every voxel "
                "foreground) on the case")

    def positive_case(self, task: TaskSpec, row: dict[str, Any]) -> bool:
        """S5's positive evidence: a Dice for a structure the reference contains above what a blind mask scores on
        the case (an empty mask scored 1.0 against an empty reference is no evidence; nor is an all-ones mask, Dice
        ~0.04 against the demo's organ, which lifted a garbage pilot's S3 to 1.0: round 37). The bar is the constant
        baseline's Dice the evaluator stored per case (0 in an evaluation made before it was: any Dice above 0).
        Here, not in the metric module: scoring a run in the harness must not load nibabel and numpy for it."""
        if task.params.get("kind") == "multilabel":
            return any(_above(row.get(f"dice_{k}"), row.get(f"uniform_dice_{k}"))
                       for k in row.get("reference_labels", []))
        return any(row.get(f"{part}_positive") and _above(row.get(f"{part}_dice"), row.get(f"{part}_constant_dice"))
                   for part in ("organ", "lesion"))
