"""The output contract: `<case>/prediction.json` boxes in absolute pixels, checked with bounded parsing.

`{"boxes": [{"class": str, "score": float in [0, 1], "x1", "y1", "x2", "y2"}]}`: known class names only
(a task whose Task reads every box as one class, VinDr-CXR's "abnormality", takes any non-empty name as that
class, as the original's single-class scorer does), finite corners with 0 <= x1 < x2 <= width and
0 <= y1 < y2 <= height, a score in [0, 1] (a box without one counts as 1.0, the original's default; ties rank by
case id, then box order, and the count of such boxes is kept for the error-code detector).
`{"boxes": []}` is a valid answer for an image without findings. Files over MAX_BYTES, nesting deeper than
MAX_DEPTH or more than MAX_BOXES boxes are refused before or without building large objects. Reasons use
fixed phrases that the error-code detectors read.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .reasons import BAD_SCORE, OUTSIDE, SWAP_HINT, UNKNOWN_CLASS

PREDICTION_FILE = "prediction.json"
META_FILE = "meta.json"
IMAGE_FILE = "image.png"
MAX_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 4
MAX_BOXES = 20_000
MAX_REASONS = 5
DEFAULT_SCORE = 1.0  # the original's value for a box without a score
COORDS = ("x1", "y1", "x2", "y2")
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')



@dataclass
class Meta:
    width: int
    height: int
    classes: list[str]


@dataclass
class Parsed:
    """A prediction file's boxes as arrays (class as an index into the accepted names) and the problems."""

    cls: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    score: np.ndarray = field(default_factory=lambda: np.zeros(0))
    box: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    reasons: list[str] = field(default_factory=list)
    unscored: int = 0  # boxes that gave no score (read as 1.0)

    @property
    def valid(self) -> bool:
        return not self.reasons


def read_meta(public_case: Path) -> Meta:
    """The staged `meta.json` (trusted: written by the stager)."""
    data = json.loads((public_case / META_FILE).read_text("utf-8"))
    return Meta(int(data["width"]), int(data["height"]), [str(c) for c in data["classes"]])


def json_depth(raw: bytes) -> int:
    """Bracket nesting depth of JSON text, strings removed first (linear, no recursion)."""
    text = _STRINGS.sub(b'""', raw)
    arr = np.frombuffer(text, dtype=np.uint8)
    step = (np.isin(arr, (ord("["), ord("{"))).astype(np.int64) - np.isin(arr, (ord("]"), ord("}"))))
    return int(np.cumsum(step).max()) if len(step) else 0


def load_json(path: Path) -> tuple[Any, str | None]:
    """(document, None) or (None, one-line reason); never reads more than MAX_BYTES + 1 bytes."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        return None, f"{path.name}: unreadable ({type(exc).__name__})"
    if len(raw) > MAX_BYTES:
        return None, f"{path.name}: larger than {MAX_BYTES // (1024 * 1024)} MiB"
    if json_depth(raw) > MAX_DEPTH:
        return None, f"{path.name}: JSON nested deeper than {MAX_DEPTH} levels"
    try:
        return json.loads(raw.decode("utf-8")), None
    except UnicodeDecodeError:
        return None, f"{path.name}: not UTF-8"
    except (ValueError, RecursionError) as exc:
        return None, f"{path.name}: not valid JSON ({str(exc).splitlines()[0][:80]})"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float's range: outside any image (the original's verdict too)
        return None
    return number if math.isfinite(number) else None


def class_key(name: str) -> str:
    """A class name as the original scorer compares it: surrounding whitespace dropped, lower case, so " rbc " is
    RBC (a model's own spelling of the task's names)."""
    return name.strip().lower()


def class_lookup(names: list[str]) -> Callable[[str], int | None]:
    """A name's index: by the name exactly, else by its `class_key` when no other name has that key (a task whose
    names differ only in case keeps exact matching for them: "MASS" is neither "Mass" nor "mass"). The keys are
    looked up apart from the names, so a shared key never reaches the one name spelt as that key."""
    exact = {name: k for k, name in enumerate(names)}
    counts = Counter(class_key(n) for n in names)
    by_key = {class_key(n): k for k, n in enumerate(names) if counts[class_key(n)] == 1}
    return lambda name: exact.get(name, by_key.get(class_key(name)))


def _box_problem(i: int, box: Any, meta: Meta, lookup: Callable[[str], int | None],
                 any_name: int | None = None) -> tuple[str | None, tuple | None]:
    if not isinstance(box, dict):
        return f"box {i}: not an object", None
    name = box.get("class")
    cls = lookup(name) if isinstance(name, str) else None
    if cls is None and any_name is not None and isinstance(name, str) and name.strip():
        cls = any_name  # any finding counts for the one Task class
    if cls is None:
        shown = ", ".join(meta.classes[:6]) + (", …" if len(meta.classes) > 6 else "")
        return f"box {i}: {UNKNOWN_CLASS} {str(name)[:40]!r} (classes: {shown})", None
    score = _number(box.get("score", DEFAULT_SCORE))
    if score is None or not 0.0 <= score <= 1.0:
        return f"box {i}: {BAD_SCORE} ({str(box['score'])[:20]})", None
    coords = [_number(box.get(k)) for k in COORDS]
    if any(c is None for c in coords):
        missing = [k for k, c in zip(COORDS, coords, strict=True) if c is None]
        return f"box {i}: {', '.join(missing)} missing or not a finite number", None
    x1, y1, x2, y2 = coords
    if not (x1 < x2 and y1 < y2):
        return f"box {i}: needs x1 < x2 and y1 < y2 (got {x1:g}, {y1:g}, {x2:g}, {y2:g})", None
    if x1 < 0 or y1 < 0 or x2 > meta.width or y2 > meta.height:
        hint = ""
        if y2 <= meta.width and x2 <= meta.height:
            hint = f"; {SWAP_HINT}"
        return (f"box {i}: {OUTSIDE} {meta.width}x{meta.height} "
                f"({x1:g}, {y1:g}, {x2:g}, {y2:g}){hint}"), None
    return None, (cls, score, x1, y1, x2, y2)


def parse_prediction(path: Path, meta: Meta, extra_classes: tuple[str, ...] = (),
                     any_name_as: str | None = None) -> Parsed:
    """Check one prediction file; class indices follow `meta.classes + extra_classes`. With `any_name_as` (one of
    `extra_classes`: the task's one Task class) a non-empty name outside them is read as that class."""
    if not path.is_file():
        return Parsed(reasons=[f"{PREDICTION_FILE} missing"])
    doc, problem = load_json(path)
    if problem:
        return Parsed(reasons=[problem])
    if not isinstance(doc, dict) or not isinstance(doc.get("boxes"), list):
        return Parsed(reasons=[f'{PREDICTION_FILE}: must be an object {{"boxes": [...]}}'])
    boxes = doc["boxes"]
    if len(boxes) > MAX_BOXES:
        return Parsed(reasons=[f"{PREDICTION_FILE}: {len(boxes)} boxes (at most {MAX_BOXES})"])
    names = list(meta.classes) + [c for c in extra_classes if c not in meta.classes]
    lookup = class_lookup(names)
    any_name = names.index(any_name_as) if any_name_as is not None else None
    rows, reasons, bad = [], [], 0
    for i, box in enumerate(boxes):
        problem, row = _box_problem(i, box, meta, lookup, any_name)
        if problem:
            bad += 1
            if len(reasons) < MAX_REASONS:
                reasons.append(problem)
        else:
            rows.append(row)
    if bad > len(reasons):
        reasons.append(f"… {bad} of {len(boxes)} boxes invalid in all")
    if reasons:
        return Parsed(reasons=reasons)
    table = np.array(rows, dtype=np.float64).reshape(-1, 6)
    unscored = sum(1 for box in boxes if "score" not in box)
    return Parsed(table[:, 0].astype(np.int64), table[:, 1], table[:, 2:6], unscored=unscored)
