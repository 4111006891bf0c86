"""Stage scores, Agentic, Overall and the rating: the one aggregation rule every track shares.

`score_result` is the one entry point: a fresh run, `evaluate` (no agent) and `rejudge` (a new verdict on
a stored run) all combine evaluator facts and judge verdicts through it.

Rule for stages that could not be scored (judge unavailable): the stage is null; Agentic and Overall
are then null too, never a silent 0 and never a silent renormalisation. `agentic_nulls_as_zero` is
reported beside it as a lower bound.
"""

from __future__ import annotations

import functools
import math
from decimal import ROUND_DOWN, Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from attrs import Factory, define

from .judge import JudgeInput
from .records import (
    NON_FINITE_COMPONENT,
    STAGE_NAMES,
    STAGE_WEIGHTS,
    STAGES,
    Aggregate,
    Evaluation,
    FiredCode,
    Header,
    Isolation,
    ItemVerdict,
    JudgeVerdict,
    MetricBlock,
    RatingThresholds,
    Result,
    Rubric,
    Runtime,
    StageScore,
    SubmissionManifest,
    TaskSpec,
)
from .rubric import JUDGED_STAGES, Resolved, default_rubric, describe_conditions
from .rubric import resolve as resolve_rubric
from .runfolder import RunFolder

if TYPE_CHECKING:
    from .track import Track

# S2's model-obtained item where the task declares a method with no weights (`needs.weights: false`)
NO_WEIGHTS = " (this task's method needs no weights or download: met once the method runs and writes outputs)"
DEFAULT_RULES = {rule.stage: rule.text for rule in default_rubric().stages}

RULE = (
    "Agentic = sum(w*S)/sum(w), w = S1 .25, S2 .15, S3 .35, S4 .15, S5 .10; a null stage makes Agentic "
    "and Overall null (lower bound with nulls as 0 reported); Overall = 0.5*Agentic + 0.5*Task (from the "
    "unrounded values, rounded once); Task = "
    "the strict (completeness-gated) metric unless the task or run says partial; isolation breach zeroes all."
)


def judged_stages(resolved: Resolved | None, verdict: JudgeVerdict | None, tier: str) -> list[StageScore]:
    """S1–S3 from the judge's item verdicts, folded by the rubric's stage rules.

    Auto-pass items score 1.0; excluded and not-applicable items are listed but left out of the mean
    (they never make a stage null); `requires` forces an item to 0 when the item it names scored 0."""
    by_id = {v.id: v for v in verdict.items} if verdict and not verdict.error else {}
    rubric = resolved.rubric if resolved is not None else Rubric([], [])
    stages = []
    for stage in JUDGED_STAGES:
        items = []
        for item in (i for i in rubric.items if i.stage == stage):
            state = resolved.states[item.id] if resolved is not None else "graded"
            if state != "graded":
                value = 1.0 if state == "auto-pass" else None
                items.append(ItemVerdict(item.id, stage, item.description, value, resolved.reasons[item.id],
                                         auto=state == "auto-pass", state=state))
                continue
            found = by_id.get(item.id)
            if found is None:
                items.append(ItemVerdict(item.id, stage, item.description, None,
                                         verdict.error if verdict and verdict.error else "not graded"))
                continue
            value = snap(found.value, item.levels, item.kind == "binary") if found.value is not None else None
            if item.requires and value:
                parent = next((x for x in items if x.id == item.requires), None)
                if parent is not None and parent.value == 0:
                    value = 0.0
                    found.rationale += f" (forced 0: {item.requires} failed)"
            items.append(ItemVerdict(item.id, stage, item.description, value, found.rationale,
                                     found.evidence_turns, found.auto, evidence_files=list(found.evidence_files),
                                     evidence_cases=list(found.evidence_cases)))
        # One rule for every track: a tier's auto-passed items are credited only when the agent earned at
        # least one graded item of the same stage (the paper credits Lite's research items to a plan, not
        # to nothing: a do-nothing agent scores 0 here in every track).
        earned = any(i.value for i in items if i.state == "graded")
        for i in items:
            if i.state == "auto-pass" and not earned and any(x.state == "graded" for x in items):
                i.value, i.rationale = 0.0, i.rationale + " (not credited: no graded item of this stage passed)"
        counted = [i.value for i in items if i.state in ("graded", "auto-pass")]
        score = None if any(v is None for v in counted) or not counted else round(sum(counted) / len(counted), 4)
        rule = rubric.stage_rule(stage).text if resolved is not None else DEFAULT_RULES[stage]
        stages.append(StageScore(stage, STAGE_NAMES[stage], score, STAGE_WEIGHTS[stage], items, rule))
    return stages


def snap(value: float, levels: list[float], binary: bool = False) -> float:
    """A judge's value on the item's scale, as the original reads it: a binary item passes from 0.5 up; a
    ladder takes the nearest level, the lower one on a tie."""
    clamped = min(1.0, max(0.0, float(value)))
    if binary:
        return 1.0 if clamped >= 0.5 else 0.0
    return min(sorted(levels), key=lambda level: abs(level - clamped))


MAX_EVIDENCE_CASES = 20  # case ids an S4/S5 item names as its evidence (the page links each to its row)


def deterministic_stages(evaluation: Evaluation, positive_cases: int, evidence: str = "a valid, scored case",
                         submitted: bool = True, positive_ids: list[str] | None = None) -> list[StageScore]:
    """S4 and S5 from the evaluator's facts about the frozen submission.

    S5 follows the paper: 0.5·[at least one case scored with positive metric evidence, as the track
    defines it] + 0.5·[all outputs valid]. A missing submit_results call does not change S5; it is
    recorded in the submission manifest and fires E5. Each item names the cases it was decided from (cut at
    MAX_EVIDENCE_CASES): the missing, invalid or non-positive ones where it fell short, the positive ones that
    earned S5's evidence; an item every case earned names none (the whole case table is its evidence)."""
    def first(cases: list[str]) -> list[str]:
        return cases[:MAX_EVIDENCE_CASES]

    missing = [c.case_id for c in evaluation.cases if not c.present]
    invalid = [c.case_id for c in evaluation.cases if not c.valid]
    positive_ids = list(positive_ids or [])
    valid = [c.case_id for c in evaluation.cases if c.valid]
    earned = set(positive_ids)
    not_positive = [c for c in valid if c not in earned] or invalid
    all_valid = 1.0 if evaluation.all_valid else 0.0
    completion = evaluation.completion
    s4 = round(0.5 * completion + 0.5 * all_valid, 4)
    positive = 1.0 if positive_cases > 0 else 0.0
    s5 = round(0.5 * positive + 0.5 * all_valid, 4)
    s4_items = [
        ItemVerdict("s4_completion", "S4", "share of cases with outputs", round(completion, 4),
                    f"{evaluation.present_cases}/{evaluation.expected_cases} cases have outputs",
                    evidence_cases=first(missing)),
        ItemVerdict("s4_all_valid", "S4", "every case's outputs pass the checker", all_valid,
                    f"{evaluation.valid_cases}/{evaluation.expected_cases} cases valid",
                    evidence_cases=first(invalid)),
    ]
    s5_items = [
        ItemVerdict("s5_positive_evidence", "S5", f"at least one case scored with positive metric evidence "
                    f"({evidence})", positive, f"{positive_cases} case(s) with positive evidence",
                    evidence_cases=first(positive_ids if positive else not_positive)),
        ItemVerdict("s5_all_valid", "S5", "all outputs pass the format check", all_valid,
                    f"{evaluation.valid_cases}/{evaluation.expected_cases} cases valid" + (
                        "" if submitted else "; submit_results was never called (recorded, E5; S5 unchanged)"),
                    evidence_cases=first(invalid)),
    ]
    return [
        StageScore("S4", STAGE_NAMES["S4"], s4, STAGE_WEIGHTS["S4"], s4_items,
                   "0.5*completion + 0.5*[all outputs valid]"),
        StageScore("S5", STAGE_NAMES["S5"], s5, STAGE_WEIGHTS["S5"], s5_items,
                   "0.5*[a case with positive metric evidence] + 0.5*[all outputs valid]"),
    ]


def truncate(value: float, places: int = 3) -> str:
    """`value` cut (not rounded) to `places` decimals, so a shown 0.400 is never a 0.39995 rated B."""
    if not math.isfinite(value):
        return str(value)
    shown = Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places), rounding=ROUND_DOWN)
    return f"{shown:.{places}f}"


def rate(evaluation: Evaluation | None, metric: MetricBlock | None, thresholds: RatingThresholds,
         breached: bool, positive_cases: int | None = None, cap: str | None = None,
         trivial: str | None = None) -> tuple[str, str]:
    """The letter and its reason. One rule in every track: F when the submission is missing, invalid or
    shows no positive evidence in any case (an empty or do-nothing output: `positive_cases` 0; `trivial` says
    why when the track found the whole run at a trivial level); a track's `cap` (a gaming pattern its components
    expose) holds an A or B down to C."""
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
    if thresholds.present_valid and evaluation.valid_cases < evaluation.present_cases:
        failing = evaluation.present_cases - evaluation.valid_cases
        return "F", f"invalid: {failing} present output(s) fail the output checker"
    if positive_cases == 0:
        return "F", f"no case shows positive metric evidence ({trivial or 'an empty or trivial output'})"
    value = metric.value  # unrounded: 0.39995 is below 0.40; the reason shows it truncated, never rounded up
    if value >= thresholds.okay and cap:
        return "C", f"task {truncate(value)} held at C: {cap}"
    if value >= thresholds.good:
        return "A", f"task {truncate(value)} >= {thresholds.good} (good)"
    # a B names A's cut too: a reference rated B ("why not A?") reads it off the line (a C's names B's already)
    if value >= thresholds.okay:
        return "B", f"task {truncate(value)} >= {thresholds.okay} (okay; A from {thresholds.good})"
    if thresholds.floor is not None and value < thresholds.floor:
        return "F", f"task {truncate(value)} < {thresholds.floor} (below the C floor)"
    return "C", f"task {truncate(value)} < {thresholds.okay}"


def aggregate(stages: list[StageScore], metric: MetricBlock | None, rating: tuple[str, str]) -> Aggregate:
    order = {s.stage: s for s in stages}
    scored = [order[k] for k in STAGES if k in order]
    total_w = sum(STAGE_WEIGHTS.values())
    lower = sum((s.score or 0.0) * s.weight for s in scored) / total_w
    complete = len(scored) == len(STAGES) and all(s.score is not None for s in scored)
    agentic = round(lower, 4) if complete else None
    # the rated value, cut (not rounded) to 4 places: a stored 0.7 is never a 0.69999 rated B
    task = math.floor(round(metric.value * 10_000, 6)) / 10_000 if metric is not None else None
    # rounded once, from the unrounded Agentic and Task
    overall = round(0.5 * lower + 0.5 * metric.value, 4) if agentic is not None and metric is not None else None
    return Aggregate(agentic, overall, task, rating[0], rating[1], RULE, round(lower, 4))


def zero_for_breach(stages: list[StageScore], metric: MetricBlock | None) -> tuple[list[StageScore],
                                                                                   MetricBlock | None]:
    """A breach zeroes every stage and the task score; the evidence lives in the isolation block."""
    zeroed = [StageScore(s.stage, s.name, 0.0, s.weight, s.items, "zeroed: isolation breach")
              for s in stages]
    if metric is not None:
        metric = attrs.evolve(metric, strict=0.0, partial=0.0)
    return zeroed, metric


# ------------------------------------------------------------------ one run's record


def run_rubric(track: Track, task: TaskSpec, tier: str, events: list[dict[str, Any]]) -> Resolved:
    """The track's rubric settled for one run (tier rules, conditions on the trajectory). A task whose method
    needs no weights says so in S2's model-obtained item, so every judge grades the same thing."""
    rubric = track.rubric(task)
    if not task.needs.weights:
        rubric = attrs.evolve(rubric, items=[
            attrs.evolve(i, description=i.description + NO_WEIGHTS) if i.id == "s2a_model_obtained" else i
            for i in rubric.items])
    return resolve_rubric(rubric, tier, events, track.rubric_conditions(task))


# judge input extra: the cases the evaluation counts as positive evidence (S5), or the call that reads them
POSITIVE_KEY = "_positive_cases"


def judge_input(run: RunFolder | Path, track: Track, task: TaskSpec, tier: str) -> JudgeInput:
    """What a judge sees of a stored run: plan artefacts, trajectory and brief (never the metric).

    `rubric` holds only the items to grade; auto-passed, excluded and not-applicable ones are settled
    by the rubric, the same for every judge."""
    folder = run if isinstance(run, RunFolder) else RunFolder(run)
    events = folder.events()
    resolved = run_rubric(track, task, tier, events)
    checks = folder.pilot_checks()
    extra: dict[str, Any] = {} if checks is None else {"pilot_checks": checks}

    @functools.cache
    def positive() -> list[str] | None:
        try:
            evaluation = folder.load_evaluation()
        except Exception:  # an unreadable evaluation is no fact: the bound then does not read it
            return None
        return None if evaluation is None else positive_case_ids(track, task, evaluation)

    # for the harness's bound only (`verdictcaps`), read when its S3 cap asks: no judge is shown the metric
    extra[POSITIVE_KEY] = positive
    return JudgeInput(task, tier, resolved.graded, folder.plan_md(), folder.plan_png(), events,
                      folder.brief_text(), extra, resolved=resolved)


def positive_cases(track: Track, task: TaskSpec, evaluation: Evaluation) -> int:
    """How many valid cases the track counts as positive evidence (S5)."""
    return len(positive_case_ids(track, task, evaluation))


def positive_case_ids(track: Track, task: TaskSpec, evaluation: Evaluation) -> list[str]:
    """Valid cases whose metric row the track counts as positive evidence (S5), in case order."""
    if track.no_positive_evidence(task, evaluation.metric) is not None:  # the run is at a trivial level (round 39)
        return []
    rows = {r.get("case_id"): r for r in evaluation.metric.per_case if isinstance(r, dict)}
    return [c.case_id for c in evaluation.cases if c.valid and track.positive_case(task, rows.get(c.case_id, {}))]


@define(kw_only=True)
class ScoreInputs:
    """What one run's record is scored from: the run's facts (state, isolation, the evaluator's evaluation, the
    judge's verdict) and how to read them (the task score, the rubric as settled for the run). Built by a fresh
    run, `evaluate` (no agent: `judged=False`) and `rejudge` (a new verdict on a stored run) alike."""

    track: Track
    task: TaskSpec
    header: Header  # its tier is the run's
    state: str
    end_reason: str
    runtime: Runtime
    isolation: Isolation
    manifest: SubmissionManifest
    evaluation: Evaluation | None = None
    verdict: JudgeVerdict | None = None
    error: str | None = None
    codes: list[FiredCode] = Factory(list)  # the harness's codes so far; H-BREACH is added here on a breach
    task_score: str | None = None  # strict or partial; None: the task file's
    judged: bool = True  # False: S1–S3 are not graded (no agent run)
    resolved: Resolved | None = None  # the rubric as settled for this run (`run_rubric`); stored in the result


def score_result(inputs: ScoreInputs) -> Result:
    """Combine evaluator facts and judge verdicts into the final record (shared by run, evaluate, rejudge)."""
    track, task, tier, state = inputs.track, inputs.task, inputs.header.tier, inputs.state
    evaluation, isolation, judged, resolved = inputs.evaluation, inputs.isolation, inputs.judged, inputs.resolved
    codes = inputs.codes
    metric = evaluation.metric if evaluation is not None else None
    if metric is not None:
        metric.used = inputs.task_score or task.task_score
    stages = []
    if judged:
        if resolved is None:
            resolved = run_rubric(track, task, tier, [])
        stages += judged_stages(resolved, inputs.verdict, tier)
    else:
        stages += judged_stages(None, None, tier)
        for stage in stages:
            stage.rule = "not graded: no agent run"
    positive_ids = positive_case_ids(track, task, evaluation) if evaluation is not None else None
    positive = len(positive_ids) if positive_ids is not None else None
    if evaluation is not None:
        stages += deterministic_stages(evaluation, positive or 0, track.positive_evidence(task),
                                       inputs.manifest.submitted, positive_ids)
    if state in ("infrastructure_failure", "cancelled"):
        stages, metric = [], None
    if isolation.breached:
        stages, metric = zero_for_breach(stages, metric)
    cap = (non_finite_cap(metric) or track.rating_cap(task, metric)) if metric is not None else None
    trivial = track.no_positive_evidence(task, metric) if metric is not None and not positive else None
    rating = rate(evaluation, metric, track.rating_thresholds(task, metric), isolation.breached, positive, cap,
                  trivial)
    agg = aggregate(stages, metric, rating) if stages else Aggregate(
        None, None, None, "F" if state != "cancelled" else "-", state.replace("_", " "), RULE)
    if isolation.breached:
        agg.agentic, agg.overall, agg.task = 0.0, 0.0, 0.0
        codes.append(FiredCode("H-BREACH", f"{len(isolation.evidence)} read(s) of private/decoy paths",
                               evidence_turns=sorted({e.turn for e in isolation.evidence})))
    return Result(inputs.header, state, inputs.end_reason, inputs.runtime, stages, metric, agg, isolation,
                  inputs.manifest, evaluation.cases if evaluation else [], codes, inputs.verdict, inputs.error,
                  describe_conditions(resolved.rubric) if judged and resolved is not None else None)


def non_finite_cap(metric: MetricBlock) -> str | None:
    """A Task whose evaluation held numbers JSON cannot hold (the evaluator wrote them as null: `finite_metric`)
    rates no better than C: a track's caps read a null as no value, so they would pass it; this fails closed."""
    count = metric.components.get(NON_FINITE_COMPONENT) or 0
    return f"{count:.0f} number(s) of the evaluation were not finite (written as null)" if count else None

