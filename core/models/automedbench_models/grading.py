"""The model-graded scoring step: grade requests from the isolated evaluator, answered by a model outside it.

The evaluator has no network and no keys, by design, so a metric that needs a model (the VQA LLM answer
judge, the report-generation LLM grader) returns `GradeRequest`s with its case scores. After the
evaluation and before the final score, the engine asks the hook `automedbench_grade_requests`, which this
module answers (`grade_requests`): each request goes to the registered model backend that the eval options
name for its grader (`<grader>.provider`, `<grader>.model`, ...), the replies are cached, and the engine
records the grades and hands them to `Track.apply_grades`, which folds them into the metric.

Rules: every agent-written prompt part is clipped and fenced (`fence_agent_text`, as the LLM judge
does); prompts and replies have size limits; one request per case and prompt, so one case's text never
reaches another case's grade; replies are cached by sha256(grader, model and every setting that can change its
reply (`grader_identity`: base_url, temperature, a models file's entry...), prompt) in an append-only,
fsynced, locked JSONL file read with a size limit, kept in the harness's state folder (never the data
root, never mounted in a sandbox) with every line signed by the harness key: an unsigned line is ignored
and counted (`grade_cache_rejected` in the metric, `cache_rejected` in `grades.json`). A verdict is read
only from the reply as one JSON object, held to a schema where the backend offers it (`replyjson`,
`models.structured_reply`). Null rule: a request the harness cannot get
answered (backend unreachable, key gone, prompt too large) gets a null grade with its reason, recorded in
`grades.json`; the run stays `scored` (the agent did nothing wrong, and the evaluator's facts stand), the
grader's components are null (or fall back as the track documents). What the agent's own text causes
(the provider refusing it, no usable reply to it in ATTEMPTS tries) grades that case at the lowest level
with the reason (`agent_fault`), never null. A missing key or an unknown backend is caught before the
run starts (`automedbench.grades.check_grader_options`: a user error, exit 2).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import attrs
from automedbench.api import (
    ContentRefused,
    Grade,
    GradeError,
    GradeLog,
    GradeRequest,
    GraderUse,
    ReplyError,
    final_json,
    grader_backend,
    grader_identity,
    grader_options,
    require_keys,
    structured_reply,
)
from automedbench.api import render_grade_request as render
from automedbench.engine import harness_key, state_dir

from .signedcache import SignedJsonl

GRADE_CACHE = "grade_cache.jsonl"
REJECTED = "grade_cache_rejected"  # the metric component that counts unsigned cache lines seen
MAX_REPLY_CHARS = 16_000  # a longer reply is unusable (a grade is a number and a sentence)
MAX_CACHE_BYTES = 64 << 20  # a cache file is read up to this size; lines beyond it are not loaded
MAX_CACHE_LINE = 8_000
ATTEMPTS = 3  # replies per request that may be unusable before the grade is null
MAX_FAILURES_IN_A_ROW = 3  # backend errors in a row before the grader's remaining requests are not sent


# ------------------------------------------------------------------ prompt and reply


def cache_key(grader: str, model: str, system: str, prompt: str) -> str:
    return hashlib.sha256(json.dumps([grader, model, system, prompt]).encode("utf-8", "backslashreplace")).hexdigest()


def grade_schema(levels: list[float]) -> dict[str, Any]:
    """The reply's JSON schema, for backends that hold a reply to one (`structured_reply`)."""
    allowed = sorted({float(v) for v in levels}) or [0.0, 1.0]
    return {"type": "object", "additionalProperties": False, "required": ["score", "rationale"],
            "properties": {"score": {"type": "number", "enum": allowed}, "rationale": {"type": "string"}}}


def parse_grade(reply: str, levels: list[float]) -> tuple[float, str]:
    """(score, rationale) from a reply, or GradeError: the reply as one JSON object (`replyjson`: never an
    object quoted before, after or inside reasoning), with only `score` (finite, within the levels' range)
    and `rationale`."""
    if len(reply or "") > MAX_REPLY_CHARS:
        raise GradeError(f"reply of {len(reply)} characters exceeds {MAX_REPLY_CHARS}")
    try:
        data = final_json(reply or "")
        require_keys(data, {"score"}, {"score", "rationale"})
    except ReplyError as exc:
        raise GradeError(str(exc)) from None
    score = data["score"]
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise GradeError("the reply has no numeric score")
    lo, hi = min(levels or [0.0]), max(levels or [1.0])
    if not lo <= float(score) <= hi:
        raise GradeError(f"score {score} is outside {lo:g}..{hi:g}")
    rationale = data.get("rationale", "")
    return float(score), (rationale if isinstance(rationale, str) else "")[:300]


# ------------------------------------------------------------------ cache


class GradeCache:
    """Replies keyed by `cache_key`, one signed JSON line each (`signedcache.SignedJsonl`), in the harness's
    state folder that no sandbox mounts. A line without the harness's MAC (forged, foreign, edited) is
    ignored and counted in `rejected`; the file holds gold answers: mode 0600."""

    def __init__(self, path: Path | None, key: bytes | None = None) -> None:
        if key is None:
            key = harness_key() if path is not None else os.urandom(32)
        self._store = SignedJsonl(path, key, max_bytes=MAX_CACHE_BYTES, max_line=MAX_CACHE_LINE)
        self.path = path

    @property
    def entries(self) -> dict[str, dict[str, Any]]:
        return self._store.entries

    @property
    def rejected(self) -> int:
        return self._store.rejected

    @property
    def note(self) -> str:
        return self._store.note

    def get(self, key: str, grader: str, model: str, levels: list[float]) -> dict[str, Any] | None:
        """The signed entry for exactly this request (key, grader and model all equal, the score a finite
        number within the levels), else None."""
        hit = self._store.get(key)
        if hit is None or hit.get("grader") != grader or hit.get("model") != model:
            return None
        score = hit.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            return None
        if not min(levels or [0.0]) <= float(score) <= max(levels or [1.0]):
            return None
        return hit

    def put(self, entry: dict[str, Any]) -> None:
        self._store.put(entry)


def default_cache_path() -> Path:
    """The grading step's reply cache: in the harness's state folder, never in the data root."""
    return state_dir() / GRADE_CACHE


# ------------------------------------------------------------------ the step


def answer(requests: list[GradeRequest], options: dict[str, str], cache: GradeCache,
           reg: Any = None) -> tuple[list[Grade], list[GraderUse]]:
    """One grade per request, in order; never raises for anything a model or its backend does."""
    by_grader: dict[str, list[int]] = defaultdict(list)
    for index, request in enumerate(requests):
        by_grader[request.grader].append(index)
    grades: list[Grade | None] = [None] * len(requests)
    uses = []
    for grader, indices in by_grader.items():
        use = _answer_grader(grader, [requests[i] for i in indices], options, cache, reg)
        uses.append(use[1])
        for index, grade in zip(indices, use[0], strict=True):
            grades[index] = grade
    return [g for g in grades if g is not None], uses


def _answer_grader(grader: str, requests: list[GradeRequest], options: dict[str, str], cache: GradeCache,
                   reg: Any) -> tuple[list[Grade], GraderUse]:
    provider, sub = grader_options(options, grader)
    model, settings, down = "", "", ""
    if not provider:
        down = f"no model backend named for grader {grader} (--eval-option {grader}.provider=NAME)"
    else:
        try:  # the model as its backend resolves it: a reply is reused only for these very settings
            model, settings = grader_identity(provider, sub, grader, reg)
        except Exception as exc:  # an unknown backend, a models file gone since the check: recorded, never a crash
            down = f"backend unavailable: {type(exc).__name__}: {exc}"[:400]
    use = GraderUse(grader, provider, model.partition(":")[2] or sub.get("model", ""), requests=len(requests))
    backend = None
    grades, failures, seen = [], 0, {}
    for request in requests:
        grade = Grade(request.case_id, grader, request.tag, model=model)
        try:
            system, prompt = render(request)
        except GradeError as exc:
            grades.append(attrs.evolve(grade, error=str(exc)))
            continue
        grade.key = cache_key(grader, f"{model}\0{settings}", system, prompt)
        hit = cache.get(grade.key, grader, model, request.levels) if provider and not down else None
        if hit is not None:
            grades.append(attrs.evolve(grade, score=float(hit["score"]), rationale=str(hit.get("rationale", "")),
                                       cached=True))
            continue
        if grade.key in seen:  # the same prompt twice in one evaluation: one call
            grades.append(attrs.evolve(seen[grade.key], case_id=request.case_id, tag=request.tag))
            continue
        if not down and backend is None:
            try:
                backend = grader_backend(provider, sub, grader, reg)
            except Exception as exc:  # the key vanished, an SDK is missing: recorded, never a crash
                down = f"backend unavailable: {type(exc).__name__}: {exc}"[:400]
        if down:
            grades.append(attrs.evolve(grade, error=down))
            continue
        grade, failed = _ask(backend, grade, system, prompt, request.levels, any(p.agent for p in request.parts))
        failures = failures + 1 if failed else 0
        if failures >= MAX_FAILURES_IN_A_ROW:
            down = f"not sent: the backend failed {failures} times in a row (last: {grade.error})"
        if grade.score is not None and not grade.agent_fault:
            cache.put({"key": grade.key, "grader": grader, "model": model, "score": grade.score,
                       "rationale": grade.rationale})
        seen[grade.key] = grade
        grades.append(grade)
    use.answered = sum(g.score is not None for g in grades)
    use.cached = sum(g.cached for g in grades)
    use.failed = sum(g.score is None for g in grades)
    use.error = next((g.error for g in grades if g.error), None)
    if backend is not None and callable(getattr(backend, "close", None)):
        backend.close()
    return grades, use


def _ask(backend: Any, grade: Grade, system: str, prompt: str, levels: list[float],
         agent_text: bool) -> tuple[Grade, bool]:
    """(grade, backend failed): up to ATTEMPTS replies; a backend error ends the request at once (the
    backend has retried transient errors itself). When the request shows agent text, what that text
    caused (the provider refusing it, or replies with no usable verdict every time) grades the case at
    the lowest level with the reason in `agent_fault`: the agent's own text never nulls the grader."""
    problem, lowest = "no reply", min(levels or [0.0])
    for _ in range(ATTEMPTS):
        try:
            reply = structured_reply(backend, system, prompt, grade_schema(levels))
        except ContentRefused as exc:
            if agent_text:
                why = f"the provider refused the agent's text: {exc}"[:300]
                return attrs.evolve(grade, score=lowest, rationale=why, agent_fault=why), False
            return attrs.evolve(grade, error=f"the provider refused the harness's prompt: {exc}"[:400]), True
        except Exception as exc:
            return attrs.evolve(grade, error=f"backend error: {type(exc).__name__}: {exc}"[:400]), True
        try:
            score, rationale = parse_grade(reply if isinstance(reply, str) else "", levels)
        except GradeError as exc:
            problem = f"unusable reply: {exc}"
            continue
        return attrs.evolve(grade, score=score, rationale=rationale), False
    if agent_text:
        why = f"no usable verdict on the agent's text in {ATTEMPTS} replies ({problem})"[:300]
        return attrs.evolve(grade, score=lowest, rationale=why, agent_fault=why), False
    return attrs.evolve(grade, error=f"{problem} (after {ATTEMPTS} attempts)"), False


def grade_requests(requests: list[GradeRequest], options: dict[str, str], reg: Any = None,
                   cache_path: Path | None = None, persistent: bool = True) -> GradeLog:
    """The hook's answer: one grade per request, which grader model did what, and the count of unsigned
    cache lines seen (a poisoned cache is evidence: recorded in the result, never trusted). Not `persistent`
    (an unverified run): a cache of this evaluation only, with a key of its own, so that the run neither
    reads what verified runs cached nor leaves anything they would read."""
    cache = GradeCache(cache_path or default_cache_path()) if persistent else GradeCache(None)
    grades, uses = answer(requests, options, cache, reg)
    for use in uses:
        use.error = use.error or cache.note or None
        use.cache_rejected = cache.rejected
    return GradeLog(uses, grades, components={REJECTED: float(cache.rejected)} if cache.rejected else {})
