"""The answer contract: one `answer.json` per question, checked against the public question only.

A record is valid, a *skip* (no answer and no raw output: honest, recorded as such, not scored), a
*placeholder* (an answer without a model behind it: empty/"unknown" raw output or a mock:/stub:...
prefix) or otherwise invalid. Skips and placeholders are both invalid for the completeness rules; the
reason says which one it was so reports can count them apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from attrs import define

from .answers import LETTERS, OPTION_LETTERS, normalize_label

ANSWER_FILE = "answer.json"
QUESTION_FILE = "question.json"
MAX_ANSWER_BYTES = 1 << 20
FIELDS = ("question_id", "predicted_label", "predicted_answer", "raw_model_output", "model_name", "runtime_s")
PLACEHOLDER_RAW = frozenset({"unknown", "n/a", "na", "none", "null"})
PLACEHOLDER_PREFIXES = ("heuristic:", "fallback:", "placeholder:", "mock:", "dummy:", "stub:")
SKIP_PREFIX = "skip:"
PLACEHOLDER_PREFIX = "placeholder:"

Kind = Literal["valid", "invalid", "skip", "placeholder"]


@define
class AnswerCheck:
    kind: Kind
    reasons: list[str]
    record: dict[str, Any] | None = None


def read_json_object(path: Path, limit: int = MAX_ANSWER_BYTES) -> tuple[dict[str, Any] | None, str]:
    """Read a small JSON object, or say in one line why it cannot be read (size, encoding, syntax)."""
    name = path.name
    if not path.is_file():
        return None, f"{name}: missing"
    size = path.stat().st_size
    if size > limit:
        return None, f"{name}: {size} bytes is larger than the {limit}-byte limit for one answer"
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"{name}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
    if not text.strip():
        return None, f"{name}: empty file"
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"{name}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}; truncated?)"
    except ValueError as exc:  # an integer past Python's digit limit: invalid JSON to the original too
        return None, f"{name}: not valid JSON ({str(exc)[:80]})"
    except RecursionError:  # arrays nested ~1000 deep (a 1 MiB file holds 500,000): no answer has them
        return None, f"{name}: JSON nested too deep for an answer record"
    if not isinstance(value, dict):
        return None, f"{name}: expected a JSON object, got {type(value).__name__}"
    return value, ""


def is_mcq(question: dict[str, Any]) -> bool:
    return question.get("mode") == "multiple_choice"


def placeholder_reason(raw: str) -> str:
    lowered = raw.strip().lower()
    if lowered in PLACEHOLDER_RAW:
        return f"raw_model_output is {raw.strip()!r}"
    for prefix in PLACEHOLDER_PREFIXES:
        if lowered.startswith(prefix):
            return f"raw_model_output starts with {prefix!r}: {raw.strip()[:60]!r}"
    return ""


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def check_record(record: dict[str, Any], qid: str, question: dict[str, Any]) -> AnswerCheck:
    missing = [f for f in FIELDS if f not in record]
    if missing:
        return AnswerCheck("invalid", [f"answer.json: missing field(s) {', '.join(missing)}"], record)
    problems = []
    if record["question_id"] != qid:
        problems.append(f"question_id {record['question_id']!r} does not match the folder {qid!r}")
    mcq = is_mcq(question)
    texts = {}
    for key in ("predicted_label", "predicted_answer", "raw_model_output"):
        # an open question's label is never read (the original's checker reads the label of an MCQ only)
        value = "" if key == "predicted_label" and (record[key] is None or not mcq) else record[key]
        if not isinstance(value, str):
            problems.append(f"{key} must be a string, got {type(value).__name__}")
            value = ""
        texts[key] = value
    # model_name and runtime_s are bookkeeping, checked as the original's checker does (round 22): any non-empty
    # string, any JSON number not below 0 (an integer of any size, NaN and Infinity included; they score nothing)
    model = record["model_name"]
    if not isinstance(model, str) or not model:
        problems.append("model_name must be a non-empty string")
    runtime = record["runtime_s"]
    if not isinstance(runtime, (int, float)) or runtime < 0:
        problems.append(f"runtime_s must be a number >= 0, got {repr(runtime)[:40]}")
    if problems:
        return AnswerCheck("invalid", problems, record)
    label, answer, raw = (texts[k].strip() for k in ("predicted_label", "predicted_answer", "raw_model_output"))
    if not answer and not raw and not (mcq and label):
        return AnswerCheck("skip", [f"{SKIP_PREFIX} no answer given (predicted_answer and raw_model_output empty)"],
                           record)
    why = placeholder_reason(raw)
    if not why and not raw and answer:
        # the original's rule: an answer *text* without model output is forged; an MCQ letter alone with both texts
        # empty is not (its checker passes it and its scorer reads the letter, round 19)
        why = "raw_model_output is empty but an answer is given (no model output behind it)"
    if why:
        return AnswerCheck("placeholder", [f"{PLACEHOLDER_PREFIX} {why}"], record)
    if mcq:
        options = question.get("options") or {}
        # `b`, `(B)`, `B.`, `answer: b` -> B, as the scorer reads it; "F" when the question has a sixth option
        label = normalize_label(label, options)
        # any letter A-E is an answer, as the original's checker and scorer take it: one naming no option of this
        # question is a wrong answer (scored 0), not a broken file (round 19). A letter past E naming one of this
        # question's options is an answer too (round 23; the original refuses it, so its question was unanswerable)
        if label not in LETTERS and label not in options:
            letters = sorted(set(LETTERS) | {k for k in options if k in OPTION_LETTERS})
            return AnswerCheck("invalid", [f"predicted_label {texts['predicted_label']!r} names none of the "
                                           f"options {', '.join(letters)}"], record)
        # the label decides an MCQ answer: an empty text is the original checker's pass (it compares a non-empty
        # text only), so a label-only record is valid and scored as there; a text naming another option is not
        if answer and not _same_text(answer, str(options.get(label, answer))):
            return AnswerCheck("invalid", [f"predicted_answer {answer[:60]!r} is not the text of option {label} "
                                           f"({str(options.get(label))[:60]!r})"], record)
    elif not answer:
        return AnswerCheck("invalid", ["half-empty: raw_model_output given but predicted_answer is empty"], record)
    return AnswerCheck("valid", [], record)


def check_answer_file(path: Path, qid: str, question: dict[str, Any]) -> AnswerCheck:
    record, problem = read_json_object(path)
    if record is None:
        return AnswerCheck("invalid", [problem])
    return check_record(record, qid, question)
