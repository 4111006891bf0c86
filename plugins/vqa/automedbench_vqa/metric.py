"""Per-question scores and the task metric: accuracy over ALL expected questions (missing = 0).

MCQ questions score their letter; text questions score closed (yes/no, strict) or open (0.5·EM +
0.5·token F1). With an answer judge configured, every text answer (yes/no ones too, as the original) scores
the judge's 0/0.5/1, and `yes_no_accuracy` stays the strict yes/no value. Breakdowns by question type,
body system and modality use the private facts, so unanswered questions count in their group.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import attrs
from attrs import Factory, define
from automedbench.api import (
    CasePicture,
    CaseScore,
    Grade,
    GradeRequest,
    MetricBlock,
    StagedData,
    TaskEvaluation,
    TaskSpec,
)

from . import contract
from .answer_judge import (
    MODEL_JUDGE,
    AnswerJudge,
    AnswerJudgeCache,
    JudgeRequest,
    OfflineAnswerJudge,
    cached_judge,
    fold_answer_grades,
    make_answer_judge,
    model_grade_requests,
)
from .answers import is_closed, mcq_score, normalize, normalize_label, question_form, text_scores
from .chance import UNANSWERED, agreement_beyond_chance
from .data.records import FACTS, read_private, read_question

MAX_GROUPS = 40
RAW_FALLBACK = "raw_fallback"


@define
class EvaluationState:
    """What one evaluation accumulates besides the scores: the answer judge and the checker's kinds."""

    judge: AnswerJudge | None = None
    cache: AnswerJudgeCache | None = None
    raw_fallback: bool = False
    model_judge: bool = False  # answer_judge=llm: grade requests for the model-graded scoring step
    kinds: dict[str, str] = Factory(dict)


def score_question(record: dict[str, Any], gold: dict[str, Any], question: dict[str, Any],
                   state: EvaluationState) -> tuple[dict[str, Any], list[GradeRequest]]:
    """The question's metric values, and the grade requests the model answer judge leaves for later."""
    facts = {k: gold.get(k, "") for k in FACTS}
    # the question's wording (public) groups it with its template's other questions for the chance check
    facts |= {"question_key": _key(question.get("question"))[:80], "form": question_form(question.get("question"))}
    label = str(gold.get("answer_label") or "")
    if label:
        options = question.get("options") or {}
        return {"score": mcq_score(record.get("predicted_label"), label, options), "kind": "mcq",
                "answer_key": _letter_key(record.get("predicted_label"), options),
                "gold_key": _letter_key(label, options),
                # a label-only answer (a blank text, valid as the original's: the checker strips it) is read as
                # the text of its option
                "answer_text_key": _answer_key(str(record.get("predicted_answer") or "").strip() or options.get(
                    normalize_label(record.get("predicted_label"), options), "")),
                "gold_text_key": _answer_key(gold.get("answer_text")),
                **facts}, []
    prediction = str(record.get("predicted_answer") or "")
    scores = text_scores(prediction, gold.get("answer_text", ""))
    values: dict[str, Any] = {"score": float(scores["score"]), "kind": "closed" if scores["closed"] else "open",
                              "exact_match": scores["exact_match"], "token_f1": scores["token_f1"],
                              "answer_key": _answer_key(prediction), "gold_key": _answer_key(gold.get("answer_text")),
                              **facts}
    if scores["closed"]:
        values["yes_no_strict"] = float(scores["score"])  # yes_no_accuracy stays strict under a judge (the original's)
    requests: list[GradeRequest] = []
    if state.judge is not None:  # the original grades every answered text question, yes/no ones included
        request = JudgeRequest(str(gold.get("question_id", "")), str(question.get("question", "")),
                               str(gold.get("answer_text", "")), prediction, str(record.get("raw_model_output", "")),
                               raw_fallback=state.raw_fallback)
        verdict = cached_judge(state.judge, state.cache, request)
        values.update(score=verdict.score, judge_score=verdict.score, judge_fallback=verdict.fallback,
                      judge_cached=verdict.cached)
        if state.model_judge:  # the model grades it after the evaluation; the offline verdict stands in
            requests = model_grade_requests(request)
    return values, requests


REPEAT_SHARE = 0.8  # one answer (per kind) for this share of questions or more ...
REPEAT_MARGIN = 0.2  # ... and this much more often than the gold answers repeat: held at C


def _key(value: Any) -> str:
    """An answer reduced for repetition counting: lower case, words only (bounded)."""
    return " ".join(str(value or "").lower().replace(".", " ").split())[:200]


def _answer_key(value: Any) -> str:
    """An answer as the scorer compares it (`answers.normalize`: punctuation gone, yes/no synonyms and number
    words unified), bounded: the rating caps count agreement and repeats in the scorer's terms. A looser key
    let spellings the scorer credits ("yes ???", "positive" for yes) differ from every gold key, so the chance
    a blind answerer needs fell to 0 (kappa 0.48, C -> A) and one answer in many spellings escaped the
    repeat share."""
    return normalize(str(value or "")[:2000])[:200]


def _letter_key(value: Any, options: Any = None) -> str:
    """An MCQ label as the scorer reads it (`normalize_label`: "(b)" is B); the raw key when it names none."""
    return normalize_label(str(value or "")[:2000], options) or _key(value)


# A question left unanswered (missing, invalid, a placeholder, a skip) stands for the blind answer in the rating
# caps: one more copy of its kind's commonest answer in the repeat share, a blind guess that missed in the
# chance check (chance.py). So answering less can never turn a cap off (issue 35: five blanks did, C -> A).


def repeat_share(rows: list[dict[str, Any]], field: str) -> float:
    """Share of the questions answered by the most common `field` value of their kind (MCQ, text): 1.0 when every
    MCQ gets one letter and every text question one answer (a constant or label-prior guess). An unanswered
    question counts as one more of its kind's commonest answer (the blind answer it stands for)."""
    groups: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    blank: dict[str, int] = defaultdict(int)
    for row in rows:
        if field in row:
            kind = "mcq" if row.get("kind") == "mcq" else "text"
            if row[field] == UNANSWERED:
                blank[kind] += 1
            else:
                groups[kind][row[field]] += 1
    kinds = set(groups) | set(blank)
    total = sum(sum(groups[k].values()) + blank[k] for k in kinds)
    return round(sum(max(groups[k].values(), default=0) + blank[k] for k in kinds) / total, 4) if total else 0.0


def cap_facts(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """The rating cap's facts over `rows`: the per-kind repeat shares of the answers and of the gold, and the
    agreement beyond chance."""
    return {"answer_repeat_share": repeat_share(rows, "answer_key"),
            "gold_repeat_share": repeat_share(rows, "gold_key"), **agreement_beyond_chance(rows)}


def repeated_answers(components: dict[str, Any]) -> bool:
    """Most questions get one answer while the gold answers vary: the rating cap's and S5's fact."""
    share, gold = components.get("answer_repeat_share"), components.get("gold_repeat_share")
    return share is not None and gold is not None and share >= REPEAT_SHARE and share >= gold + REPEAT_MARGIN


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


def unanswered_row(gold: dict[str, Any], question: dict[str, Any], verdict: str) -> dict[str, Any]:
    """A question with no valid answer: 0, with what the rating caps need to count it as the blind answer
    (its wording and form, the gold's key, and UNANSWERED as its answer)."""
    closed = is_closed(gold.get("answer_text", ""))
    kind = "mcq" if gold.get("answer_label") else ("closed" if closed else "open")
    row = {"score": 0.0, "kind": kind, "valid": False, "verdict": verdict, **{k: gold.get(k, "") for k in FACTS},
           "question_key": _key(question.get("question"))[:80], "form": question_form(question.get("question")),
           "answer_key": UNANSWERED}
    if kind == "mcq":
        row |= {"gold_key": _letter_key(gold.get("answer_label"), question.get("options")),
                "answer_text_key": UNANSWERED, "gold_text_key": _answer_key(gold.get("answer_text"))}
    else:
        row["gold_key"] = _answer_key(gold.get("answer_text"))
    return row


# the components that count questions (printed whole: "skipped 0", not a score's "0.000")
COUNTS = ("answered", "skipped", "placeholders", "yes_no_count", "open_count", "judge_fallback_count")


def aggregate(name: str, scores: list[Any], case_ids: list[str], staged: StagedData,
              state: EvaluationState) -> MetricBlock:
    rows = []
    for qid, score in zip(case_ids, scores, strict=True):
        if score is not None:
            values = dict(score.values)
        else:
            values = unanswered_row(read_private(staged.private, qid), read_question(staged.public / qid),
                                    state.kinds.get(qid, "missing"))
        rows.append({"case_id": qid, **values})
    accuracy, by_kind, by_group = summarize(rows)
    complete = len(scores) == len(case_ids) and all(s is not None for s in scores)
    kinds = list(state.kinds.values())
    comps: dict[str, float | None] = {
        "accuracy": accuracy,
        "answered": float(sum(s is not None for s in scores)),
        "skipped": float(kinds.count("skip")),
        "placeholders": float(kinds.count("placeholder")),
    }
    comps |= by_kind
    comps |= cap_facts(rows)
    if state.judge is not None:
        comps["judge_fallback_count"] = float(sum(bool(r.get("judge_fallback")) for r in rows))
    comps |= by_group
    return MetricBlock(name, accuracy if complete else 0.0, accuracy, components=comps, per_case=rows,
                       counts=[k for k in COUNTS if k in comps])


def summarize(rows: list[dict[str, Any]]) -> tuple[float, dict[str, float | None], dict[str, float | None]]:
    """(accuracy, components by answer kind, components by group) from the per-question rows: what
    the model-graded answer judge changes when its grades replace the offline stand-ins."""
    groups, by_kind = defaultdict(list), defaultdict(list)
    em, f1 = [], []
    yes_no: list[float] = []
    for values in rows:
        by_kind[values["kind"]].append(values["score"])
        if values["kind"] == "closed":
            yes_no.append(float(values.get("yes_no_strict", values["score"])))
        if values["kind"] != "mcq":
            em.append(float(values.get("exact_match", 0.0)))
            f1.append(float(values.get("token_f1", 0.0)))
        for fact in FACTS:
            if values.get(fact):
                groups[f"{fact}={values[fact]}"].append(values["score"])
    comps: dict[str, float | None] = {}
    if by_kind["mcq"]:
        comps["mcq_accuracy"] = _mean(by_kind["mcq"])
    if yes_no:
        comps["yes_no_accuracy"] = _mean(yes_no)
        comps["yes_no_count"] = float(len(yes_no))
    if by_kind["open"]:
        comps["open_accuracy"] = _mean(by_kind["open"])
        comps["open_count"] = float(len(by_kind["open"]))
    if em:
        comps["exact_match"], comps["token_f1"] = _mean(em), _mean(f1)
    top = sorted(groups, key=lambda k: (-len(groups[k]), k))[:MAX_GROUPS]
    return _mean([r["score"] for r in rows]), comps, {key: _mean(groups[key]) for key in top}


def apply_grades(metric: MetricBlock, grades: list[Grade]) -> MetricBlock:
    """The model judge's grades in place of the offline stand-ins, then the accuracy components again."""
    rows = [dict(r) for r in metric.per_case]
    fold_answer_grades(rows, grades)
    accuracy, by_kind, by_group = summarize(rows)
    comps = {**metric.components, "accuracy": accuracy, **by_kind, **by_group, **agreement_beyond_chance(rows),
             "judge_fallback_count": float(sum(bool(r.get("judge_fallback")) for r in rows))}
    complete = not any(r.get("valid") is False for r in rows)
    return attrs.evolve(metric, strict=accuracy if complete else 0.0, partial=accuracy, components=comps,
                        per_case=rows,
                        counts=list(dict.fromkeys([*metric.counts, *(k for k in COUNTS if k in comps)])))

class VQAEvaluation(TaskEvaluation):
    """One evaluation: the answer judge and its cache (when configured), each question's score, the fold.

    `kinds` is filled by the track's contract check (valid, skip, placeholder, ...) for the cases that
    are never scored, so the breakdown can say why a question counts 0."""

    def __init__(self, task: TaskSpec, staged: StagedData, options: dict[str, str] | None = None) -> None:
        super().__init__(task, staged, options)
        self.last: tuple[Any, ...] | None = None  # the question just scored, for its picture
        self.state = EvaluationState(raw_fallback=self.options.get(RAW_FALLBACK, "false").lower() == "true")
        name = self.options.get("answer_judge", "none")
        if name == MODEL_JUDGE:  # the offline judge stands in until the model's grades come back
            self.state.judge, self.state.model_judge = OfflineAnswerJudge(), True
        elif name and name != "none":
            self.state.judge = make_answer_judge(name, self.options)
            self.state.cache = AnswerJudgeCache()  # per evaluation: nothing a run could write is trusted

    def note_kind(self, case_id: str, kind: str) -> None:
        self.state.kinds[case_id] = kind

    def score_case(self, case_id: str, submitted: Path) -> CaseScore:
        record, problem = contract.read_json_object(submitted / contract.ANSWER_FILE)
        if record is None:
            raise ValueError(problem)
        gold = json.loads((self.staged.private / case_id / contract.ANSWER_FILE).read_text("utf-8"))
        question = read_question(self.staged.public / case_id)
        values, requests = score_question(record, gold, question, self.state)
        self.last = (case_id, record, gold, question, values.get("score"))
        return CaseScore(case_id, values, requests)

    def case_picture(self, case_id: str, submitted: Path | None) -> CasePicture | None:
        from .picture import case_picture

        last, self.last = self.last, None
        if last is not None and last[0] == case_id and submitted is not None:
            record, gold, question, score = last[1:]
        else:
            gold = json.loads((self.staged.private / case_id / contract.ANSWER_FILE).read_text("utf-8"))
            question, record, score = read_question(self.staged.public / case_id), None, None
        return case_picture(self.staged.public / case_id, question, record, gold, score)

    def aggregate(self, scores: list[CaseScore | None], case_ids: list[str]) -> MetricBlock:
        return aggregate(self.task.metric, scores, case_ids, self.staged, self.state)
