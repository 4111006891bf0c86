"""Answer normalisation and the per-question scores: MCQ letter, closed yes/no strict, open EM/F1.

Normalisation (both sides): lower-case, delete ASCII punctuation, collapse whitespace; then whole-string
yes/no synonyms, then token-wise number words (zero/none -> 0, one/single -> 1 ... twelve -> 12) and common anatomical /
clinical abbreviations expanded to their full form, so "bilat" matches "bilateral" and "ivc" matches
"inferior vena cava". A gold answer that normalises to yes/no is *closed* and scored strictly; any
other is *open* and scored 0.5·exact match + 0.5·token F1 (bag-of-tokens overlap).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any

LETTERS = ("A", "B", "C", "D", "E")
# A question may list more options than five (MedFrameQA, MMMU): its letters run on past E, up to Z.
OPTION_LETTERS = tuple(string.ascii_uppercase)

YES = frozenset({"yes", "y", "yeah", "yep", "true", "present", "positive"})
NO = frozenset({"no", "n", "nope", "false", "absent", "negative"})

NUMBERS = {
    "zero": "0", "none": "0", "one": "1", "single": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
}

ABBREVIATIONS = {
    "r": "right", "l": "left", "bil": "bilateral", "bilat": "bilateral",
    "ivc": "inferior vena cava", "svc": "superior vena cava",
    "lv": "left ventricle", "rv": "right ventricle", "la": "left atrium", "ra": "right atrium",
    "lad": "left anterior descending", "mca": "middle cerebral artery",
    "ica": "internal carotid artery", "pca": "posterior cerebral artery", "aca": "anterior cerebral artery",
    "pe": "pulmonary embolism", "dvt": "deep vein thrombosis", "chf": "congestive heart failure",
    "cad": "coronary artery disease", "gi": "gastrointestinal", "gu": "genitourinary",
    "cns": "central nervous system",
}

_PUNCT = str.maketrans("", "", string.punctuation)
_SPACE = re.compile(r"\s+")
# The original's rule: the upper-cased label's first A-E standing alone between word boundaries, so a digit,
# an underscore or any letter (accented too) next to it joins it into a word: `1A`, `A_1`, `éB` name no option.
_STANDALONE_LETTER = re.compile(r"\b([A-E])\b")


def normalize(text: Any) -> str:
    """The canonical form both the gold answer and the prediction are compared in."""
    if text is None:
        return ""
    cleaned = _SPACE.sub(" ", str(text).lower().translate(_PUNCT)).strip()
    if cleaned in YES:
        return "yes"
    if cleaned in NO:
        return "no"
    tokens = []
    for token in cleaned.split(" "):
        if not token:
            continue
        tokens.append(NUMBERS.get(token) or ABBREVIATIONS.get(token) or token)
    return " ".join(tokens)


def is_closed(gold: Any) -> bool:
    return normalize(gold) in ("yes", "no")


# Auxiliary verbs that open a polar (yes/no) question in English.
_POLAR_OPENERS = frozenset({
    "is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "has", "have", "had", "will",
    "would", "shall", "should", "may", "might", "must", "isnt", "arent", "doesnt", "dont", "wasnt", "werent",
})


def question_form(question: Any) -> str:
    """`yes_no_form` when the wording opens with an auxiliary verb ("Is there ...?"), else `open_form`.

    Derived from the question text alone, so a public record carrying it tells the agent nothing it
    could not read itself (a type derived from the gold answer would reveal which answers are yes/no)."""
    words = normalize(question).split(" ", 1)
    return "yes_no_form" if words and words[0] in _POLAR_OPENERS else "open_form"


def exact_match(prediction: Any, gold: Any) -> float:
    return 1.0 if normalize(prediction) == normalize(gold) and normalize(gold) != "" else 0.0


def token_f1(prediction: Any, gold: Any) -> float:
    """F1 over the bags of normalised tokens (0 when either side is empty)."""
    pred, ref = normalize(prediction).split(), normalize(gold).split()
    if not pred or not ref:
        return 0.0
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def closed_score(prediction: Any, gold: Any) -> float:
    """Strict yes/no: 1 iff the normalised prediction is exactly the normalised gold."""
    return 1.0 if normalize(prediction) == normalize(gold) else 0.0


def open_score(prediction: Any, gold: Any) -> float:
    return 0.5 * exact_match(prediction, gold) + 0.5 * token_f1(prediction, gold)


def normalize_label(label: Any, options: Any = None) -> str:
    """An MCQ letter: the exact letter A–E, or the exact letter of one of the question's `options` past E
    (a sixth option's "F"); else the first letter A–E standing alone as a word in the upper-cased label (a
    regex word boundary either side); '' if none.

    As the original: `b`, `(B)`, `B.` and `answer: b` all read B; the contract applies this before its
    check, so such labels are valid and credited, and a label naming no option stays invalid. A letter past
    E is read only as the whole label ("f"), never from a sentence: "I think B" reads B on a nine-option
    question too."""
    if label is None:
        return ""
    text = str(label).strip().upper()
    if text in LETTERS or (text in OPTION_LETTERS and isinstance(options, dict) and text in options):
        return text
    found = _STANDALONE_LETTER.search(text)
    return found.group(1) if found else ""


def mcq_score(label: Any, gold_label: Any, options: Any = None) -> float:
    got = normalize_label(label, options)
    return 1.0 if got and got == normalize_label(gold_label, options) else 0.0


def text_scores(prediction: Any, gold: Any) -> dict[str, float | bool]:
    """Every number the open-ended scorer reports for one question."""
    closed = is_closed(gold)
    em, f1 = exact_match(prediction, gold), token_f1(prediction, gold)
    score = closed_score(prediction, gold) if closed else 0.5 * em + 0.5 * f1
    return {"score": score, "exact_match": em, "token_f1": f1, "closed": closed}
