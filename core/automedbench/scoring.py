"""Stage scores, Agentic, Overall and the rating: the one aggregation rule every track shares.

Rule for stages that could not be scored (judge unavailable): the stage is null; Agentic and Overall
are then null too, never a silent 0 and never a silent renormalisation. `agentic_nulls_as_zero` is
reported beside it as a lower bound.
"""

from __future__ import annotations

import math

from .records import (
    STAGE_NAMES,
    STAGE_WEIGHTS,
    STAGES,
    Aggregate,
    Evaluation,
    ItemVerdict,
    JudgeVerdict,
    MetricBlock,
    RatingThresholds,
    RubricItem,
    StageScore,
)

RULE = (
    "Agentic = sum(w*S)/sum(w), w = S1 .25, S2 .15, S3 .35, S4 .15, S5 .10; a null stage makes Agentic "
    "and Overall null (lower bound with nulls as 0 reported); Overall = 0.5*Agentic + 0.5*Task; Task = "
    "the strict (completeness-gated) metric unless the task or run says partial; isolation breach zeroes all."
)


def judged_stages(rubric: list[RubricItem], verdict: JudgeVerdict | None, tier: str) -> list[StageScore]:
    """S1–S3 from the judge's item verdicts, with Lite auto-passes and `requires` dependencies applied."""
    by_id = {v.id: v for v in verdict.items} if verdict and not verdict.error else {}
    stages = []
    for stage in ("S1", "S2", "S3"):
        items = []
        for item in (i for i in rubric if i.stage == stage):
            if tier == "lite" and item.lite_auto_pass:
                items.append(ItemVerdict(item.id, stage, item.description, 1.0, "auto-pass at the Lite tier",
                                         auto=True))
                continue
            found = by_id.get(item.id)
            if found is None:
                items.append(ItemVerdict(item.id, stage, item.description, None,
                                         verdict.error if verdict and verdict.error else "not graded"))
                continue
            value = snap(found.value, item.levels) if found.value is not None else None
            if item.requires and value:
                parent = next((x for x in items if x.id == item.requires), None)
                if parent is not None and parent.value == 0:
                    value = 0.0
                    found.rationale += f" (forced 0: {item.requires} failed)"
            items.append(ItemVerdict(item.id, stage, item.description, value, found.rationale,
                                     found.evidence_turns, found.auto))
        values = [i.value for i in items]
        score = None if any(v is None for v in values) or not values else round(sum(values) / len(values), 4)
        rule = "ladder 0/0.2/0.5/1.0" if stage == "S3" else "mean of binary items"
        stages.append(StageScore(stage, STAGE_NAMES[stage], score, STAGE_WEIGHTS[stage], items, rule))
    return stages


def snap(value: float, levels: list[float]) -> float:
    clamped = min(1.0, max(0.0, float(value)))
    return min(levels, key=lambda level: abs(level - clamped))


def deterministic_stages(evaluation: Evaluation, submitted: bool) -> list[StageScore]:
    """S4 and S5 from the evaluator's facts about the frozen submission."""
    all_valid = 1.0 if evaluation.all_valid else 0.0
    completion = evaluation.completion
    s4 = round(0.5 * completion + 0.5 * all_valid, 4)
    any_valid = 1.0 if evaluation.valid_cases > 0 else 0.0
    s5 = round((0.5 * any_valid + 0.5 * all_valid) if submitted else 0.0, 4)
    s4_items = [
        ItemVerdict("s4_completion", "S4", "share of cases with outputs", round(completion, 4),
                    f"{evaluation.present_cases}/{evaluation.expected_cases} cases have outputs"),
        ItemVerdict("s4_all_valid", "S4", "every case's outputs pass the checker", all_valid,
                    f"{evaluation.valid_cases}/{evaluation.expected_cases} cases valid"),
    ]
    s5_items = [
        ItemVerdict("s5_submitted", "S5", "submit_results was called", 1.0 if submitted else 0.0,
                    "submitted" if submitted else "never called submit_results: S5 = 0"),
        ItemVerdict("s5_any_valid", "S5", "at least one valid, scored result", any_valid,
                    f"{evaluation.valid_cases} valid case(s)"),
        ItemVerdict("s5_all_valid", "S5", "all outputs valid", all_valid, ""),
    ]
    return [
        StageScore("S4", STAGE_NAMES["S4"], s4, STAGE_WEIGHTS["S4"], s4_items,
                   "0.5*completion + 0.5*[all outputs valid]"),
        StageScore("S5", STAGE_NAMES["S5"], s5, STAGE_WEIGHTS["S5"], s5_items,
                   "[submitted] * (0.5*[any valid result] + 0.5*[all outputs valid])"),
    ]


def rate(evaluation: Evaluation | None, metric: MetricBlock | None, thresholds: RatingThresholds,
         breached: bool) -> tuple[str, str]:
    if breached:
        return "F", "isolation breach"
    if evaluation is None or metric is None:
        return "F", "no evaluation"
    expected = evaluation.expected_cases
    # a whole number of cases; rounded first so that 0.55 * 100 = 55.00000000000001 still asks for 55
    need = math.ceil(round(thresholds.min_valid * expected, 9))
    if evaluation.present_cases < need or evaluation.present_cases == 0:
        missing = expected - evaluation.present_cases
        return "F", f"incomplete: {missing} of {expected} case(s) missing"
    if evaluation.valid_cases < need or evaluation.valid_cases == 0:
        bad = expected - evaluation.valid_cases
        return "F", f"invalid: {bad} case(s) missing or failing the output checker"
    value = round(metric.value, 4)  # the Task value as reported: a rating never contradicts the number shown
    if value >= thresholds.good:
        return "A", f"task {value:.3f} >= {thresholds.good} (good)"
    if value >= thresholds.okay:
        return "B", f"task {value:.3f} >= {thresholds.okay} (okay)"
    if thresholds.floor is not None and value < thresholds.floor:
        return "F", f"task {value:.3f} < {thresholds.floor} (below the C floor)"
    return "C", f"task {value:.3f} < {thresholds.okay}"


def aggregate(stages: list[StageScore], metric: MetricBlock | None, rating: tuple[str, str]) -> Aggregate:
    order = {s.stage: s for s in stages}
    scored = [order[k] for k in STAGES if k in order]
    total_w = sum(STAGE_WEIGHTS.values())
    lower = sum((s.score or 0.0) * s.weight for s in scored) / total_w
    complete = len(scored) == len(STAGES) and all(s.score is not None for s in scored)
    agentic = round(lower, 4) if complete else None
    task = round(metric.value, 4) if metric is not None else None
    overall = round(0.5 * agentic + 0.5 * task, 4) if agentic is not None and task is not None else None
    return Aggregate(agentic, overall, task, rating[0], rating[1], RULE, round(lower, 4))


def zero_for_breach(stages: list[StageScore], metric: MetricBlock | None) -> tuple[list[StageScore],
                                                                                   MetricBlock | None]:
    """A breach zeroes every stage and the task score; the evidence lives in the isolation block."""
    zeroed = [StageScore(s.stage, s.name, 0.0, s.weight, s.items, "zeroed: isolation breach")
              for s in stages]
    if metric is not None:
        metric = MetricBlock(metric.name, 0.0, 0.0, metric.used, metric.components, metric.per_case)
    return zeroed, metric
