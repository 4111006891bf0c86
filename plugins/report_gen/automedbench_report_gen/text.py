"""Report text handling shared by the checker, the metric and the detectors: sections and the
original scorer's preprocessing (MLRG `tools/metrics`: ". " spacing, no lower-casing, split on spaces)."""

from __future__ import annotations

import re
from collections import Counter

# A section header at the start of a line: "FINDINGS:", "IMPRESSION:", "Findings:", "CHEST, TWO VIEWS:",
# "IMPRESSION (PA):" ... — the original's characters (letters, space, / ( ) , -), in any case (our departure),
# with any whitespace before the colon and on the line before the name, as the original's `\s*` allows
# ("FINDINGS\t:" is a header there; before round 21 not here, and the whole report was scored). Like the
# original's, a header takes the whitespace after its colon with it, newlines and the next line's indent included,
# so a header on the next line that is indented ("FINDINGS:\n  HEART: normal") is no header there: body text
# (round 24; read as a header before, the findings were empty and the whole report was scored).
# The original's `(?:^|\n)\s*` anchor, written so that a run of whitespace is tried from its first newline only
# (the string's start, a line start right at the name, or a run's first newline): every later start in the run
# reads the same name, and trying each rescanned the run, quadratic (an 8000-character report of newlines cost
# 1.6 CPU-s to section, tests/test_review26.py). A header's start is only ever the previous section's end (stripped).
HEADER = re.compile(r"(?:\A|(?<=\n)(?=\S)|(?<=\S)[^\S\n]*\n)\s*([A-Za-z][A-Za-z /(),-]{1,40})\s*:\s*")
SCORED_SECTION = "FINDINGS"
# Headers the original scorer also reads as the findings section (its aliases, exactly: no bare "CHEST").
# Matched case-insensitively here (a departure, named in the README: a title-case "Findings:" is still the
# findings section).
FINDINGS_ALIASES = ("FINDINGS", "FINDING", "REFERENCE FINDINGS", "CHEST, TWO VIEWS")


# Report section names read as headers in any case (our departure: "Findings:", "Impression:"); any other
# line opening "Name:" is a header only when upper-case, as the original reads it, so a "Heart size: normal"
# or "Lungs: clear" line inside the findings stays part of them.
SECTION_NAMES = frozenset({*FINDINGS_ALIASES, "IMPRESSION", "CONCLUSION", "FINDINGS AND IMPRESSION",
                           "FINDINGS/IMPRESSION", "FINDINGS/ IMPRESSION", "INDICATION", "INDICATIONS", "HISTORY",
                           "CLINICAL HISTORY", "COMPARISON", "COMPARISONS", "TECHNIQUE", "EXAMINATION", "EXAM",
                           "REASON FOR EXAM", "REASON FOR EXAMINATION", "RECOMMENDATION", "RECOMMENDATIONS",
                           "NOTIFICATION", "WET READ"})


def _is_header(name: str) -> bool:
    return name == name.upper() or name.strip().upper() in SECTION_NAMES


def _headers(text: str) -> list[re.Match[str]]:
    """The headers in the order the original's `finditer` finds them: a match that is no header (a mixed-case
    "Lungs:") consumes nothing, so the scan goes on from the character after its start, as there (from the one
    after its name's first letter here: a start between reads the same name)."""
    found, pos = [], 0
    while (match := HEADER.search(text, pos)) is not None:
        if _is_header(match.group(1)):
            found.append(match)
            pos = match.end()
        else:
            pos = match.start(1) + 1
    return found


def sections(text: str) -> dict[str, str]:
    """Upper-cased header -> its first non-empty body, in the order the report has them (text before the first
    header is dropped; an empty section is skipped, as the original skips it)."""
    found = _headers(text)
    out: dict[str, str] = {}
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        body = text[match.end():end].strip()
        if body:
            out.setdefault(match.group(1).strip().upper(), body)
    return out


def findings_section(found: dict[str, str]) -> str | None:
    """The body of the report's first non-empty section under any findings alias (the original's rule: the
    first in the report's order, whichever alias it is)."""
    return next((body for name, body in found.items() if name in FINDINGS_ALIASES), None)


def scored_text(text: str) -> str:
    """What the original scores: the FINDINGS section (or an alias) when the report has one, else the
    whole text."""
    body = findings_section(sections(text))
    return body if body else text.strip()


def has_impression_only(text: str) -> bool:
    """An IMPRESSION section but no FINDINGS section: the scorer then compares the impression with findings."""
    found = sections(text)
    return "IMPRESSION" in found and findings_section(found) is None


def mlrg_preprocess(text: str) -> str:
    """The original's text normalisation before the COCO scorers: detach full stops and collapse runs of
    spaces only (tabs and newlines stay, as in the original; its tokenizer then splits on them). Nothing is
    stripped: a text opening with "." keeps the leading space, which ROUGE-L (split on " ") reads as an
    empty first token, as the original does (round 21: stripping it moved ROUGE-L by up to 0.17)."""
    return re.sub(" +", " ", text.replace(".", " ."))



TEMPLATE_SIMILARITY = 0.9  # word-bag overlap at or above which two reports count as the same template


def _bag(text: str) -> Counter[str]:
    return Counter(re.findall(r"[a-z0-9]+", text.lower()))


def _overlap(a: Counter[str], b: Counter[str]) -> float:
    total = a.total() + b.total()
    return 2.0 * (a & b).total() / total if total else 1.0


def word_overlap(a: str, b: str) -> float:
    """Dice overlap of the two texts' lower-cased word multisets: 1.0 identical, one extra word in a
    40-word report still ~0.99, so a trivial perturbation cannot make a template look distinct."""
    return _overlap(_bag(a), _bag(b))


def largest_template_group(texts: list[str], tolerance: float = TEMPLATE_SIMILARITY) -> int:
    """The most texts within `tolerance` word overlap of one of them (itself included): 1 when all differ."""
    bags = [_bag(t) for t in texts]
    return max((sum(1 for b in bags if _overlap(a, b) >= tolerance) for a in bags), default=0)
