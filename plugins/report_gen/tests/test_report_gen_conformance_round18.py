"""Held-out report files against the original checker's definition (round 18).

The original (`eval_report_gen/format_checker.py::check_report_file`), restated as `original_valid`: the text is
read with `Path.read_text(encoding="utf-8")` (universal newlines: CRLF and a lone CR become one newline), then
valid when 40 <= len <= 8000, at least 20 alphabetic characters, not blank, every character in
`string.printable`. Invalid reports fail the completeness gate (Task 0). Before this round ours counted a CRLF
as two characters, so a 39-character report written on Windows was valid here and invalid there (and the text
scored kept its carriage returns).
"""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from automedbench_report_gen import contract


def original_valid(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return False
    letters = sum(ch.isalpha() for ch in text)
    return (40 <= len(text) <= 8000 and letters >= 20 and bool(text.strip())
            and all(ch in set(string.printable) for ch in text))


LINES = ["Heart normal.", "Lungs are clear today", "No effusion."]  # 46 characters and 2 line ends

CASES = {
    "LF, 48 characters": "\n".join(LINES).encode(),
    "CRLF, 48 characters as the original reads it": "\r\n".join(LINES).encode(),
    "CRLF, 39 as read (41 before)": "\r\n".join(["Heart normal.", "Lungs clear now.", "No fluid"]).encode(),
    "lone CRs": "\r".join(["Heart normal.", "Lungs clear now.", "No effusion"]).encode(),
    "exactly 40": b"The heart is normal and the lungs clear.",
    "38 and a CRLF (39 as read)": b"Heart size is normal; the lungs clear.\r\n",
    "a non-ASCII letter": "The heart is normal and the lungs are clear, n\u00e9.".encode(),
    "a no-break space": "The heart is normal and\u00a0the lungs are clear.".encode(),
    "tabs and a form feed": b"The heart is normal.\tThe lungs are clear.\x0cNo effusion.",
    "blank": b"\r\n \r\n\t\r\n" * 10,
    "too few letters": b"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 abc",
    "8000 characters": b"a" * 7999 + b"\n",
    "8001 characters": b"a" * 8001,
    "not UTF-8": b"The heart is normal and the lungs are clear \xff\xfe.",
}


@pytest.mark.parametrize("name", list(CASES))
def test_report_validity_equals_the_originals(tmp_path, name):
    path = tmp_path / "report.txt"
    path.write_bytes(CASES[name])
    present, reasons = contract.check_report_file(path)
    assert present
    assert (not reasons) == original_valid(path), reasons


def test_the_scored_text_is_the_text_the_original_reads(tmp_path):
    path = tmp_path / "report.txt"
    path.write_bytes(b"FINDINGS:\r\nHeart normal.\r\nLungs are clear today.\rNo effusion.\r\n")
    assert contract.read_report(path) == path.read_text(encoding="utf-8")
    assert "\r" not in contract.read_report(path)
