"""The enhancement track: wiring only (staging, contract, metric, gate, rubric, solution, baselines)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from automedbench.api import CaseVerdict, PackagedTrack, Rubric, StagedData, TaskSpec

from .rubric import track_rubric


class EnhancementTrack(PackagedTrack):
    name = "enhancement"
    demo_stager = ".data.demo:stage_demo"
    source_stager = ".data.stagers:stage_source"
    evaluation_class = ".metric:EnhancementEvaluation"
    # the classical method is a fallback, not what a real run should be judged against
    demo_solution = ".solution.reference:reference_solution"
    demo_solution_scope = "the generated demos"
    baseline_module = ".baselines"

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        from . import contract

        return contract.check_case(task, case_id, submitted)

    def submit_gate(self, task: TaskSpec, staged: StagedData, outputs: Path) -> str | None:
        from . import contract

        return contract.gate(task, staged.case_ids, outputs)

    def rubric(self, task: TaskSpec) -> Rubric:
            return track_rubric()

    def positive_evidence(self, task: TaskSpec) -> str:
        return "SSIM above the identity baseline's (the unprocessed input) in a case"

    def positive_case(self, task: TaskSpec, row: dict[str, Any]) -> bool:
        ours, identity = row.get("ssim"), row.get("ssim_identity")
        return isinstance(ours, float) and isinstance(identity, float) and ours > identity
