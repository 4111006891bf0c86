"""The output contract: `<case>/prediction.json` = {"label": "<canonical class>"}, checked with bounded parsing.

The release accepts either one `predictions.csv` or a `prediction.json` per case; this track takes the
per-case file (every track here scores case folders). Labels are the task's canonical class names,
compared case-insensitively as the release does; a checkpoint abbreviation (`nv`, `mel`, ...) is refused
with the canonical name to write instead. Files over MAX_BYTES or nested deeper than MAX_DEPTH are
refused before a document is built. Reasons use fixed phrases that tests and detectors read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from automedbench.api import UserError, loads_json

PREDICTION_FILE = "prediction.json"
META_FILE = "meta.json"
IMAGE_FILE = "image.jpg"
MAX_BYTES = 64 * 1024
MAX_DEPTH = 3
ABBREVIATION = "is an abbreviation"
UNKNOWN_CLASS = "unknown class"
SHAPE = 'must be an object {"label": "<class name>"}'


@dataclass
class Parsed:
    """One prediction: the canonical class it names (None when invalid) and the problems found."""

    label: str | None = None
    reasons: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.label is not None and not self.reasons


def task_labels(params: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """(the canonical class names, abbreviation -> canonical name) from a task's params."""
    classes = [str(c) for c in params["classes"]]
    aliases = {str(k).lower(): str(v) for k, v in (params.get("abbreviations") or {}).items()}
    return classes, aliases


def _read_bounded(path: Path) -> tuple[bytes | None, str | None]:
    """At most MAX_BYTES + 1 bytes of a regular file, never through a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return None, f"{PREDICTION_FILE}: unreadable ({type(exc).__name__})"
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, f"{PREDICTION_FILE}: not a regular file"
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(MAX_BYTES + 1), None
    finally:
        os.close(fd)


def normalise(raw: str, classes: list[str], aliases: dict[str, str]) -> tuple[str | None, str | None]:
    """(canonical label, None) or (None, one-line reason with the fix)."""
    text = raw.strip()
    by_lower = {c.lower(): c for c in classes}
    if text.lower() in by_lower:
        return by_lower[text.lower()], None
    shown = ", ".join(classes)
    if text.lower() in aliases:
        canonical = aliases[text.lower()]
        return None, (f"label {text[:40]!r} {ABBREVIATION}: write the canonical class name {canonical!r} "
                      f"(map the model's id2label onto the task's classes: {shown})")
    return None, f"{UNKNOWN_CLASS} {text[:40]!r} (classes: {shown})"


def parse_prediction(path: Path, classes: list[str], aliases: dict[str, str] | None = None) -> Parsed:
    """Check one case's prediction file against the task's classes."""
    if not path.is_file() and not path.is_symlink():
        return Parsed(reasons=[f"{PREDICTION_FILE} missing"])
    raw, problem = _read_bounded(path)
    if problem or raw is None:
        return Parsed(reasons=[problem or f"{PREDICTION_FILE}: unreadable"])
    if len(raw) > MAX_BYTES:
        return Parsed(reasons=[f"{PREDICTION_FILE}: larger than {MAX_BYTES // 1024} KiB"])
    try:
        doc = loads_json(raw.decode("utf-8"), PREDICTION_FILE, MAX_DEPTH)
    except UnicodeDecodeError:
        return Parsed(reasons=[f"{PREDICTION_FILE}: not UTF-8"])
    except UserError as exc:
        return Parsed(reasons=[str(exc)])
    if not isinstance(doc, dict) or not isinstance(doc.get("label"), str):
        return Parsed(reasons=[f"{PREDICTION_FILE}: {SHAPE}"])
    label, problem = normalise(doc["label"], classes, aliases or {})
    return Parsed(reasons=[problem]) if problem else Parsed(label)
