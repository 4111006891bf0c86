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
BLOCK = 256          # boxes compared at once: memory is BLOCK x the image's boxes, not their square


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


def cross_class_duplicates(det: Boxes, iou: float = DUPLICATE_IOU, gt: Boxes | None = None,
                           match_iou: float | None = None) -> int:
    """Boxes that repeat a higher-scored box of another class in the same image: class-agnostic duplicate
    counting. Ties in score go to the earlier box. Two boxes are one object when their IoU is >= `iou`, or,
    given the ground truth `gt`, when both overlap one ground-truth box at >= `match_iou` (the metric's
    threshold): the metric then credits each in its own class. Without that second rule, wrong-class copies
    shrunk a few per cent (IoU 0.87 and 0.74 with the original, all still matching) counted 0 duplicates and
    kept the whole hedging gain: rating C -> B on the demo.

    The contract allows MAX_BOXES per image, and the whole pairwise matrix of that many (a dozen 3.2 GB
    arrays) ran the evaluator out of memory on a valid submission. So boxes are taken BLOCK at a time in x1
    order and compared only with the boxes whose x1 is close enough to reach the IoU: IoU >= t needs the
    x-overlap to be at least t times either width, hence |x1a - x1b| <= (1 - t) / t * wa."""
    if not len(det) or det.score is None:
        return 0
    count = 0
    reach = (1.0 - iou) / iou if iou > 0 else np.inf
    for image in np.unique(det.image):
        idx = np.flatnonzero(det.image == image)
        by_score = idx[np.lexsort((idx, -det.score[idx]))]
        rank = np.argsort(by_score, kind="stable")  # idx is sorted: rank[p] = where idx[p] stands by score
        order = np.argsort(det.box[idx, 0], kind="stable")  # positions in idx, by x1
        box, cls, rank = det.box[idx][order], det.cls[idx][order], rank[order]
        x1, width = box[:, 0], box[:, 2] - box[:, 0]
        flagged = np.zeros(len(order), dtype=bool)
        for start in range(0, len(order), BLOCK):
            stop = min(start + BLOCK, len(order))
            radius = reach * width[start:stop] * (1 + 1e-9) + 1e-9  # float slack at the bound
            lo = np.searchsorted(x1, np.min(x1[start:stop] - radius), side="left")
            hi = np.searchsorted(x1, np.max(x1[start:stop] + radius), side="right")
            overlap = _iou(box[start:stop], box[lo:hi]) >= iou
            overlap &= cls[start:stop, None] != cls[None, lo:hi]
            overlap &= rank[None, lo:hi] < rank[start:stop, None]  # [i, j]: j ranks before i
            flagged[start:stop] |= overlap.any(axis=1)
        if gt is not None and match_iou is not None:
            flagged |= _same_truth(box, cls, rank, gt.box[gt.image == image], match_iou)
        count += int(np.count_nonzero(flagged))
    return count


def _same_truth(box: np.ndarray, cls: np.ndarray, rank: np.ndarray, truth: np.ndarray, match_iou: float) -> np.ndarray:
    """Boxes that overlap a ground-truth box (IoU >= `match_iou`) which a higher-ranked box of another class
    overlaps too: the same object submitted under two classes, however the copy was moved or resized."""
    flagged = np.zeros(len(box), dtype=bool)
    for g in range(len(truth)):
        near = np.flatnonzero(_iou(box, truth[g:g + 1])[:, 0] >= match_iou)
        if len(near) < 2:
            continue
        near = near[np.argsort(rank[near], kind="stable")]  # best-ranked first
        first_cls = cls[near[0]]
        others = near[1:]
        # a box repeats a better one of another class: any better box of a class not its own
        seen_classes = np.maximum.accumulate(cls[near] != first_cls)  # a second class has appeared by then
        flagged[others[cls[others] != first_cls]] = True
        flagged[others[(cls[others] == first_cls) & seen_classes[:-1]]] = True
    return flagged


def cap_per_image(det: Boxes, limit: int = MAX_DETS) -> Boxes:
    """The `limit` highest-scored boxes of each image (COCO's maxDets; ties to the earlier box)."""
    if not len(det) or det.score is None:
        return det
    keep = np.zeros(len(det), dtype=bool)
    for image in np.unique(det.image):
        idx = np.flatnonzero(det.image == image)
        keep[idx[np.lexsort((idx, -det.score[idx]))][:limit]] = True
    return Boxes(det.image[keep], det.cls[keep], det.box[keep], det.score[keep])
