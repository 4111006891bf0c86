"""The one staged layout every classification task shares, written atomically.

public/<case>/image.jpg + meta.json {"classes": [...]} — what the agent sees (the image re-encoded, so no
source metadata such as EXIF or comments reaches the sandbox).
private/<case>/label.json {"label": <canonical class>, "source": {...}} — the reference, one schema for
every dataset (the release's `label.json`).

Stagers write into an `automedbench.api.staging_area` and commit it at the end: a failed re-stage keeps the
old data, a successful one leaves no stale cases, and re-running gives the same bytes (idempotent).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import atomic_write_bytes, atomic_write_text
from PIL import Image

from ..contract import IMAGE_FILE, META_FILE

LABEL_FILE = "label.json"
JPEG_QUALITY = 95
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def jpeg_bytes(pixels: np.ndarray, quality: int = JPEG_QUALITY) -> bytes:
    """8-bit grey (H, W) or RGB (H, W, 3) pixels as baseline JPEG, 4:4:4 (no metadata: same pixels, same bytes)."""
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(buffer, format="JPEG", quality=quality, subsampling=0)
    return buffer.getvalue()


def neutral_ids(prefix: str, count: int, digits: int = 4) -> list[str]:
    """Case ids that reveal nothing about the source file (no dataset ids, no labels)."""
    safe = _UNSAFE.sub("_", prefix).strip("_") or "case"
    return [f"{safe}_{k:0{digits}d}" for k in range(1, count + 1)]



def write_case(work: Path, case_id: str, image_jpeg: bytes, classes: list[str], label: str,
               source: dict[str, Any] | None = None) -> None:
    """One case in the shared layout; `source` (dataset id, file name) goes to the private side only."""
    if label not in classes:
        raise ValueError(f"{case_id}: label {label!r} is not one of the task's classes")
    atomic_write_bytes(work / "public" / case_id / IMAGE_FILE, image_jpeg)
    atomic_write_text(work / "public" / case_id / META_FILE, json.dumps({"classes": list(classes)}) + "\n")
    record = {"label": label, "source": source or {}}
    atomic_write_text(work / "private" / case_id / LABEL_FILE, json.dumps(record, indent=1) + "\n")



def read_label(private_case: Path) -> str:
    """The reference label of one staged case (trusted: written by the stager)."""
    return str(json.loads((private_case / LABEL_FILE).read_text("utf-8"))["label"])
