"""The one staged layout every detection task shares, written atomically.

public/<case>/image.png + meta.json {width, height, classes} — what the agent sees.
private/<case>/boxes.json {width, height, boxes: [{class, x1, y1, x2, y2}]} — the ground truth, one schema
for every dataset (continuous pixel corners, classes named as in meta.json).

Stagers write into an `automedbench.api.staging_area` and commit it at the end: a failed re-stage keeps the
old data, a successful one leaves no stale cases, and re-running gives the same bytes (idempotent).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import atomic_write_bytes, atomic_write_text
from automedbench.api import png_bytes as api_png_bytes

from ..contract import IMAGE_FILE, META_FILE

BOXES_FILE = "boxes.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")

GTBox = tuple[str, float, float, float, float]


def png_bytes(pixels: np.ndarray, source: Path | None = None) -> bytes:
    """8-bit grey (H, W) or RGB (H, W, 3) pixels as PNG bytes without metadata (`automedbench.api.png_bytes`:
    same pixels, same bytes), never byte for byte the `source` file they were decoded from."""
    encoded = api_png_bytes(pixels)
    if source is not None and source.stat().st_size == len(encoded):
        encoded = api_png_bytes(pixels, avoid=source.read_bytes())
    return encoded


def neutral_ids(prefix: str, count: int) -> list[str]:
    """Case ids that reveal nothing about the source file (no dataset ids, no labels)."""
    safe = _UNSAFE.sub("_", prefix).strip("_") or "case"
    return [f"{safe}_{k:04d}" for k in range(1, count + 1)]



def write_case(work: Path, case_id: str, image_png: bytes, width: int, height: int, classes: list[str],
               boxes: list[GTBox], source: dict[str, Any] | None = None) -> None:
    """One case in the shared layout; `source` (dataset id, file name) goes to the private side only."""
    meta = {"width": width, "height": height, "classes": list(classes)}
    atomic_write_bytes(work / "public" / case_id / IMAGE_FILE, image_png)
    atomic_write_text(work / "public" / case_id / META_FILE, json.dumps(meta) + "\n")
    record = {"width": width, "height": height, "source": source or {},
              "boxes": [{"class": c, "x1": round(x1, 4), "y1": round(y1, 4), "x2": round(x2, 4), "y2": round(y2, 4)}
                        for c, x1, y1, x2, y2 in boxes]}
    atomic_write_text(work / "private" / case_id / BOXES_FILE, json.dumps(record, indent=1) + "\n")



def read_truth(private_case: Path) -> dict[str, Any]:
    return json.loads((private_case / BOXES_FILE).read_text("utf-8"))


def clip_box(box: tuple[float, float, float, float], width: int, height: int) -> tuple[float, ...] | None:
    """A box clipped to the image, or None when nothing of it is left (degenerate annotations)."""
    x1, y1, x2, y2 = box
    x1, x2 = max(0.0, min(x1, width)), max(0.0, min(x2, width))
    y1, y2 = max(0.0, min(y1, height)), max(0.0, min(y2, height))
    if x2 - x1 <= 0 or y2 - y1 <= 0:
        return None
    return x1, y1, x2, y2
