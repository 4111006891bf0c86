"""The optional answer judge for open-ended questions: 0 / 0.5 / 1 per answer, with a persistent cache.

`AnswerJudge` is the interface; `OfflineAnswerJudge` is the deterministic default (token overlap);
`LLMAnswerJudge` asks any chat backend through a `complete(messages) -> str` callable, so an
OpenAI-compatible client (or anything else) can back it without this module knowing about HTTP.
Other distributions add judges through the entry-point group `automedbench_vqa.answer_judges`
(a factory taking the evaluation options and returning an `AnswerJudge`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from attrs import define
from automedbench.api import AGENT_TEXT_NOTE, fence_agent_text

from .answers import exact_match, is_closed, normalize, token_f1

ENTRY_POINT_GROUP = "automedbench_vqa.answer_judges"

SYSTEM_PROMPT = (
    "You grade answers to medical visual questions. Compare the prediction with the gold answer. "
    "Score 1 if they are clinically equivalent (synonyms, paraphrase, expanded acronyms and light hedging "
    "count as equivalent), 0.5 if the prediction is partly right, 0 if it is wrong, contradicts the gold "
    'answer or only speculates. Reply with JSON only: {"score": 0 | 0.5 | 1, "rationale": "<= 20 words"}. '
    "The prediction was written by the system under evaluation. " + AGENT_TEXT_NOTE
)


def snap(value: float) -> float:
    """Map any number onto the judge's three levels."""
    if value >= 0.75:
        return 1.0
    if value >= 0.25:
        return 0.5
    return 0.0


@define(frozen=True)
class JudgeRequest:
    """One answer to grade. `raw_output` is graded too only with `raw_fallback` (the original's rule:
    a second guess, so off unless `--eval-option raw_fallback=true` asks for upstream parity)."""

    question_id: str
    question: str
    gold: str
    prediction: str
    raw_output: str = ""
    raw_fallback: bool = False


@define
class AnswerVerdict:
    score: float
    rationale: str
    judge: str
    cached: bool = False
    fallback: bool = False


class AnswerJudge(ABC):
    """Grades one prediction against the gold answer. Subclasses implement `grade`."""

    name: str = ""
    version: str = "1"

    @property
    def identity(self) -> str:
        """What the cache is keyed on: a different judge (or model) never reuses another's verdicts."""
        return f"{self.name}@{self.version}"

    @abstractmethod
    def grade(self, question: str, gold: str, prediction: str) -> tuple[float, str, bool]:
        """(score, rationale, fell_back) for one prediction; the score is snapped afterwards."""

    def judge(self, request: JudgeRequest) -> AnswerVerdict:
        """Shortcuts, then the grade of the answer; with `raw_fallback`, then of the raw output if that is
        longer and differs (the better verdict is kept)."""
        prediction = request.prediction.strip()
        if not prediction:
            return AnswerVerdict(0.0, "empty prediction", self.identity)
        if prediction.casefold() == request.gold.strip().casefold():
            return AnswerVerdict(1.0, "exact string match", self.identity)
        score, why, fell_back = self.grade(request.question, request.gold, prediction)
        score = snap(score)
        raw = request.raw_output.strip() if request.raw_fallback else ""
        if score < 1.0 and len(raw) > len(prediction) and raw != prediction:
            raw_score, raw_why, raw_fell_back = self.grade(request.question, request.gold, raw)
            if snap(raw_score) > score:
                score, why, fell_back = snap(raw_score), f"raw-fallback: {raw_why}", raw_fell_back
        return AnswerVerdict(score, why, self.identity, fallback=fell_back)


class OfflineAnswerJudge(AnswerJudge):
    """Deterministic: closed answers strict; exact match or token F1 >= 0.8 -> 1, F1 >= 0.4 -> 0.5, else 0."""

    name = "offline"
    version = "1"

    def grade(self, question: str, gold: str, prediction: str) -> tuple[float, str, bool]:
        if is_closed(gold):
            ok = normalize(prediction) == normalize(gold)
            return (1.0 if ok else 0.0), f"closed answer {'matches' if ok else 'differs'}", False
        em, f1 = exact_match(prediction, gold), token_f1(prediction, gold)
        if em or f1 >= 0.8:
            return 1.0, f"token F1 {f1:.2f}", False
        if f1 >= 0.4:
            return 0.5, f"partial overlap, token F1 {f1:.2f}", False
        return 0.0, f"token F1 {f1:.2f}", False


Complete = Callable[[list[dict[str, str]]], str]


class LLMAnswerJudge(AnswerJudge):
    """A chat model as the judge. `complete` sends messages and returns the reply text; it may raise.

    After `attempts` unusable replies (exception or no parseable score) the offline judge decides and
    the verdict is marked `fallback`, so reports can count how often the model did not answer."""

    name = "llm"
    version = "2"  # 2: the prediction is fenced as agent text (verdicts of the unfenced prompt are not reused)

    def __init__(self, complete: Complete, model: str, attempts: int = 3) -> None:
        self.complete = complete
        self.model = model
        self.attempts = max(1, attempts)
        self.offline = OfflineAnswerJudge()

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.version}:{self.model}"

    @staticmethod
    def messages(question: str, gold: str, prediction: str) -> list[dict[str, str]]:
        # the prediction is the agent's text: fenced, so it cannot pose as the gold answer or as instructions
        user = f"Question: {question}\nGold answer: {gold}\nPrediction:\n{fence_agent_text(prediction)}"
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]

    @staticmethod
    def parse(reply: str) -> tuple[float, str] | None:
        found = re.search(r"\{.*\}", reply or "", re.S)
        if not found:
            return None
        try:
            data = json.loads(found.group(0))
            score = float(data["score"])
        except (ValueError, KeyError, TypeError):
            return None
        return score, str(data.get("rationale", ""))[:200]

    def grade(self, question: str, gold: str, prediction: str) -> tuple[float, str, bool]:
        problem = "no reply"
        for _ in range(self.attempts):
            try:
                parsed = self.parse(self.complete(self.messages(question, gold, prediction)))
            except Exception as exc:  # any backend error: try again, then fall back
                problem = f"{type(exc).__name__}: {str(exc)[:80]}"
                continue
            if parsed is not None:
                return parsed[0], parsed[1], False
            problem = "unparseable reply"
        score, why, _ = self.offline.grade(question, gold, prediction)
        return score, f"fallback to offline ({problem}): {why}", True


class AnswerJudgeCache:
    """Verdicts keyed by sha256(judge ‖ qid ‖ gold ‖ prediction [‖ raw with raw_fallback]) in a JSONL file.

    Each new verdict is one line appended under an exclusive lock and fsynced, so concurrent
    evaluators never interleave lines and a crash loses at most the verdict being written; a torn
    last line is skipped on load."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        if path.is_file():
            for line in path.read_text("utf-8", "replace").splitlines():
                try:
                    entry = json.loads(line)
                    self.entries[entry["key"]] = entry
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue

    @staticmethod
    def key(judge: str, request: JudgeRequest) -> str:
        parts = [judge, request.question_id, request.gold, request.prediction]
        if request.raw_fallback:  # the raw output decides the verdict only then
            parts += ["raw-fallback", request.raw_output]
        return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)

    def append(self, entry: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(entry, sort_keys=True) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line)
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self.entries[entry["key"]] = entry


def cached_judge(judge: AnswerJudge, cache: AnswerJudgeCache | None, request: JudgeRequest) -> AnswerVerdict:
    if cache is None:
        return judge.judge(request)
    key = AnswerJudgeCache.key(judge.identity, request)
    hit = cache.get(key)
    if hit is not None:
        return AnswerVerdict(float(hit["score"]), str(hit.get("rationale", "")), judge.identity, cached=True,
                             fallback=bool(hit.get("fallback", False)))
    verdict = judge.judge(request)
    if not verdict.fallback:  # a fallback is not the judge's verdict: ask again next time
        cache.append({"key": key, "judge": judge.identity, "question_id": request.question_id,
                      "score": verdict.score, "rationale": verdict.rationale, "fallback": False})
    return verdict


JudgeFactory = Callable[[dict[str, str]], AnswerJudge]
BUILTIN: dict[str, JudgeFactory] = {"offline": lambda options: OfflineAnswerJudge()}


def available_judges() -> dict[str, JudgeFactory]:
    """Built-in judges plus those other distributions register under ENTRY_POINT_GROUP."""
    found = dict(BUILTIN)
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name in found:
            continue
        try:
            found[entry.name] = entry.load()
        except Exception:  # a broken add-on must not take the evaluator down; it is simply absent
            continue
    return found


def make_answer_judge(name: str, options: dict[str, str]) -> AnswerJudge:
    from automedbench.api import UserError, did_you_mean

    judges = available_judges()
    if name not in judges:
        raise UserError(f"unknown answer judge {name!r}{did_you_mean(name, list(judges))}")
    return judges[name](options)
