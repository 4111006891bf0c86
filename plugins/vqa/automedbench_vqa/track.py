"""The VQA track: many small text-answer cases (one question each) over one or more images. Wiring only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from automedbench.api import (
    CaseVerdict,
    MetricBlock,
    PackagedTrack,
    Rubric,
    StagedData,
    TaskEvaluation,
    TaskSpec,
    UserError,
)

from . import contract
from .answer_judge import ANSWER_JUDGES, GRADER, MODEL_JUDGE, make_answer_judge
from .data.records import read_question
from .metric import RAW_FALLBACK, VQAEvaluation, apply_grades


class VQATrack(PackagedTrack):
    name = "vqa"
    demo_stager = ".data.demo:stage_demo"
    source_stager = ".data.stagers:stage_dataset"
    demo_solution = ".solution.reference:demo_solution"
    baseline_module = ".baselines"

    def __init__(self) -> None:
        super().__init__()
        self._evaluation: VQAEvaluation | None = None  # the evaluation the contract check reports kinds to

    def evaluation_options(self) -> dict[str, str]:
        return {"answer_judge": "grade open-ended answers with this answer judge (offline, or llm: the registered "
                                "model backend named by answer_judge.provider/.model, a plugin's own judge too); "
                                "default: 0.5·exact match + 0.5·token F1",
                RAW_FALLBACK: "true: with an answer judge, also grade raw_model_output when the answer scores < 1 "
                              "and keep the better verdict (the original's rule, a second guess); default false"}

    def check_evaluation_options(self, options: dict[str, str]) -> dict[str, str]:
        if "answer_judge_cache" in options:
            raise UserError("evaluation option answer_judge_cache was removed: answer-judge verdicts are cached "
                            "per evaluation (a cache file later runs trust is state a run could forge)")
        checked = super().check_evaluation_options(options)
        if checked.get(RAW_FALLBACK, "false").lower() not in ("true", "false"):
            raise UserError(f"evaluation option {RAW_FALLBACK} must be true or false")
        name = checked.get("answer_judge", "none")
        provider = checked.get(f"{GRADER}.provider")
        if (name == MODEL_JUDGE) != bool(provider):
            raise UserError(f"answer_judge={MODEL_JUDGE} and {GRADER}.provider=NAME (a model backend) go together")
        if name not in ANSWER_JUDGES:
            make_answer_judge(name, checked)  # raises the one-line error with suggestions
        return checked

    def evaluation(self, task: TaskSpec, staged: StagedData, options: dict[str, str]) -> TaskEvaluation:
        self._evaluation = VQAEvaluation(task, staged, options)
        return self._evaluation

    def model_graders(self) -> dict[str, str]:
        return {GRADER: "the model answer judge (answer_judge=llm): grades open answers 0/0.5/1"}

    def apply_grades(self, task: TaskSpec, metric: MetricBlock, grades: list) -> MetricBlock:
        return apply_grades(metric, grades)

    def check_case(self, task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
        question = read_question(public)
        result = contract.check_answer_file(submitted / contract.ANSWER_FILE, case_id, question)
        if self._evaluation is not None:
            self._evaluation.note_kind(case_id, result.kind)
        present = (submitted / contract.ANSWER_FILE).exists()
        return CaseVerdict(case_id, present, result.kind == "valid", result.reasons)

    def rubric(self, task: TaskSpec) -> Rubric:
        from .rubric import vqa_rubric

        return vqa_rubric()

    def rating_cap(self, task: TaskSpec, metric: MetricBlock) -> str | None:
        from .chance import blind_answers
        from .metric import repeated_answers

        if repeated_answers(metric.components):
            return (f"one answer per question kind for {metric.components['answer_repeat_share']:.0%} of the "
                    f"questions (the gold answers repeat {metric.components['gold_repeat_share']:.0%})")
        if blind_answers(metric.components):
            return (f"answers agree with the gold no better than the question's wording explains (kappa "
                    f"{metric.components['chance_kappa']:.2f}: {metric.components['chance_observed']:.0%} right, "
                    f"{metric.components['chance_expected']:.0%} by chance)")
        return None

    def positive_evidence(self, task: TaskSpec) -> str:
        return ("a correct answer (score 1: the right letter or yes/no, an exact or judge-equivalent answer) in a run "
                "that agrees with the gold beyond what the wording explains (kappa >= 0.1; where too few questions "
                "measure it, one that does not repeat one answer)")

    def no_positive_evidence(self, task: TaskSpec, metric: MetricBlock) -> str | None:
        """The rating cap's facts: one answer repeated, or answers no better than the wording explains, are right
        on the questions whose gold they happen to be, which is no agreement (S5 gave them 1 and the S3 bound let
        a pilot of them 'pass': round 39). Repetition decides only where kappa cannot be measured: a yes-biased
        reader on a yes/no set repeats 'yes' yet agrees beyond chance (kappa 0.4), a C, not an F (review32)."""
        if _agrees(metric.components):
            return None
        facts = _answered_facts(metric)
        if facts is None:
            return self.rating_cap(task, metric)
        return None if _agrees(facts) else self.rating_cap(task, MetricBlock(
            metric.name, metric.strict, metric.partial, components=facts))

    def positive_case(self, task: TaskSpec, row: dict[str, Any]) -> bool:
        return float(row.get("score") or 0.0) >= 1.0


def _answered_facts(metric: MetricBlock) -> dict[str, Any] | None:
    """The cap's facts over the answered questions alone, when some were left unanswered (None otherwise or for an
    evaluation without per-question keys). The cap counts a blank as a blind guess that missed, so a reader that
    answered half the demo's questions, every one right, showed kappa -0.04 and lost its evidence (F; the
    original's S5 credits any valid result and rates F only below half answered). Over the answered ones a blind
    reader still agrees no better than chance; fewer answers than kappa needs fall back to the repeat check."""
    from .chance import UNANSWERED
    from .metric import cap_facts

    rows = [r for r in metric.per_case if isinstance(r, dict) and "answer_key" in r and "gold_key" in r]
    answered = [r for r in rows if r["answer_key"] != UNANSWERED]
    return cap_facts(answered) if answered and len(answered) < len(rows) else None


def _agrees(facts: dict[str, Any]) -> bool:
    """Agreement beyond the wording, measured (kappa over enough questions) and not blind."""
    from .chance import blind_answers

    return facts.get("chance_kappa") is not None and not blind_answers(facts)
