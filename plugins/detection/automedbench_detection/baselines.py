"""Baselines for `automedbench evaluate --baseline NAME` (trusted code, run by the harness, not the agent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import StagedData, TaskSpec, UserError
from PIL import Image

from . import contract
from .data.staged import read_truth

BASELINES: dict[str, str] = {
    "perfect": "the reference boxes, score 1.0",
    "empty": '{"boxes": []} for every image',
    "constant": "one box covering the whole image, first class, score 0.5",
    "classical": "a classical detector: colour thresholds + watershed on smears, Otsu blobs on grey images",
    "class-hedge": "the classical detector's boxes, each repeated under every other class at 0.1x its score",
    "prior-boxes": "the label prior: for each class, its mean reference box count per image as boxes of its mean "
                   "size tiled over the image (no image opened)",
}
# Trivial and gaming submissions the bands (and the hedging cap) must hold below B on every demo.
TRIVIAL: dict[str, str] = {
    "empty": "no boxes",
    "constant": "one whole-image box",
    "class-hedge": "every box under every class (mAP rewards it; the rating cap does not)",
    "prior-boxes": "the cohort's box statistics without looking at the image",
}


def _box(cls: str, score: float, x1: float, y1: float, x2: float, y2: float) -> dict[str, Any]:
    return {"class": cls, "score": score, "x1": x1, "y1": y1, "x2": x2, "y2": y2}


def _otsu_blobs(grey: np.ndarray, cls: str, limit: int = 20) -> list[dict[str, Any]]:
    """Bright connected regions above Otsu's threshold, largest first, scored by relative size."""
    from skimage.filters import threshold_otsu
    from skimage.measure import label, regionprops

    mask = grey > threshold_otsu(grey) if grey.max() > grey.min() else np.zeros(grey.shape, dtype=bool)
    regions = sorted(regionprops(label(mask)), key=lambda r: -r.area)[:limit]
    total = float(sum(r.area for r in regions)) or 1.0
    return [_box(cls, round(min(1.0, 0.05 + r.area / total), 4), float(r.bbox[1]), float(r.bbox[0]),
                 float(r.bbox[3]), float(r.bbox[2])) for r in regions]


def _prior_boxes(staged: StagedData, classes: list[str], only: str | None, width: float,
                 height: float) -> list[dict[str, Any]]:
    """Each class's mean box count and size over the cohort's references, laid out on a grid."""
    sizes: dict[str, list[tuple[float, float]]] = {}
    for case in staged.case_ids:
        for b in read_truth(staged.private / case)["boxes"]:
            name = only or (b["class"] if b["class"] in classes else classes[0])
            sizes.setdefault(name, []).append((b["x2"] - b["x1"], b["y2"] - b["y1"]))
    out = []
    for name, wh in sorted(sizes.items()):
        count = max(1, round(len(wh) / max(1, len(staged.case_ids))))
        w, h = (float(np.mean([v[0] for v in wh])), float(np.mean([v[1] for v in wh])))
        cols = max(1, int(width // max(w, 1.0)))
        for k in range(count):
            x, y = (k % cols) * w, (k // cols) * h % max(1.0, height - h)
            out.append(_box(name, 0.5, x, y, min(width, x + w), min(height, y + h)))
    return out


def baseline_boxes(task: TaskSpec, name: str, staged: StagedData, case_id: str) -> list[dict[str, Any]]:
    meta = contract.read_meta(staged.public / case_id)
    first = task.params.get("task_class") or meta.classes[0]
    if name == "perfect":
        truth = read_truth(staged.private / case_id)["boxes"]
        return [_box(b["class"] if b["class"] in meta.classes else first, 1.0, b["x1"], b["y1"], b["x2"], b["y2"])
                for b in truth]
    if name == "empty":
        return []
    if name == "constant":
        return [_box(first, 0.5, 0.0, 0.0, float(meta.width), float(meta.height))]
    if name == "prior-boxes":
        return _prior_boxes(staged, meta.classes, first if task.params.get("task_class") else None,
                            float(meta.width), float(meta.height))
    if name == "class-hedge":
        boxes = baseline_boxes(task, "classical", staged, case_id)
        return boxes + [_box(c, round(0.1 * b["score"], 4), b["x1"], b["y1"], b["x2"], b["y2"])
                        for b in boxes for c in meta.classes if c != b["class"]]
    image = Image.open(staged.public / case_id / contract.IMAGE_FILE)
    if image.mode == "RGB" and set(meta.classes) >= {"RBC", "WBC", "Platelets"}:
        from .solution.method import detect

        return detect(np.asarray(image))
    return _otsu_blobs(np.asarray(image.convert("L")), first)


def write_baseline(task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
    """One prediction.json per case under `dest` with the baseline's boxes."""
    if name not in BASELINES:
        raise UserError(f"unknown baseline {name!r}")
    for case_id in staged.case_ids:
        boxes = baseline_boxes(task, name, staged, case_id)
        target = dest / case_id
        target.mkdir(parents=True, exist_ok=True)
        (target / contract.PREDICTION_FILE).write_text(json.dumps({"boxes": boxes}) + "\n")
