"""Model grades as a contract: one grade, the record of a grading, how a track folds grades into its metric,
and the graders' options.

A plugin answering the hook `automedbench_grade_requests` (automedbench-models' grading step) asks the
models; the engine (`evaluator.grade_evaluation`) records its `GradeLog`; a track declares its graders
(`Track.model_graders`) and folds what came back (`Track.apply_grades`, by default `fold_grades`).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from typing import Any

import attrs
from attrs import Factory, define

from .agenttext import AGENT_TEXT_NOTE, fence_agent_text
from .errors import UserError
from .modelconfig import resolve
from .models import get_model
from .records import GradeRequest, MetricBlock

MAX_AGENT_CHARS = 8_000  # one agent-written part, before fencing (the rest is cut, the cut said)
MAX_PROMPT_CHARS = 40_000  # system + prompt after fencing: a larger request is not sent (null grade)
REPLY_FORMAT = ('Reply with one JSON object only: {{"score": <a number from {lo:g} to {hi:g}{levels}>, '
                '"rationale": "<at most 30 words>"}}.')


class GradeError(ValueError):
    """A request that cannot be sent or a reply that is unusable: the grade is null with this reason."""


def clip_agent_text(text: str, limit: int = MAX_AGENT_CHARS) -> tuple[str, str]:
    """(text cut to `limit`, a note of the cut outside the fence or '')."""
    if len(text) <= limit:
        return text, ""
    return text[:limit], f"(the agent's text was cut here: {len(text) - limit} more characters not shown)"


def render_grade_request(request: GradeRequest) -> tuple[str, str]:
    """(system, prompt) for one request, as a grading step sends it: agent parts fenced, the reply format said
    last; GradeError when it is too large to send. Part of the contract, so a track can see what it asks."""
    levels = sorted(float(v) for v in request.levels) or [0.0, 1.0]
    lines = []
    for part in request.parts:
        if part.label:
            lines.append(f"{part.label}:")
        if part.agent:
            text, cut = clip_agent_text(part.text)
            lines.append(fence_agent_text(text))
            if cut:
                lines.append(cut)
        else:
            lines.append(part.text)
    allowed = f", one of {', '.join(f'{v:g}' for v in levels)}" if len(levels) > 2 else ""
    lines += ["", REPLY_FORMAT.format(lo=levels[0], hi=levels[-1], levels=allowed)]
    system = request.instructions
    if any(p.agent for p in request.parts):
        system = f"{system}\n{AGENT_TEXT_NOTE}"
    prompt = "\n".join(lines)
    if len(system) + len(prompt) > MAX_PROMPT_CHARS:
        raise GradeError(f"prompt of {len(system) + len(prompt)} characters exceeds {MAX_PROMPT_CHARS}; not sent")
    return system, prompt


@define
class Grade:
    """A model's answer to one grade request; `score` is None when it could not be had (`error` says why)."""

    case_id: str
    grader: str
    tag: str = ""
    score: float | None = None
    rationale: str = ""
    model: str = ""  # provider:model that produced it (or would have)
    key: str = ""  # the cache key: sha256 of grader, model and prompt
    cached: bool = False
    error: str | None = None
    agent_fault: str = ""  # why the agent's own text put this case at the lowest level (refused, unusable)


# Why every grade is null when no plugin answers grade requests (and the pre-run refusal's remedy)
NO_GRADER = ("no model-graded scoring step is installed (it comes with automedbench-models): "
             "pip install 'automedbench[models]'")


@define
class GraderUse:
    """What one grader did in one evaluation: which model, how many requests answered, cached, failed."""

    grader: str
    provider: str
    model: str
    requests: int = 0
    answered: int = 0
    cached: int = 0
    failed: int = 0
    error: str | None = None  # the first failure, for the report
    cache_rejected: int = 0  # cache lines ignored because the harness did not sign them (forged or foreign)


@define
class GradeLog:
    """`grades.json` in the run folder: which grader model produced which grade. `components` are metric
    components the grading step adds beside the track's (evidence such as rejected cache lines, never Task)."""

    graders: list[GraderUse] = Factory(list)
    grades: list[Grade] = Factory(list)
    duration_s: float = 0.0
    components: dict[str, float] = Factory(dict)


def grader_options(options: dict[str, str], grader: str) -> tuple[str, dict[str, str]]:
    """(provider, model options) from the eval options `<grader>.provider` and `<grader>.<option>`."""
    prefix = grader + "."
    sub = {k[len(prefix):]: v for k, v in options.items() if k.startswith(prefix)}
    return sub.pop("provider", ""), sub


def check_grader_options(options: dict[str, str], grader: str, reg: Any = None) -> None:
    """Refuse a grader's options now (no grading step installed, unknown backend, no model, unset key
    variable): one clear line before the run starts, not a null grade after it."""
    from .plugins import registry

    provider, sub = grader_options(options, grader)
    if not provider:
        if sub:
            raise UserError(f"eval options {', '.join(grader + '.' + k for k in sorted(sub))} need "
                            f"{grader}.provider=NAME (a registered model backend, e.g. openai)")
        return
    if not (reg or registry()).pm.hook.automedbench_grade_requests.get_hookimpls():
        raise UserError(f"model grader {grader} (--eval-option {grader}.provider={provider}): {NO_GRADER}")
    backend = grader_backend(provider, sub, grader, reg)
    close = getattr(backend, "close", None)
    if callable(close):
        close()


# A grader model's settings that cannot change what it replies: how it is reached, retried and priced
NOT_IN_REPLY = ("api_key_env", "timeout_s", "max_retries", "backoff_s", "max_backoff_s", "prices", "pricing")


def grader_identity(provider: str, sub: dict[str, str], grader: str, reg: Any) -> tuple[str, str]:
    """(`provider:model`, a digest of every setting that can change the model's reply) of the model a grader's
    options name, resolved as its backend will be (a `config=FILE entry=NAME` entry, the provider's defaults).

    A reply is reused only for the same identity: keyed by the `model` option alone, two entries of one models
    file (no `model` option: both "openai:") or one model name served at another `base_url`, or asked at another
    temperature, answered for each other from the grading cache."""
    from .plugins import registry

    try:
        component = (reg or registry()).get("model", provider)
        cfg = resolve(provider, dict(sub), "grader", component.declared)
    except UserError as exc:
        raise UserError(f"model grader {grader} (--eval-option {grader}.KEY=VALUE): {exc}") from None
    settings = {k: v for k, v in sorted(attrs.asdict(cfg).items()) if k not in NOT_IN_REPLY}
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()
    return f"{provider}:{cfg.model}", digest


def grader_backend(provider: str, sub: dict[str, str], grader: str, reg: Any) -> Any:
    """The model backend a grader's options name; an unknown one or a missing key is one line naming the grader."""
    try:
        return get_model(provider, dict(sub), role="grader", reg=reg)
    except UserError as exc:
        raise UserError(f"model grader {grader} (--eval-option {grader}.KEY=VALUE): {exc}") from None


def fold_grades(metric: MetricBlock, grades: list[Grade]) -> MetricBlock:
    """The default `Track.apply_grades`: per case `<grader>[_<tag>]` = the score (None if unanswered);
    components `<name>` = the mean over cases (null unless every request was answered: a mean over the
    answered ones only would be biased), `<name>_graded` and `<name>_failed` counts. Task is untouched."""
    per_case = [dict(r) if isinstance(r, dict) else r for r in metric.per_case]
    rows = {r.get("case_id"): r for r in per_case if isinstance(r, dict)}
    per_name: dict[str, list[float | None]] = defaultdict(list)
    for grade in grades:
        name = f"{grade.grader}_{grade.tag}" if grade.tag else grade.grader
        per_name[name].append(grade.score)
        row = rows.get(grade.case_id)
        if row is not None:
            row[name] = grade.score
    components, counts = dict(metric.components), list(metric.counts)
    for name, scores in per_name.items():
        answered = [s for s in scores if s is not None]
        complete = len(answered) == len(scores) and answered
        components[name] = round(sum(answered) / len(answered), 4) if complete else None
        components[f"{name}_graded"] = float(len(answered))
        components[f"{name}_failed"] = float(len(scores) - len(answered))
        counts += [c for c in (f"{name}_graded", f"{name}_failed") if c not in counts]
    return attrs.evolve(metric, components=components, per_case=per_case, counts=counts)
