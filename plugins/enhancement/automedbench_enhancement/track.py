"""The enhancement track: wiring only (staging, contract, metric, gate, rubric, solution, baselines)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from automedbench.api import (
    S3_LEVELS,
    CaseVerdict,
    PackagedTrack,
    Rubric,
    ScriptedSolution,
    StagedData,
    TaskEvaluation,
    TaskSpec,
    UserError,
    default_rubric,
    reword,
    with_ladder,
)

from .rubric import HINTS, WORDING

HERE = Path(__file__).parent


class EnhancementTrack(PackagedTrack):
    name = "enhancement"
    root = HERE

    def stage_demo(self, task: TaskSpec, dest: Path) -> StagedData:
        from .data.demo import stage_demo

        return stage_demo(task, dest)

    def stage_source(self, task: TaskSpec, dest: Path, source: Path) -> StagedData:
        from .data.stagers import stage_source

        return stage_source(task, dest, source)

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        from . import contract

        return contract.check_case(task, case_id, submitted)

    def evaluation(self, task: TaskSpec, staged: StagedData, options: dict[str, str]) -> TaskEvaluation:
        from .metric import EnhancementEvaluation

        return EnhancementEvaluation(task, staged, options)

    def submit_gate(self, task: TaskSpec, staged: StagedData, outputs: Path) -> str | None:
        from . import contract

        return contract.gate(task, staged.case_ids, outputs)

    def rubric(self, task: TaskSpec) -> Rubric:
        # the original enhancement ladder 0 / 0.2 (shape only) / 0.5 (shape + range) / 1.0 (+ quality check)
        return with_ladder(reword(default_rubric(), WORDING, HINTS), "S3", list(S3_LEVELS))

    def positive_evidence(self, task: TaskSpec) -> str:
        return "SSIM above the identity baseline's (the unprocessed input) in a case"

    def positive_case(self, task: TaskSpec, row: dict[str, Any]) -> bool:
        ours, identity = row.get("ssim"), row.get("ssim_identity")
        return isinstance(ours, float) and isinstance(identity, float) and ours > identity

    def reference_solution(self, task: TaskSpec, tier: str, data_dir: str, workspace: str) -> ScriptedSolution:
        if not task.demo:  # the classical method is a fallback, not what a real run should be judged against
            raise UserError(f"the scripted reference solution covers the generated demos only, not {task.id}")
        from .solution.reference import reference_solution

        return reference_solution(task, tier, data_dir, workspace)

    def baselines(self) -> dict[str, str]:
        from .baselines import DESCRIPTIONS

        return dict(DESCRIPTIONS)

    def write_baseline(self, task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
        from . import baselines

        baselines.write(task, name, staged, dest)
