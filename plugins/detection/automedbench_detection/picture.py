"""Each case's picture for the run page: the image with the agent's confident boxes (orange) beside the reference
boxes (green). The prediction is the one the scoring parsed with the contract's parser (size- and depth-limited
JSON); nothing is read from the submission again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from automedbench.api import Box, CasePicture, Panel, read_image

from . import contract
from .data.staged import read_truth

MAX_DRAWN = 60  # boxes drawn per panel (the highest-scored)
MAX_CLASSES_NAMED = 8  # classes a caption counts boxes of


def _per_class(classes: list[str], order: list[str]) -> str:
    """" (RBC 33, WBC 1, Platelets 2)": the boxes by class, in the task's class order, as the mAP counts them. A
    crowded panel draws its boxes without their labels, so the caption said how many boxes, not of which class."""
    counts: dict[str, int] = {}
    for name in sorted(classes, key=lambda c: order.index(c) if c in order else len(order)):
        counts[name or "?"] = counts.get(name or "?", 0) + 1
    if not counts:
        return ""
    shown = ", ".join(f"{name[:40]} {n}" for name, n in list(counts.items())[:MAX_CLASSES_NAMED])
    more = f", {len(counts) - MAX_CLASSES_NAMED} more classes" if len(counts) > MAX_CLASSES_NAMED else ""
    return f" ({shown}{more})"


def case_picture(inputs: Path, reference: Path, parsed: contract.Parsed | None, extra: tuple[str, ...],
                 threshold: float) -> CasePicture:
    meta = contract.read_meta(inputs)
    names = list(meta.classes) + [c for c in extra if c not in meta.classes]  # the parser's class indices
    image = read_image(inputs / contract.IMAGE_FILE)
    extent = (meta.width, meta.height)
    truth = read_truth(reference)
    gold = [Box(b["x1"], b["y1"], b["x2"], b["y2"], str(b.get("class", ""))) for b in truth["boxes"][:MAX_DRAWN]]
    panels = [Panel("input", image=image, role="input")]
    caption = f"{len(truth['boxes'])} reference box(es)" + _per_class([str(b.get("class", "")) for b in truth["boxes"]],
                                                                     names)
    if parsed is None:
        panels.append(Panel("output", note="no valid output", role="output"))
    else:
        order = [int(i) for i in np.argsort(-parsed.score, kind="stable") if parsed.score[i] >= threshold][:MAX_DRAWN]
        boxes = [Box(*map(float, parsed.box[i]), f"{names[int(parsed.cls[i])]} {parsed.score[i]:.2f}") for i in order]
        panels.append(Panel(f"output (score >= {threshold:g})", image=image, boxes=boxes, role="output",
                            extent=extent))
        confident = _per_class([names[int(parsed.cls[i])] for i in order], names)
        caption = f"{len(order)} confident of {len(parsed.cls)} predicted box(es){confident}; " + caption
    panels.append(Panel("reference", image=image, boxes=gold, role="reference", extent=extent))
    return CasePicture(panels, caption)
