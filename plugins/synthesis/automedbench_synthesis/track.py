"""The synthesis track: wiring only (staging, contract, metric, gate, rubric, solution, baselines, input floor)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from automedbench.api import CaseVerdict, MetricBlock, PackagedTrack, RatingThresholds, Rubric, StagedData, TaskSpec

from .rubric import track_rubric


class SynthesisTrack(PackagedTrack):
    name = "synthesis"
    demo_stager = ".data.demo:stage_demo"
    source_stager = ".data.stagers:stage_source"
    evaluation_class = ".metric:SynthesisEvaluation"
    demo_solution = ".solution.reference:reference_solution"
    demo_solution_scope = "the generated demos"
    baseline_module = ".baselines"

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        from . import contract

        return contract.check_case(task, case_id, submitted, public)

    def submit_gate(self, task: TaskSpec, staged: StagedData, outputs: Path) -> str | None:
        from . import contract

        return contract.gate(task, staged.case_ids, staged.public, outputs)

    def rubric(self, task: TaskSpec) -> Rubric:
        return track_rubric()

    def rating_thresholds(self, task: TaskSpec, metric: MetricBlock | None) -> RatingThresholds:
        """The release's bands, raised above what the unchanged input scores on this staging: B needs the
        input's Task + `input_margin.okay`, A the input's + `input_margin.good` (A capped at 1.0), so
        submitting the degraded input (0.989 on a phantom, above the release's 0.98 A) never reaches B."""
        return input_floor(task, metric)

    def positive_evidence(self, task: TaskSpec) -> str:
        return ("SSIM above what the unchanged input scores in a case (better than the input), and on MR->CT above "
                "a body outline's (0 HU inside, air outside)")

    def positive_case(self, task: TaskSpec, row: dict[str, Any]) -> bool:
        """Above the input's SSIM on the case and, where the evaluator stored it, the constant baseline's: on
        MR->CT the MR scores ~0 on the HU scale, so a blind body outline was positive evidence (round 39)."""
        ours, identity, constant = row.get("ssim"), row.get("ssim_identity"), row.get("ssim_constant")
        bar = max(identity, constant) if isinstance(identity, float) and isinstance(constant, float) else identity
        return isinstance(ours, float) and isinstance(bar, float) and ours > bar


def input_floor(task: TaskSpec, metric: MetricBlock | None) -> RatingThresholds:
    bands = task.rating
    identity = metric.components.get("ssim_identity_mean") if metric is not None else None
    if not isinstance(identity, float):
        return bands
    margin = task.params["input_margin"]
    okay = max(bands.okay, identity + float(margin["okay"]))
    good = min(1.0, max(bands.good, identity + float(margin["good"])))
    return RatingThresholds(round(max(good, min(okay, 1.0)), 6), round(min(okay, 1.0), 6), bands.min_valid,
                            bands.floor, bands.present_valid)
