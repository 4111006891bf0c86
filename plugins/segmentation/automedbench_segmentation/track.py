"""The segmentation track: organ + lesion (binary pair) and multi-label tasks on NIfTI volumes. Wiring only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from automedbench.api import (
    CaseVerdict,
    PackagedTrack,
    Rubric,
    ScriptedSolution,
    StagedData,
    TaskEvaluation,
    TaskSpec,
    UserError,
)

HERE = Path(__file__).parent


class SegmentationTrack(PackagedTrack):
    name = "segmentation"
    root = HERE

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

    def stage_demo(self, task: TaskSpec, dest: Path) -> StagedData:
        from .data.demo import stage_demo

        return stage_demo(task, dest)

    def stage_source(self, task: TaskSpec, dest: Path, source: Path) -> StagedData:
        from .data.stagers import stage_real

        return stage_real(task, dest, source)

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        from . import contract

        self._cache.begin(case_id)
        return contract.check_case(task, case_id, submitted, public, self._cache)

    def evaluation(self, task: TaskSpec, staged: StagedData, options: dict[str, str]) -> TaskEvaluation:
        from .metric import SegmentationEvaluation

        return SegmentationEvaluation(task, staged, options, cache=self._cache)

    def rubric(self, task: TaskSpec) -> Rubric:
        from .rubric import segmentation_rubric

        return segmentation_rubric(task)

    def positive_evidence(self, task: TaskSpec) -> str:
        if task.params.get("kind") == "multilabel":
            return "Dice > 0 for a label the reference contains"
        return "organ or lesion Dice > 0 against a non-empty reference"

    def positive_case(self, task: TaskSpec, row: dict[str, Any]) -> bool:
        from .metric import positive_case

        return positive_case(task, row)

    def reference_solution(self, task: TaskSpec, tier: str, data_dir: str, workspace: str) -> ScriptedSolution:
        if not task.demo:  # real data needs a real model: no scripted method stands in for it
            raise UserError(f"the scripted reference solution covers the phantom demos only, not {task.id}")
        if task.params.get("phantom") == "airway":
            from .solution.airway import airway_solution

            return airway_solution(task, tier, data_dir, workspace)
        if task.params.get("kind") == "multilabel":
            from .solution.multilabel import multilabel_solution

            return multilabel_solution(task, tier, data_dir, workspace)
        from .solution.reference import organ_lesion_solution

        return organ_lesion_solution(task, tier, data_dir, workspace)

    def baselines(self) -> dict[str, str]:
        from .baselines import BASELINES

        return dict(BASELINES)

    def write_baseline(self, task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
        from .baselines import write_baseline

        write_baseline(task, name, staged, dest)
