"""Components that expose class hedging, a pattern the paper's mAP rewards: the same box submitted under
every class (the wrong classes at a low score) adds recall in each class's AP and costs almost nothing,
because AP only sees each class's own ranking. The Task stays the paper's mAP; these components name the
pattern, and the rating is held at C when most boxes are such duplicates (README, "Differences")."""

from __future__ import annotations

import numpy as np

from .average_precision import Boxes

DUPLICATE_IOU = 0.9  # two boxes this close are one object, whatever their classes
HEDGED_SHARE = 0.3   # at least this share of boxes being cross-class duplicates holds the rating at C
MAX_DETS = 100       # COCO's per-image cap (maxDets), for the capped mAP component


def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def cross_class_duplicates(det: Boxes, iou: float = DUPLICATE_IOU) -> int:
    """Boxes that repeat a higher-scored box of another class in the same image (IoU >= `iou`):
    class-agnostic duplicate counting. Ties in score go to the earlier box."""
    if not len(det) or det.score is None:
        return 0
    count = 0
    for image in np.unique(det.image):
        idx = np.flatnonzero(det.image == image)
        order = idx[np.lexsort((idx, -det.score[idx]))]
        overlap = _iou(det.box[order], det.box[order]) >= iou
        other = det.cls[order][:, None] != det.cls[order][None, :]
        earlier = np.tri(len(order), k=-1, dtype=bool)  # [i, j]: j ranks before i
        count += int(np.sum(np.any(overlap & other & earlier, axis=1)))
    return count


def cap_per_image(det: Boxes, limit: int = MAX_DETS) -> Boxes:
    """The `limit` highest-scored boxes of each image (COCO's maxDets; ties to the earlier box)."""
    if not len(det) or det.score is None:
        return det
    keep = np.zeros(len(det), dtype=bool)
    for image in np.unique(det.image):
        idx = np.flatnonzero(det.image == image)
        keep[idx[np.lexsort((idx, -det.score[idx]))][:limit]] = True
    return Boxes(det.image[keep], det.cls[keep], det.box[keep], det.score[keep])
