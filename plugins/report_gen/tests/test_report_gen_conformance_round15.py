"""Held-out conformance cases for report generation against the original scorer's definitions (round 15).

The original (`eval_report_gen/report_scorer.py`) finds sections with
`SECTION_HEADER_PATTERN = re.compile(r"(?:^|\\n)\\s*([A-Z][A-Z /(),-]{1,40})\\s*:\\s*", flags=re.MULTILINE)` and
scores `extract_findings_text`: the first non-empty "findings" section, else the whole text. Only upper-case
names are headers there; this track also reads a title-case section name ("Findings:") as a header (a documented
departure), but a mixed-case sub-heading such as "Lungs:" or "Heart size:" inside the findings is body text in
both.
"""

from __future__ import annotations

import re

from automedbench_report_gen.text import has_impression_only, scored_text

ORIGINAL_HEADER = re.compile(r"(?:^|\n)\s*([A-Z][A-Z /(),-]{1,40})\s*:\s*", flags=re.MULTILINE)


def original_findings(text: str) -> str:
    """The original's rule, restated: first non-empty section whose name is a findings alias, else the text."""
    aliases = {"finding", "findings", "reference findings", "chest, two views"}
    found = list(ORIGINAL_HEADER.finditer(text))
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        body = text[match.end():end].strip()
        if body and match.group(1).strip().lower() in aliases:
            return body
    return text.strip()


STRUCTURED = ("FINDINGS:\nLungs: clear, no consolidation.\nHeart: normal size.\nPleura: no effusion.\n"
              "IMPRESSION: No acute cardiopulmonary process.")


def test_mixed_case_subheadings_inside_upper_case_findings_stay_in_the_findings():
    """Original: "Lungs:" is not a header, so FINDINGS runs to IMPRESSION. Before the fix every "Name:" line
    was a header, FINDINGS read as empty and the whole report (impression included) was scored."""
    expected = "Lungs: clear, no consolidation.\nHeart: normal size.\nPleura: no effusion."
    assert original_findings(STRUCTURED) == expected
    assert scored_text(STRUCTURED) == expected
    assert not has_impression_only(STRUCTURED)


def test_title_case_findings_keep_their_subheadings():
    """The departure (title-case "Findings:" is a header) must not cut the findings at "Heart size:"."""
    text = "Findings: The lungs are clear.\nHeart size: normal.\nImpression: Normal chest."
    assert scored_text(text) == "The lungs are clear.\nHeart size: normal."


def test_upper_case_headers_still_split_as_in_the_original():
    text = "INDICATION: cough.\nFINDINGS: Lungs are clear.\nLUNGS: clear.\nIMPRESSION: normal."
    assert scored_text(text) == original_findings(text) == "Lungs are clear."


def test_reports_without_findings_score_the_whole_text_as_the_original():
    for text in ("Lungs: clear.\nHeart: normal.", "Heart size: normal. No effusion.",
                 "IMPRESSION: Lungs: clear."):
        assert scored_text(text) == original_findings(text)
