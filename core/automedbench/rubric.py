"""The rubric model tracks declare, and the generic S1–S3 rubric most of them start from.

A track's `rubric(task)` returns a `Rubric`: stage rules (a ladder with the track's levels, or the mean
of binary items), items per stage, per-tier auto-pass or exclusion, and items that apply only when a
named condition of the trajectory holds. Before judging, `resolve` settles for one run which items a
judge grades; the rules judge and the LLM judge both grade exactly that list, and scoring folds the
verdicts by the same declaration. The declaration is stored in the run's result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from .errors import UserError
from .records import ItemState, Rubric, RubricItem, StageRule

JUDGED_STAGES: tuple[str, ...] = ("S1", "S2", "S3")
S3_LEVELS = [0.0, 0.2, 0.5, 1.0]  # the original's four-level ladder (enhancement, VQA)
S3_PAPER_LEVELS = [0.0, 0.5, 1.0]  # paper Table 7 (segmentation, detection)

# Rule hints the deterministic judge reads. Tracks override any of them per item.
GENERIC_HINTS: dict[str, dict[str, Any]] = {
    "s1c_task_model": {"patterns": [r"\bmodel\b", r"\bmethod\b"]},
    "s1d_researched_3": {"candidates": [], "minimum": 3},
    "s2a_model_obtained": {
        "patterns": [r"snapshot_download", r"from_pretrained", r"hf_hub_download", r"urlretrieve",
                     r"\bwget\b", r"\bcurl\b", r"git clone", r"torch\.hub", r"(?i)method obtained"],
    },
    "s2b_compatibility_check": {"patterns": [r"\.shape", r"dtype", r"spacing|zooms|affine|pixdim|resolution"],
                                "minimum": 2,
                                # header tools whose output is the shape, type and spacing: one on an input is a check
                                "inspectors": [r"\bnib-ls\b", r"\bfslinfo\b", r"\bfslhd\b", r"\bmrinfo\b",
                                               r"\bgdalinfo\b", r"\bidentify\b", r"\bdcmdump\b"]},
    "s2c_env_ready": {"patterns": [r"pip install", r"\bvenv\b", r"__version__", r"importlib\.metadata",
                                   r"import \w+"]},
    "s2e_model_loaded": {"patterns": [r"(?i)model (is )?(loaded|ready)", r"(?i)loaded .*model",
                                      r"(?i)method ready"]},
    "s3_validate": {"checks": {"shape": r"\.shape", "values": r"unique|isin|\bset\(|\.min\(|\.max\(",
                               "plausibility": r"sum\(|count_nonzero|ratio|voxels|mean\("}},
}

S3_DESCRIPTION = ("pilot on ONE case before the batch and check its output: 1.0 pilot + shape + values + "
                  "plausibility, then proceed; 0.5 pilot with partial checks; 0.2 pilot without checks; 0 no pilot")

LITE_AUTO_PASS = {"lite": "auto-pass"}


# ---------------------------------------------------------------- conditions


Events = list[dict[str, Any]]


def _pilot_failed(events: Events) -> bool:
    """An execute_code call that left outputs for at most one case, before any batch, failed."""
    for event in events:
        if event.get("type") != "tool" or event.get("name") != "execute_code" or "cases_with_outputs" not in event \
                or event.get("session"):
            continue
        if event.get("cases_with_outputs", 0) > 1:
            return False
        touched = event.get("changed_cases") or event.get("cases_with_outputs", 0) > 0
        if touched and (event.get("exit_code") != 0 or event.get("timed_out")):
            return True
    return False


# Conditions the core evaluates on the trajectory; a track adds its own through `Track.rubric_conditions`.
CONDITIONS: dict[str, tuple[str, Callable[[Events], bool]]] = {
    "pilot_failed": ("a single-case pilot call (outputs for at most one case, before any batch) exited non-zero "
                     "or timed out", _pilot_failed),
}


# ---------------------------------------------------------------- declaring


def ladder_stage(stage: str, levels: list[float]) -> StageRule:
    """A stage scored by one ladder item whose value is one of `levels` (ascending, 0 and 1 included)."""
    return StageRule(stage, "ladder", sorted(float(v) for v in levels))


def mean_stage(stage: str) -> StageRule:
    return StageRule(stage, "mean", [0.0, 1.0])


def default_rubric() -> Rubric:
    """The generic rubric: six S1 items, five S2 items and the S3 pilot ladder."""
    items = [
        RubricItem("s1a_plan_md", "S1", "plan/plan.md exists"),
        RubricItem("s1b_plan_pipeline", "S1", "plan.md lays out a clear pipeline: load, preprocess, "
                   "inference, post-process/save, validate", requires="s1a_plan_md"),
        RubricItem("s1c_task_model", "S1", "the plan chooses a model or method suited to the task",
                   requires="s1a_plan_md"),
        RubricItem("s1d_researched_3", "S1", "at least 3 distinct candidate models/methods were researched",
                   tiers=dict(LITE_AUTO_PASS)),
        RubricItem("s1e_plan_png", "S1", "plan/plan.png exists (pipeline diagram)", tiers=dict(LITE_AUTO_PASS)),
        RubricItem("s1f_plot_pipeline", "S1", "plan.png shows a clear pipeline diagram",
                   tiers=dict(LITE_AUTO_PASS), requires="s1e_plan_png"),
        RubricItem("s2a_model_obtained", "S2", "model weights / method obtained"),
        RubricItem("s2b_compatibility_check", "S2", "input compatibility checked (shape, spacing, dtype) "
                   "before inference"),
        RubricItem("s2c_env_ready", "S2", "environment set up and dependencies confirmed"),
        RubricItem("s2d_env_fail_within_5", "S2", "environment problems resolved within 5 failed attempts, or "
                   "none occurred"),
        RubricItem("s2e_model_loaded", "S2", "model loaded on the accelerator the run was given (the GPU where "
                   "one is present) and confirmed working"),
        RubricItem("s3_validate", "S3", S3_DESCRIPTION, kind="ladder", levels=list(S3_LEVELS)),
    ]
    items = [attrs.evolve(item, hints=dict(GENERIC_HINTS.get(item.id, {}))) for item in items]
    return Rubric([mean_stage("S1"), mean_stage("S2"), ladder_stage("S3", S3_LEVELS)], items)


def reword(rubric: Rubric, wording: dict[str, str], hints: dict[str, dict[str, Any]]) -> Rubric:
    """Apply a track's wording and rule hints to a rubric's items (ids and stages stay)."""
    unknown = sorted((set(wording) | set(hints)) - {i.id for i in rubric.items})
    if unknown:
        raise ValueError(f"rubric wording or hints name unknown items: {', '.join(unknown)}")
    out = []
    for item in rubric.items:
        merged = {**item.hints, **hints.get(item.id, {})}
        out.append(attrs.evolve(item, description=wording.get(item.id, item.description), hints=merged))
    return attrs.evolve(rubric, items=out)


def with_items(rubric: Rubric, add: list[RubricItem] = (), drop: list[str] = ()) -> Rubric:  # type: ignore[assignment]
    """A rubric with items dropped (by id) and added (placed after the last item of their stage)."""
    items = [i for i in rubric.items if i.id not in set(drop)]
    for new in add:
        last = max((n for n, i in enumerate(items) if i.stage == new.stage), default=len(items) - 1)
        items.insert(last + 1, new)
    return attrs.evolve(rubric, items=items)


def with_ladder(rubric: Rubric, stage: str, levels: list[float], description: str | None = None,
                hints: dict[str, Any] | None = None) -> Rubric:
    """The same rubric with `stage` scored on another ladder (e.g. the paper's {0, 0.5, 1.0} for S3)."""
    rule = ladder_stage(stage, levels)
    stages = [rule if s.stage == stage else s for s in rubric.stages]
    items = [attrs.evolve(i, kind="ladder", levels=list(rule.levels),
                          description=description or i.description, hints={**i.hints, **(hints or {})})
             if i.stage == stage else i for i in rubric.items]
    return attrs.evolve(rubric, stages=stages, items=items)


def check(rubric: Rubric, tiers: list[str], conditions: list[str]) -> list[str]:
    """Problems with a declaration (empty when sound): what `validate-task` and the runner refuse."""
    problems = []
    ids = [i.id for i in rubric.items]
    if len(set(ids)) != len(ids):
        problems.append("duplicate item ids")
    declared = [s.stage for s in rubric.stages]
    if sorted(declared) != sorted(JUDGED_STAGES):
        problems.append(f"stage rules must cover exactly {', '.join(JUDGED_STAGES)} (got {', '.join(declared)})")
    for rule in rubric.stages:
        items = [i for i in rubric.items if i.stage == rule.stage]
        if rule.aggregation == "ladder":
            if len(items) != 1 or items[0].kind != "ladder" or list(items[0].levels) != list(rule.levels):
                problems.append(f"{rule.stage} is a ladder stage: it needs exactly one ladder item with levels "
                                f"{rule.levels}")
            if not rule.levels or rule.levels[0] != 0.0 or rule.levels[-1] != 1.0:
                problems.append(f"{rule.stage} ladder levels must run from 0 to 1")
        elif any(i.kind != "binary" for i in items):
            problems.append(f"{rule.stage} is a mean of binary items, but has a ladder item")
        for tier in tiers:
            always = [i for i in items if i.at_tier(tier) != "excluded" and not i.applies_if]
            if not always:
                problems.append(f"{rule.stage} has no unconditional item at the {tier} tier")
    for item in rubric.items:
        if item.stage not in JUDGED_STAGES:
            problems.append(f"{item.id}: stage {item.stage} is not judged (S4 and S5 are the evaluator's)")
        if item.requires and item.requires not in ids:
            problems.append(f"{item.id}: requires unknown item {item.requires}")
        if item.applies_if and item.applies_if not in conditions:
            problems.append(f"{item.id}: unknown condition {item.applies_if!r}")
        for tier, rule_name in item.tiers.items():
            if tier not in tiers or rule_name not in ("auto-pass", "excluded"):
                problems.append(f"{item.id}: tier rule {tier}={rule_name} (tiers {', '.join(tiers)}; "
                                "rules auto-pass, excluded)")
    return problems


# ---------------------------------------------------------------- one run


@attrs.define
class Resolved:
    """The rubric as it applies to one run: which items a judge grades, and the settled state of the rest."""

    rubric: Rubric
    tier: str
    states: dict[str, ItemState]
    reasons: dict[str, str]

    @property
    def graded(self) -> list[RubricItem]:
        return [i for i in self.rubric.items if self.states[i.id] == "graded"]


def resolve(rubric: Rubric, tier: str, events: Events,
            conditions: dict[str, Callable[[Events], bool]] | None = None) -> Resolved:
    """Settle tier rules and conditions for one run. Conditions come from the core and the track."""
    known = {name: fn for name, (_, fn) in CONDITIONS.items()} | dict(conditions or {})
    held: dict[str, bool] = {}
    states: dict[str, ItemState] = {}
    reasons: dict[str, str] = {}
    for item in rubric.items:
        rule = item.at_tier(tier)
        if rule != "graded":
            states[item.id] = rule
            reasons[item.id] = f"{rule} at the {tier.capitalize()} tier"
            continue
        if item.applies_if:
            if item.applies_if not in known:
                raise UserError(f"rubric item {item.id}: unknown condition {item.applies_if!r}")
            if item.applies_if not in held:
                held[item.applies_if] = bool(known[item.applies_if](events))
            if not held[item.applies_if]:
                states[item.id] = "not-applicable"
                what = rubric.conditions.get(item.applies_if) or CONDITIONS.get(item.applies_if, ("",))[0]
                reasons[item.id] = f"not applicable: {item.applies_if} did not hold ({what})"
                continue
        states[item.id] = "graded"
    return Resolved(rubric, tier, states, reasons)


def describe_conditions(rubric: Rubric) -> Rubric:
    """The rubric with every condition it uses described (what gets stored with a result)."""
    used = {i.applies_if for i in rubric.items if i.applies_if}
    described = {name: rubric.conditions.get(name) or CONDITIONS.get(name, ("",))[0] for name in sorted(used)}
    return attrs.evolve(rubric, conditions=described)
