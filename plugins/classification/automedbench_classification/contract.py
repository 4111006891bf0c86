"""The output contract: `<case>/prediction.json` = {"label": "<canonical class>"}, or one top-level
`predictions.csv` (`patient_id,label` rows), checked with bounded parsing.

As the release: a CSV row answers for its case ahead of that case's JSON (the JSON is the fallback for ids
the CSV leaves out), a later row for the same id overwrites an earlier one. Labels are the task's canonical class names,
compared case-insensitively as the release does; a checkpoint abbreviation (`nv`, `mel`, ...) is refused
with the canonical name to write instead. Files over MAX_BYTES or nested deeper than MAX_DEPTH are
refused before a document is built. Reasons use fixed phrases that tests and detectors read.
"""

from __future__ import annotations

import csv
import io
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from automedbench.api import UserError, loads_json, open_below

PREDICTION_FILE = "prediction.json"
CSV_FILE = "predictions.csv"
CSV_COLUMNS = ("patient_id", "label")
MAX_CSV_BYTES = 1 << 20  # ~100 bytes a row: room for far more rows than any task has cases
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


@dataclass
class CsvPredictions:
    """A `predictions.csv`: case id -> raw label (the last row for an id wins), or why the file is unusable."""

    labels: dict[str, str] = field(default_factory=dict)
    problem: str | None = None


# the last CSV read, by the file's identity (device, inode, size, mtime and ctime in ns): the evaluator checks and
# scores every case against one file, which is parsed once
_CSV_SEEN: tuple[tuple[int, ...], CsvPredictions] | None = None


def read_csv_predictions(root: Path) -> CsvPredictions | None:
    """root/predictions.csv opened without following any link, bounded; None when there is none."""
    global _CSV_SEEN
    try:
        fd = open_below(root, [CSV_FILE])
    except FileNotFoundError:
        return None
    except OSError as exc:
        return CsvPredictions(problem=f"{CSV_FILE}: unreadable ({exc.strerror or type(exc).__name__}; not followed)")
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            return CsvPredictions(problem=f"{CSV_FILE}: not a regular file with one link")
        identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        if _CSV_SEEN is not None and _CSV_SEEN[0] == identity:
            return _CSV_SEEN[1]
        raw = handle.read(MAX_CSV_BYTES + 1)
    parsed = parse_csv(raw)
    _CSV_SEEN = (identity, parsed)
    return parsed


def parse_csv(raw: bytes) -> CsvPredictions:
    """The rows of a `patient_id,label` CSV (a UTF-8 BOM and spaces around cells tolerated; other columns
    ignored; rows without an id skipped), or the one problem that makes the whole file unusable."""
    if len(raw) > MAX_CSV_BYTES:
        return CsvPredictions(problem=f"{CSV_FILE}: larger than {MAX_CSV_BYTES // 1024} KiB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return CsvPredictions(problem=f"{CSV_FILE}: not UTF-8")
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        return CsvPredictions(problem=f"{CSV_FILE}: not valid CSV ({exc})"[:200])
    header = [cell.strip() for cell in rows[0]] if rows else []
    if not all(column in header for column in CSV_COLUMNS):
        return CsvPredictions(problem=f"{CSV_FILE}: the header must name the columns {','.join(CSV_COLUMNS)} "
                                      f"(got {','.join(header)[:80]!r})")
    at_id, at_label = (header.index(column) for column in CSV_COLUMNS)
    labels: dict[str, str] = {}
    for row in rows[1:]:
        if len(row) > max(at_id, at_label) and row[at_id].strip():
            labels[row[at_id].strip()] = row[at_label]
    return CsvPredictions(labels)


def case_prediction(outputs: Path, case_id: str, classes: list[str],
                    aliases: dict[str, str] | None = None) -> tuple[bool, Parsed]:
    """(whether the case was answered at all, its parsed prediction): the CSV row when the top-level
    `predictions.csv` has a non-empty label for the case, else `<case>/prediction.json`."""
    table = read_csv_predictions(outputs)
    if table is not None and table.problem:
        return True, Parsed(reasons=[table.problem])
    raw = table.labels.get(case_id, "") if table is not None else ""
    if raw.strip():
        label, problem = normalise(raw, classes, aliases or {})
        return True, Parsed(reasons=[f"{CSV_FILE}: {problem}"]) if problem else Parsed(label)
    folder = outputs / case_id
    if not folder.is_dir() or not any(folder.iterdir()):
        return False, Parsed(reasons=[f"{PREDICTION_FILE} missing (and no {CSV_FILE} row for this case)"])
    return True, parse_prediction(folder / PREDICTION_FILE, classes, aliases)
