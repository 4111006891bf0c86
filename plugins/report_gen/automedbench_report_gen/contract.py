"""The output contract: one `report.txt` per study, checked as the original checker does.

Valid means: UTF-8, 40–8000 characters, at least 20 letters, only `string.printable` characters.
The file size is checked before anything is read, so a huge file costs nothing."""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

REPORT_FILE = "report.txt"
MANIFEST_FILE = "manifest.json"
MIN_CHARS, MAX_CHARS, MIN_LETTERS = 40, 8000, 20
# printable ASCII is one byte a character, but allow some slack so a multibyte file gets the precise reason
MAX_BYTES = MAX_CHARS * 4
MAX_MANIFEST_BYTES = 1 << 20
PRINTABLE = frozenset(string.printable)


def check_report_bytes(data: bytes) -> list[str]:
    """Reasons the report is invalid (empty list: valid)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [f"{REPORT_FILE}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"]
    reasons = []
    if not text.strip():
        return [f"{REPORT_FILE}: empty"]
    if len(text) < MIN_CHARS:
        reasons.append(f"{REPORT_FILE}: {len(text)} characters, fewer than {MIN_CHARS}")
    if len(text) > MAX_CHARS:
        reasons.append(f"{REPORT_FILE}: {len(text)} characters, more than {MAX_CHARS}")
    letters = sum(ch.isalpha() for ch in text)
    if letters < MIN_LETTERS:
        reasons.append(f"{REPORT_FILE}: {letters} letters, fewer than {MIN_LETTERS}")
    bad = sorted({ch for ch in text if ch not in PRINTABLE})
    if bad:
        shown = ", ".join(f"U+{ord(ch):04X}" for ch in bad[:5])
        reasons.append(f"{REPORT_FILE}: {len(bad)} non-printable or non-ASCII character(s) ({shown})")
    return reasons


def check_report_file(path: Path) -> tuple[bool, list[str]]:
    """(present, reasons) for one case folder's report."""
    if not path.is_file():
        return False, [f"{REPORT_FILE}: missing"]
    size = path.stat().st_size
    if size > MAX_BYTES:
        return True, [f"{REPORT_FILE}: {size} bytes, larger than the {MAX_BYTES}-byte limit"]
    return True, check_report_bytes(path.read_bytes())


def read_report(path: Path) -> str:
    """The text of a report that passed the checker."""
    return path.read_bytes()[:MAX_BYTES].decode("utf-8")


def read_manifest(path: Path) -> dict[str, Any]:
    """A staged study manifest (harness-written, still size-limited)."""
    if path.stat().st_size > MAX_MANIFEST_BYTES:
        raise ValueError(f"{path.name}: larger than {MAX_MANIFEST_BYTES} bytes")
    value = json.loads(path.read_text("utf-8"))
    if not isinstance(value, dict):
        raise ValueError(f"{path.name}: expected a JSON object")
    return value
