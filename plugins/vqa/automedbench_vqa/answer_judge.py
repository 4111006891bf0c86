"""The optional answer judge for open-ended questions: 0 / 0.5 / 1 per answer, cached per evaluation.

`OfflineAnswerJudge` (deterministic token overlap, `answer_judge=offline`) runs inside the isolated
evaluator. Every other judge is a model backend, reached like every model consumer's through the one
registry (`automedbench.api.get_model`): `answer_judge=llm answer_judge.provider=NAME` names any backend a
distribution registers with `automedbench_register_model_backends` in its `automedbench` entry point (an
LLM provider, or a third party's own judge behind the `ModelBackend` contract). It cannot run in the
evaluator (no network, no keys): the evaluator returns a grade request per open answer
(`model_grade_requests`), the harness's model-graded scoring step asks that backend, and
`fold_answer_grades` puts the grades in place.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from typing import Any

from attrs import define
from automedbench.api import Grade, GradeRequest, PromptPart

from .answers import exact_match, is_closed, normalize, token_f1

SYSTEM_PROMPT = (
    "You grade answers to medical visual questions. Compare the prediction with the gold answer. "
    "Score 1 if they are clinically equivalent (synonyms, paraphrase, expanded acronyms and light hedging "
    "count as equivalent), 0.5 if the prediction is partly right, 0 if it is wrong, contradicts the gold "
    "answer or only speculates. The prediction was written by the system under evaluation."
)  # the grading step adds the agent-text note and the reply format


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


def shortcut(request: JudgeRequest) -> tuple[float, str] | None:
    """(score, why) when no judge is needed: an empty prediction is 0, the gold string itself is 1."""
    prediction = request.prediction.strip()
    if not prediction:
        return 0.0, "empty prediction"
    if prediction.casefold() == request.gold.strip().casefold():
        return 1.0, "exact string match"
    return None


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
        short = shortcut(request)
        if short is not None:
            return AnswerVerdict(short[0], short[1], self.identity)
        prediction = request.prediction.strip()
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


GRADER = "answer_judge"  # the model grader's name: eval options answer_judge.provider, answer_judge.model, ...
MODEL_JUDGE = "llm"  # answer_judge=llm: a model grades open answers through the model-graded scoring step
MODEL_JUDGE_VERSION = "3"  # 3: a grade request answered outside the evaluator (2: fenced; 1: unfenced)


def model_grade_requests(request: JudgeRequest) -> list[GradeRequest]:
    """What the model judge is asked about one text answer (none when a shortcut decides it): the
    answer, and with `raw_fallback` the longer, different raw output too (the better grade is kept)."""
    if shortcut(request) is not None:
        return []

    def ask(prediction: str, tag: str) -> GradeRequest:
        # the prediction is the agent's text: fenced by the grading step, so it cannot pose as the gold
        # answer or as instructions; the question and gold answer are the dataset's
        return GradeRequest(GRADER, SYSTEM_PROMPT, [PromptPart(request.question, label="Question"),
                                                    PromptPart(request.gold, label="Gold answer"),
                                                    PromptPart(prediction, agent=True, label="Prediction")],
                            levels=[0.0, 0.5, 1.0], tag=tag)

    prediction = request.prediction.strip()
    asked = [ask(prediction, "answer")]
    raw = request.raw_output.strip() if request.raw_fallback else ""
    if len(raw) > len(prediction) and raw != prediction:
        asked.append(ask(raw, "raw"))
    return asked


def fold_answer_grades(rows: list[dict[str, Any]], grades: list[Grade]) -> None:
    """Replace each graded row's offline stand-in by the model's snapped grade (the raw output's when that
    is higher). A row whose answer grade is null keeps the offline verdict, marked `judge_fallback` with
    the reason: the original's documented fallback, counted in `judge_fallback_count`."""
    found: dict[str, dict[str, Grade]] = {}
    for grade in grades:
        if grade.grader == GRADER:
            found.setdefault(grade.case_id, {})[grade.tag] = grade
    for row in rows:
        mine = found.get(row.get("case_id"))
        if not mine or "answer" not in mine:
            continue
        answer, raw = mine["answer"], mine.get("raw")
        row["judge"] = f"{MODEL_JUDGE}@{MODEL_JUDGE_VERSION}:{answer.model}"
        if answer.score is None:
            row.update(judge_score=None, judge_fallback=True, judge_cached=False, judge_error=answer.error)
            continue
        score, why = snap(answer.score), answer.rationale
        if raw is not None and raw.score is not None and snap(raw.score) > score:
            score, why = snap(raw.score), f"raw-fallback: {raw.rationale}"
        row.update(score=score, judge_score=score, judge_fallback=False, judge_cached=answer.cached,
                   judge_rationale=why[:200])


class AnswerJudgeCache:
    """Verdicts keyed by sha256(judge ‖ qid ‖ gold ‖ prediction [‖ raw with raw_fallback]), for ONE evaluation.

    In memory only: a cache file that outlives the evaluation could be written by a run (the data root is
    writable where isolation is weak) and would be trusted by every later run, so nothing persists. The
    model judge (`answer_judge=llm`) is cached by the harness's grading step instead, in its state
    folder, every line signed with the harness key."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}

    @staticmethod
    def key(judge: str, request: JudgeRequest) -> str:
        parts = [judge, request.question_id, request.gold, request.prediction]
        if request.raw_fallback:  # the raw output decides the verdict only then
            parts += ["raw-fallback", request.raw_output]
        return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)

    def append(self, entry: dict[str, Any]) -> None:
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


OFFLINE = "offline"
# What `answer_judge` takes: none (0.5·EM + 0.5·token F1), the offline judge, or a registered model backend.
ANSWER_JUDGES = ("none", OFFLINE, MODEL_JUDGE)


def make_answer_judge(name: str, options: dict[str, str]) -> AnswerJudge:
    """The judge that runs inside the evaluator (`offline`); any other name is one clear line."""
    from automedbench.api import UserError, did_you_mean

    if name != OFFLINE:
        raise UserError(f"unknown answer judge {name!r}{did_you_mean(name, list(ANSWER_JUDGES))} (a model "
                        f"backend, a plugin's own judge too, grades with answer_judge={MODEL_JUDGE} "
                        f"{GRADER}.provider=NAME)")
    return OfflineAnswerJudge()
