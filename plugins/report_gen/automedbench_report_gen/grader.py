"""The optional LLM report grader: an extra component, never part of Task.

Off by default. `--eval-option report_grader.provider=NAME` (any registered model backend) with
`report_grader.model=...` turns it on: the evaluator then leaves one grade request per valid case (the
reference's scored section beside the agent's, which is fenced as agent text), the harness's model-graded
scoring step asks the model after the evaluation, and the core's default `apply_grades` adds the
component `report_grader` (mean of 0 / 0.5 / 1 over the cases; null unless every case was graded), with
`report_grader_graded` / `report_grader_failed` counts and a per-case value.
"""

from __future__ import annotations

from automedbench.api import GradeRequest, PromptPart

GRADER = "report_grader"
INSTRUCTIONS = (
    "You grade a generated medical report against the reference report a clinician wrote for the same study. "
    "Score 1 if the generated report states the same clinically relevant findings (presence or absence, "
    "location, severity, devices) with no clinically relevant error; 0.5 if it gets the main findings right "
    "but misses or adds secondary ones; 0 if it misses a main finding, reports findings the reference does "
    "not support, or contradicts it. Wording, order and length do not matter."
)


def enabled(options: dict[str, str]) -> bool:
    return bool(options.get(f"{GRADER}.provider"))


def grade_request(reference: str, report: str) -> GradeRequest:
    """One case's request: the reference is the dataset's, the report the agent's (fenced by the step)."""
    return GradeRequest(GRADER, INSTRUCTIONS, [PromptPart(reference, label="Reference report"),
                                               PromptPart(report, agent=True, label="Generated report")],
                        levels=[0.0, 0.5, 1.0])
