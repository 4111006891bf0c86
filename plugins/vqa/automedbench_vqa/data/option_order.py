"""A multiple-choice question's options published in an order drawn from the staging's secret.

A dataset's own option order is public (its files, its paper, its leaderboard analyses) and seldom uniform:
on a MedXpertQA-like layout whose gold is "A" in 60 % of questions, answering "A" to everything scored 0.6
(tests/test_redteam_round23.py). `deal_options` re-letters each question's options with a draw from the
staging's secret and remaps the gold letter, so no letter is more likely gold than another; the gold text and
every option's text are unchanged (an answer naming the right option's text still scores).

What keeps its place, and why:

- an option whose meaning is its place ("all of the above", "none of these", "neither") keeps its letter;
  the other options are dealt among the remaining letters. Moved, "all of the above" would stand above
  options it claims to cover.
- a question whose options or text name options by letter ("both A and B", "A and C", "option B", "all
  except C", "A only", a lettered list in the text other than the one recognised below) keeps the dataset's
  order entirely: re-lettering references inside free text is guesswork, and such questions are a small share
  of a set. So does one whose text lists the options after letters in another form ("Options: A. cyst B. tumor",
  "A) cyst", "(a) cyst" lines: dealt, the text named each option by its old letter). So does one whose options
  are letters themselves (MMMU's "which labelled structure": A, B, C, D naming marks in the image; dealt, option
  A would read "C" and a model answering "C" would be refused).
- a question with two options of one text ("yes" at A and at C) keeps the order: which twin is gold is the
  dataset's order's, and an answer found by the text takes the first (round 22: dealt, half of them lost).
- an option list embedded in the question ("Answer Choices: (A) ... (B) ...", MedXpertQA's wording) is
  rewritten in the new order when it lists exactly the options; one that does not keeps the order.

A list past E (MedFrameQA's and MMMU's six to nine options) is dealt as any other, its letter references read up
to its last letter ("both A and F"). Before round 24 it kept the dataset's order: a question is seen to have six
options, so a gold skewed by position in the public set (the original stages every list in its order) was a prior
a blind answer could use on exactly those questions.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass
from typing import Any

from ..answers import OPTION_LETTERS

# "all of the above", "none of these", "both of the above", "neither of the options", "all the above" ...
_PLACE_WORDS = re.compile(
    r"\b(all|none|both|neither|either|any)\b(\s+\w+){0,2}?\s+(above|below|preceding|previous|foregoing|options|"
    r"choices|answers|these|those)\b|^\s*(neither|none|all|both)\s*\.?\s*$", re.I)
_CHOICES = re.compile(r"answer\s+choices\s*:", re.I)


@dataclass(frozen=True)
class _Patterns:
    """The letter-reference patterns for a question lettered A..`last` (A-E, or on past E: round 24)."""

    named: re.Pattern[str]
    joined: re.Pattern[str]
    bracketed: re.Pattern[str]
    qualified: re.Pattern[str]
    bare: re.Pattern[str]
    line_letter: re.Pattern[str]
    mark: str
    choice: re.Pattern[str]


@functools.lru_cache(maxsize=32)
def _patterns(last: str = "E") -> _Patterns:
    """Patterns naming the letters A..`last` (never fewer than A-E, the original's letters)."""
    last = max(last, "E")
    upper, lower = f"A-{last}", f"a-{last.lower()}"
    letter = rf"(?<![\w])[{upper}](?![\w])"  # an upper-case letter standing alone (case-sensitive: "a" is a word)
    return _Patterns(
        named=re.compile(rf"(?i:\b(options?|choices?|answers?)\s+\(?){letter}"),
        joined=re.compile(rf"{letter}\s*(,|&|\+|/|\band\b|\bor\b)\s*{letter}"),
        bracketed=re.compile(rf"\(([{upper}])\)"),
        # "all except C", "but not A", "other than B", "A only", "only B", "B alone": one option named by its letter
        qualified=re.compile(rf"(?i:\b(except|only|but|not|besides|excluding|than)\s+){letter}"
                             rf"|{letter}(?i:\s+(only|alone)\b)"),
        bare=re.compile(rf"\s*\(?[{upper}][.):]?\s*"),  # an option that is a letter: a mark in the image
        line_letter=re.compile(rf"(?m)^\s*[{upper}][.):]\s"),
        # a letter marking a list entry: "(A)", "(a)", "A)", "A.", "A:", "A -" (either case), then the entry's text
        mark=rf"(?<![\w])(?:\(\s*[{upper}{lower}]\s*\)|[{upper}{lower}][ \t]*[.):\-\u2013\u2014])[ \t]*",
        choice=re.compile(rf"\(([{upper}])\)[ \t]*"),
    )


def keeps_place(option: str) -> bool:
    """An option whose meaning is where it stands ("all of the above")."""
    return bool(_PLACE_WORDS.search(option))


def names_letters(text: str, last: str = "E") -> bool:
    """Text that refers to options by letter ("both A and B", "option C", "(A) ... (B)", "A. ..." lines), letters
    A..`last` (the question's last option letter when past E)."""
    p = _patterns(last)
    return bool(p.named.search(text) or p.joined.search(text) or p.bracketed.search(text)
                or p.qualified.search(text) or p.bare.fullmatch(text) or len(p.line_letter.findall(text)) >= 2)


def lists_options(text: str, options: dict[str, str], last: str = "E") -> bool:
    """Whether `text` lists two options or more after a letter ("A) cyst B) tumor", "Options: A. cyst", "(a) cyst"
    lines): a list in a form `_embedded` does not rewrite, whose letters dealt options would contradict."""
    listed = 0
    for option in options.values():
        words = str(option).split()
        if words and re.search(_patterns(last).mark + r"\s+".join(re.escape(w) for w in words), text, re.I):
            listed += 1
            if listed >= 2:
                return True
    return False


def _text_key(text: Any) -> str:
    """An option's text as an answer naming it is matched (case and spacing aside)."""
    return " ".join(str(text).casefold().split())


def _spaced(text: str) -> str:
    return " ".join(text.split())


def _embedded(question: str, options: dict[str, str], last: str = "E") -> tuple[str, list[tuple[str, str, str]]] | None:
    """The question split at an embedded "Answer Choices:" list that lists exactly `options` in order (up to
    spacing): (text up to the list's first option, [(gap after "(X)", option text as listed, whitespace after
    it)]); None otherwise."""
    marker = _CHOICES.search(question)
    if marker is None:
        return None
    tail = question[marker.end():]
    found = list(_patterns(last).choice.finditer(tail))
    if [m.group(1) for m in found] != list(options) or not found:
        return None
    parts = []
    for k, m in enumerate(found):
        raw = tail[m.end(): found[k + 1].start() if k + 1 < len(found) else len(tail)]
        text = raw.rstrip()
        if _spaced(text) != _spaced(options[m.group(1)]):  # a wrapped line or doubled space is the same option
            return None
        parts.append((m.group(0)[3:], text, raw[len(text):]))
    return question[:marker.end() + found[0].start()], parts


def deal_options(question: dict[str, Any], gold: dict[str, Any],
                 rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """(question, gold) with the options re-lettered by `rng` (one of the staging's secret draws) and the gold
    letter following its option; unchanged for a question that is not multiple choice or that names options by
    letter (module docstring)."""
    options = question.get("options")
    label = str(gold.get("answer_label") or "")
    if not isinstance(options, dict) or len(options) < 2 or label not in options:
        return question, gold
    letters = list(options)
    if letters != list(OPTION_LETTERS[:len(letters)]):
        return question, gold
    last = letters[-1]  # a list past E is dealt too (round 24): kept, its order was a public prior on the gold
    text = str(question.get("question", ""))
    embedded = _embedded(text, options, last)
    rest = text[:len(embedded[0])] if embedded else text
    if embedded is None and _CHOICES.search(text):
        return question, gold  # a list that is not the options: its letters would no longer match
    if (names_letters(rest, last) or any(names_letters(str(o), last) for o in options.values())
            or lists_options(rest, options, last)):
        return question, gold
    if len({_text_key(o) for o in options.values()}) < len(options):
        return question, gold  # twins: which one is gold is the dataset's order's (module docstring)
    movable = [k for k in letters if not keeps_place(str(options[k]))]
    dealt = list(movable)
    rng.shuffle(dealt)
    source = {k: k for k in letters} | dict(zip(movable, dealt, strict=True))  # new letter -> old letter
    new_options = {k: options[source[k]] for k in letters}
    new_label = next(k for k in letters if source[k] == label)
    new_question = {**question, "options": new_options}
    if embedded is not None:
        head, parts = embedded
        # each option written as the options give it: a line wrapped where the list wrapped would tell its old place
        new_question["question"] = head + "".join(
            f"({k}){gap}{new_options[k].strip()}{after}" for k, (gap, _, after) in zip(letters, parts, strict=True))
    return new_question, {**gold, "answer_label": new_label}
