"""The classification track: one 2-D image per case, one class label out, balanced accuracy or accuracy
over the cohort. Wiring only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from automedbench.api import CaseVerdict, PackagedTrack, Rubric, TaskSpec


class ClassificationTrack(PackagedTrack):
    name = "classification"
    demo_stager = ".data.demo:stage_demo"
    source_stager = ".data.stagers:stage_dataset"
    evaluation_class = ".metric:ClassificationEvaluation"
    # real images need a trained classifier: no scripted method stands in for it
    demo_solution = ".solution.reference:demo_solution"
    baseline_module = ".baselines"

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        from . import contract

        classes, aliases = contract.task_labels(task.params)
        present, parsed = contract.case_prediction(submitted.parent, case_id, classes, aliases)
        return CaseVerdict(case_id, present, parsed.valid, parsed.reasons)

    def shared_outputs(self, task: TaskSpec) -> tuple[str, ...]:
        from . import contract

        return (contract.CSV_FILE,)

    def rubric(self, task: TaskSpec) -> Rubric:
        from .rubric import classification_rubric

        return classification_rubric()

    def positive_evidence(self, task: TaskSpec) -> str:
        return "a correct label (the prediction equals the reference class) in a case"

    def positive_case(self, task: TaskSpec, row: dict[str, Any]) -> bool:
        return bool(row.get("correct"))
