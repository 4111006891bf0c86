"""The detection track: one 2-D image per case, boxes out, mAP@0.5 over the cohort. Wiring only."""

from __future__ import annotations

import json
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


class DetectionTrack(PackagedTrack):
    name = "detection"
    root = HERE

    def stage_demo(self, task: TaskSpec, dest: Path) -> StagedData:
        from .data.demo import stage_demo

        return stage_demo(task, dest)

    def stage_source(self, task: TaskSpec, dest: Path, source: Path) -> StagedData:
        from .data.stagers import stage_dataset

        return stage_dataset(task, dest, source)

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        from . import contract
        from .metric import task_classes

        path = submitted / contract.PREDICTION_FILE
        _, task_class = task_classes(task)
        parsed = contract.parse_prediction(path, contract.read_meta(public), (task_class,) if task_class else ())
        return CaseVerdict(case_id, True, parsed.valid, parsed.reasons)

    def evaluation(self, task: TaskSpec, staged: StagedData, options: dict[str, str]) -> TaskEvaluation:
        from .metric import DetectionEvaluation

        return DetectionEvaluation(task, staged, options)

    def rubric(self, task: TaskSpec) -> Rubric:
        from .rubric import detection_rubric

        return detection_rubric()

    def positive_evidence(self, task: TaskSpec) -> str:
        return "a true positive (a confident box matching a reference box at IoU >= 0.5) in a case"

    def positive_case(self, task: TaskSpec, row: dict[str, Any]) -> bool:
        return int(row.get("tp_at_threshold") or 0) > 0

    def reference_solution(self, task: TaskSpec, tier: str, data_dir: str, workspace: str) -> ScriptedSolution:
        if not task.demo:  # real images need a trained detector: no scripted method stands in for it
            raise UserError(f"the scripted reference solution covers the generated demo only, not {task.id}")
        from .solution.reference import demo_solution

        return demo_solution(task, tier, data_dir, workspace)

    def baselines(self) -> dict[str, str]:
        from .baselines import BASELINES

        return dict(BASELINES)

    def write_baseline(self, task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
        from .baselines import BASELINES, baseline_boxes

        if name not in BASELINES:
            raise UserError(f"unknown baseline {name!r}")
        from . import contract

        for case_id in staged.case_ids:
            boxes = baseline_boxes(task, name, staged, case_id)
            target = dest / case_id
            target.mkdir(parents=True, exist_ok=True)
            (target / contract.PREDICTION_FILE).write_text(json.dumps({"boxes": boxes}) + "\n")
