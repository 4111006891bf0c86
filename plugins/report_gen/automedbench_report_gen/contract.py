"""The output contract: one `report.txt` per study, checked as the original checker does.

Valid means: UTF-8, at most 8000 characters, at least the task's minimum length (the chest X-ray checker's
40 characters and 20 letters unless the task file's `params.min_chars` / `params.min_letters` say
otherwise: PathCap's captions are shorter), only `string.printable` characters. The file size is
checked before anything is read, so a huge file costs nothing."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

from automedbench.api import TaskSpec

REPORT_FILE = "report.txt"
MANIFEST_FILE = "manifest.json"
MIN_CHARS, MAX_CHARS, MIN_LETTERS = 40, 8000, 20
# printable ASCII is one byte a character, but allow some slack so a multibyte file gets the precise reason
MAX_BYTES = MAX_CHARS * 4
MAX_MANIFEST_BYTES = 1 << 20
PRINTABLE = frozenset(string.printable)


def minimums(task: TaskSpec | None) -> tuple[int, int]:
    """(minimum characters, minimum letters) this task's contract states."""
    params = task.params if task is not None else {}
    return int(params.get("min_chars", MIN_CHARS)), int(params.get("min_letters", MIN_LETTERS))


def decode_report(data: bytes) -> str:
    """A report's text as the original reads it (`Path.read_text`, universal newlines): CRLF and a lone CR become
    one newline, so a Windows-written line counts one character for its end, in the length rules and the text."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def check_report_bytes(data: bytes, min_chars: int = MIN_CHARS, min_letters: int = MIN_LETTERS) -> list[str]:
    """Reasons the report is invalid (empty list: valid)."""
    try:
        text = decode_report(data)
    except UnicodeDecodeError as exc:
        return [f"{REPORT_FILE}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"]
    reasons = []
    if not text.strip():
        return [f"{REPORT_FILE}: empty"]
    if len(text) < min_chars:
        reasons.append(f"{REPORT_FILE}: {len(text)} characters, fewer than {min_chars}")
    if len(text) > MAX_CHARS:
        reasons.append(f"{REPORT_FILE}: {len(text)} characters, more than {MAX_CHARS}")
    letters = sum(ch.isalpha() for ch in text)
    if letters < min_letters:
        reasons.append(f"{REPORT_FILE}: {letters} letters, fewer than {min_letters}")
    bad = sorted({ch for ch in text if ch not in PRINTABLE})
    if bad:
        shown = ", ".join(f"U+{ord(ch):04X}" for ch in bad[:5])
        reasons.append(f"{REPORT_FILE}: {len(bad)} non-printable or non-ASCII character(s) ({shown})")
    return reasons


def check_report_file(path: Path, task: TaskSpec | None = None) -> tuple[bool, list[str]]:
    """(present, reasons) for one case folder's report, against `task`'s minimum length."""
    if not path.is_file():
        return False, [f"{REPORT_FILE}: missing"]
    size = path.stat().st_size
    if size > MAX_BYTES:
        return True, [f"{REPORT_FILE}: {size} bytes, larger than the {MAX_BYTES}-byte limit"]
    return True, check_report_bytes(path.read_bytes(), *minimums(task))


def read_report(path: Path) -> str:
    """The text of a report that passed the checker."""
    return decode_report(path.read_bytes()[:MAX_BYTES])


def read_manifest(path: Path) -> dict[str, Any]:
    """A staged study manifest (harness-written, still size-limited)."""
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise ValueError(f"{path.name}: larger than {MAX_MANIFEST_BYTES} bytes")
    value = json.loads(path.read_text("utf-8"))
    if not isinstance(value, dict):
        raise ValueError(f"{path.name}: expected a JSON object")
    return value
