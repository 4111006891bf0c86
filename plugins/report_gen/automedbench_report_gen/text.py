"""Report text handling shared by the checker, the metric and the detectors: sections and the
original scorer's preprocessing (MLRG `tools/metrics`: ". " spacing, no lower-casing, split on spaces)."""

from __future__ import annotations

import re

# A section header at the start of a line: "FINDINGS:", "IMPRESSION:", "Findings:" ...
HEADER = re.compile(r"^[ \t]*([A-Za-z][A-Za-z /&-]{1,40}):", re.M)
SCORED_SECTION = "FINDINGS"


def sections(text: str) -> dict[str, str]:
    """Upper-cased header -> body for every `HEADER:` section (text before the first header is dropped)."""
    found = list(HEADER.finditer(text))
    out: dict[str, str] = {}
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        name = match.group(1).strip().upper()
        out.setdefault(name, text[match.end():end].strip())
    return out


def scored_text(text: str) -> str:
    """What the original scores: the FINDINGS section when the report has one, else the whole text."""
    body = sections(text).get(SCORED_SECTION)
    return body if body else text.strip()


def has_impression_only(text: str) -> bool:
    """An IMPRESSION section but no FINDINGS section: the scorer then compares the impression with findings."""
    found = sections(text)
    return "IMPRESSION" in found and SCORED_SECTION not in found


def mlrg_preprocess(text: str) -> str:
    """The original's text normalisation before the COCO scorers: detach full stops, collapse whitespace."""
    return " ".join(text.replace(".", " .").split())
