"""The report-generation track: one study (all its views) in, one `report.txt` out. Wiring only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from automedbench.api import (
    CaseVerdict,
    MetricBlock,
    PackagedTrack,
    RatingThresholds,
    Rubric,
    ScoringNeed,
    ScriptedSolution,
    StagedData,
    TaskEvaluation,
    TaskSpec,
)

from . import contract
from .rubric import report_rubric


class ReportTrack(PackagedTrack):
    name = "report_gen"

    def stage_demo(self, task: TaskSpec, dest: Path) -> StagedData:
        from .data.demo import stage_demo

        return stage_demo(task, dest)

    def stage_source(self, task: TaskSpec, dest: Path, source: Path) -> StagedData:
        from .data.stagers import stage_dataset

        return stage_dataset(task, dest, source)

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        present, reasons = contract.check_report_file(submitted / contract.REPORT_FILE, task)
        return CaseVerdict(case_id, present, present and not reasons, reasons)

    def scoring_needs(self, task: TaskSpec) -> tuple[ScoringNeed, ...]:
        """Every task's Task holds METEOR, whose jar needs a Java runtime in the evaluator."""
        from .nlg import java_need

        return (java_need(),)

    def evaluation_options(self) -> dict[str, str]:
        return {"clinical_backend": "rules (default, offline: Task is 'mlrg-offline') or models (the real CheXbert "
                                    "from chexbert_weights + bert_dir; with radgraph=1 also RadGraph: 'mlrg-7')",
                "chexbert_weights": "path to CheXbert's chexbert.pth (clinical_backend=models)",
                "bert_dir": "path to a local bert-base-uncased folder (config, vocab; clinical_backend=models)",
                "radgraph": "1 to score the RadGraph slot with the radgraph package and its cached weights"}

    def model_graders(self) -> dict[str, str]:
        from .grader import GRADER

        return {GRADER: "optional LLM report grader: an extra component (0/0.5/1 per case), never in Task"}

    def check_evaluation_options(self, options: dict[str, str]) -> dict[str, str]:
        checked = super().check_evaluation_options(options)
        from .clinical import make_scorer

        if checked.get("clinical_backend", "rules") not in ("", "rules"):
            make_scorer(checked)  # one clear line now rather than an evaluator failure later
        return checked

    def evaluation(self, task: TaskSpec, staged: StagedData, options: dict[str, str]) -> TaskEvaluation:
        from .metric import ReportEvaluation

        return ReportEvaluation(task, staged, options)

    def rubric(self, task: TaskSpec) -> Rubric:
        return report_rubric()

    def rating_thresholds(self, task: TaskSpec, metric: MetricBlock | None) -> RatingThresholds:
        """`mlrg-offline` is rated on its own bands (task params `offline_rating`, measured on the demo's
        baselines); MLRG-7 and PathCap's nlg-3 on the task file's `rating` (the original's 0.80 / 0.55)."""
        bands = task.params.get("offline_rating")
        if metric is None or metric.name != "mlrg-offline" or not isinstance(bands, dict):
            return task.rating
        return RatingThresholds(float(bands["good"]), float(bands["okay"]), task.rating.min_valid, task.rating.floor)

    def rating_cap(self, task: TaskSpec, metric: MetricBlock) -> str | None:
        from .codes import templated

        if templated(metric.components):
            return (f"one report template (word overlap >= 0.9) for {metric.components['template_share']:.0%} of "
                    "the studies")
        return None

    def positive_evidence(self, task: TaskSpec) -> str:
        return "a report scored above 0 that is not one template copied to most studies"

    def positive_case(self, task: TaskSpec, row: dict[str, Any]) -> bool:
        return bool(row.get("positive"))

    def trivial_baselines(self) -> dict[str, str]:
        from .baselines import TRIVIAL

        return dict(TRIVIAL)

    def reference_solution(self, task: TaskSpec, tier: str, data_dir: str, workspace: str) -> ScriptedSolution:
        if not task.demo:
            raise self.demo_only(task)
        from .solution.reference import demo_solution

        return demo_solution(task, tier, data_dir, workspace)

    def baselines(self) -> dict[str, str]:
        from .baselines import BASELINES

        return dict(BASELINES)

    def write_baseline(self, task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
        from .baselines import write_baseline

        write_baseline(task, name, staged, dest)
