"""Held-out report layouts against the original's section reading (round 24).

The original (`eval_report_gen/report_scorer.py`) finds headers with
`(?:^|\\n)\\s*([A-Z][A-Z /(),-]{1,40})\\s*:\\s*` through `finditer`: a header takes the whitespace after its colon
with it, the newline and the next line's indent included, so an upper-case "NAME:" on the next line, indented,
cannot start at a line start any more and is body text; a header whose body is on the next line without an
indent is still followed by headers as usual. Ours read every line-start "NAME:" as a header: an indented
"HEART: normal" under an empty "FINDINGS:" line emptied the findings and the whole report (impression included)
was scored, and "HISTORY:" followed by an indented "FINDINGS: ..." line scored those findings where the original
scores the whole text. Fuzzed on 12,000 generated reports (upper-case headers, aliases, empty and indented
sections, CRLF, BOM, mixed-case sub-headings): 60 of 1069 valid reports scored another text before, 0 after;
validity agreed throughout. The expected texts below are the original's, read off its rule.
"""

from __future__ import annotations

import pytest
from automedbench_report_gen.data.stagers import findings_reference
from automedbench_report_gen.text import has_impression_only, scored_text

CASES = [
    # an indented upper-case sub-heading under an empty FINDINGS line is body text there: the findings run to the
    # next header found at a line start ("  LUNGS:" after a body line is one)
    ("FINDINGS:\n  HEART: normal size.\n  LUNGS: clear.\nIMPRESSION:\n  No acute disease.", "HEART: normal size."),
    ("FINDINGS:\n  X-RAY: no acute process.", "X-RAY: no acute process."),
    # the FINDINGS line indented under an empty HISTORY line is no header: no findings, the whole text is scored
    ("HISTORY:\n  FINDINGS: small left effusion.\nIMPRESSION: effusion.",
     "HISTORY:\n  FINDINGS: small left effusion.\nIMPRESSION: effusion."),
    # without the indent the next line's header is a header in both: FINDINGS empty, the whole text scored
    ("FINDINGS:\nHEART: normal.\nIMPRESSION: none.", "FINDINGS:\nHEART: normal.\nIMPRESSION: none."),
    # blank lines (even holding spaces) before an indented body: the body is the findings, as before
    ("FINDINGS: \n\n  The lungs are clear.\n IMPRESSION: normal.", "The lungs are clear."),
    # a mixed-case sub-heading is never a header (round 15), indented or not
    ("FINDINGS:\n  Lungs: clear.\n  Heart: normal.\nIMPRESSION: normal.", "Lungs: clear.\n  Heart: normal."),
]


@pytest.mark.parametrize(("report", "expected"), CASES)
def test_the_scored_text_is_the_originals(report, expected):
    assert scored_text(report) == expected


def test_an_indented_impression_under_an_empty_findings_line_is_no_impression_only_report():
    """"FINDINGS:" then an indented "IMPRESSION: ..." line: the original reads one FINDINGS section whose body is
    the impression line (it scores that line); before, the report read as impression-only."""
    report = "FINDINGS:\n  IMPRESSION: no acute disease."
    assert scored_text(report) == "IMPRESSION: no acute disease."
    assert not has_impression_only(report)
    assert findings_reference(report) == "FINDINGS: IMPRESSION: no acute disease."
