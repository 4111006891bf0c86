"""Reference baselines for `automedbench evaluate --baseline`: the gold answers, honest skips, a constant guess."""

from __future__ import annotations

import json
from pathlib import Path

from automedbench.api import StagedData, TaskSpec, UserError, atomic_write_text

from . import contract
from .data.records import read_private, read_question

BASELINES = {"perfect": "the gold answers", "empty": "an honest skip for every question",
             "constant": "'yes' for every text question, option A for every MCQ",
             "label-prior": "the cohort's most frequent gold answer for every text question and its most frequent "
                            "gold option for every MCQ (an upper bound on answering from the label prior)",
             "question-prior": "for each question the most frequent gold answer among questions worded alike (the "
                               "same wording, else the same polar/open form; MCQ by option text): an upper bound "
                               "on answering from the question alone, no image opened"}
# Trivial and gaming submissions the bands must hold below B (checked on every demo by the tests).
TRIVIAL = {"empty": "no answer", "constant": "one fixed answer", "label-prior": "the most frequent gold answer",
           "question-prior": "the most frequent gold answer of the question's wording (a blind, question-only guess)"}


def _prior(staged: StagedData) -> tuple[str, str]:
    """(most frequent gold text answer, most frequent gold MCQ label), ties to the first seen."""
    from collections import Counter

    texts: Counter[str] = Counter()
    labels: Counter[str] = Counter()
    for qid in staged.case_ids:
        gold = read_private(staged.private, qid)
        if gold.get("answer_label"):
            labels[gold["answer_label"]] += 1
        elif gold.get("answer_text"):
            texts[" ".join(str(gold["answer_text"]).lower().split())] += 1
    return (texts.most_common(1)[0][0] if texts else "yes"), (labels.most_common(1)[0][0] if labels else "A")


def _question_prior(staged: StagedData) -> dict[str, str]:
    """Question id -> the commonest gold answer (MCQ: option text) of its group: questions of one wording when
    at least TEMPLATE_MIN share it, else of one form (polar or open) and kind; ties to the first seen."""
    from collections import Counter, defaultdict

    from .answers import question_form
    from .chance import TEMPLATE_MIN

    keys: dict[str, tuple[bool, str, str]] = {}
    golds: dict[str, str] = {}
    for qid in staged.case_ids:
        question = read_question(staged.public / qid)
        gold = read_private(staged.private, qid)
        wording = " ".join(str(question.get("question", "")).lower().split())
        keys[qid] = (contract.is_mcq(question), wording, question_form(question.get("question")))
        golds[qid] = " ".join(str(gold.get("answer_text") or "").lower().split())
    shared = Counter((mcq, wording) for mcq, wording, _ in keys.values())
    groups: dict[tuple[bool, str], Counter[str]] = defaultdict(Counter)
    group_of = {}
    for qid, (mcq, wording, form) in keys.items():
        group_of[qid] = (mcq, wording) if shared[mcq, wording] >= TEMPLATE_MIN else (mcq, f"form:{form}")
        groups[group_of[qid]][golds[qid]] += 1
    return {qid: groups[group].most_common(1)[0][0] for qid, group in group_of.items()}


def write_baseline(task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
    """One answer.json per question under `dest`, in the contract's record shape."""
    if name not in BASELINES:
        raise UserError(f"unknown baseline {name!r}")
    prior_text, prior_label = _prior(staged) if name == "label-prior" else ("", "")
    by_wording = _question_prior(staged) if name == "question-prior" else {}
    for qid in staged.case_ids:
        question = read_question(staged.public / qid)
        options = question.get("options") or {}
        gold = read_private(staged.private, qid)
        label, answer = "", ""
        if name == "perfect":
            label = gold.get("answer_label", "")
            answer = options.get(label, "") if label else gold.get("answer_text", "")
        elif name == "label-prior":
            label = prior_label if contract.is_mcq(question) and prior_label in options else ""
            answer = options.get(label, "") if label else prior_text
        elif name == "question-prior":
            guess = by_wording[qid]
            if contract.is_mcq(question):
                label = next((k for k, v in options.items() if " ".join(str(v).lower().split()) == guess),
                             sorted(options)[0] if options else "A")
                answer = options.get(label, "")
            else:
                answer = guess
        elif name == "constant":
            label = "A" if contract.is_mcq(question) else ""
            answer = options.get("A", "") if label else "yes"
        record = {"question_id": qid, "predicted_label": label, "predicted_answer": answer,
                  "raw_model_output": (f"Answer: {label or answer}" if (label or answer) else ""),
                  "model_name": f"baseline:{name}", "runtime_s": 0.0}
        atomic_write_text(dest / qid / contract.ANSWER_FILE, json.dumps(record) + "\n")
