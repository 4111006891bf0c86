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
                            "gold option for every MCQ (an upper bound on answering from the label prior)"}
# Trivial and gaming submissions the bands must hold below B (checked on every demo by the tests).
TRIVIAL = {"empty": "no answer", "constant": "one fixed answer", "label-prior": "the most frequent gold answer"}


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


def write_baseline(task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
    """One answer.json per question under `dest`, in the contract's record shape."""
    if name not in BASELINES:
        raise UserError(f"unknown baseline {name!r}")
    prior_text, prior_label = _prior(staged) if name == "label-prior" else ("", "")
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
        elif name == "constant":
            label = "A" if contract.is_mcq(question) else ""
            answer = options.get("A", "") if label else "yes"
        record = {"question_id": qid, "predicted_label": label, "predicted_answer": answer,
                  "raw_model_output": (f"Answer: {label or answer}" if (label or answer) else ""),
                  "model_name": f"baseline:{name}", "runtime_s": 0.0}
        atomic_write_text(dest / qid / contract.ANSWER_FILE, json.dumps(record) + "\n")
