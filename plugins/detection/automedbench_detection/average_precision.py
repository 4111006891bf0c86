"""mAP@IoU over flat numpy arrays: greedy score-ordered matching per image and class, COCO 101-point AP.

No harness imports, so the benchmark and the comparison script use exactly what the evaluator uses.

Rules (the README states them for agents):
- a detection matches the unmatched ground truth of its image and class with the highest IoU, if that
  IoU >= the threshold; detections are taken in descending score, ties by (image order, box index);
  among ground truths with the same best IoU the first in the file wins (the original scorer's strict `>`;
  pycocotools keeps the last, so the two differ only on exact IoU ties, which integer boxes make common);
- detections of a class are pooled over images in the same order; AP is COCO's: the precision envelope
  sampled at the 101 recall points 0, 0.01, …, 1 (0 where the recall is never reached);
- mAP is the mean over classes with at least one ground-truth box; there is no cap on detections.
IoU uses continuous corners (no +1).

Matching is vectorised across (image, class) groups: the pairs that can match (IoU >= threshold) are
found for all groups at once, then the greedy pass takes one step per detection rank, all groups at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# recall 0, 0.01, ..., 1 as the original scorer writes them (k / 100.0): np.linspace (pycocotools') rounds 10 of
# them one ulp up (0.7000000000000001), so a recall of exactly 7/10 missed the 0.70 sample (round 24)
RECALL_POINTS = np.arange(101) / 100.0


@dataclass
class Boxes:
    """Boxes of many images as parallel arrays. `image` is the image's position in the evaluation order
    (ties in score are broken by it); `box` is (N, 4) x1, y1, x2, y2 in pixels."""

    image: np.ndarray
    cls: np.ndarray
    box: np.ndarray
    score: np.ndarray | None = None

    @classmethod
    def empty(cls, with_scores: bool = False) -> Boxes:
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z.copy(), np.zeros((0, 4)), np.zeros(0) if with_scores else None)

    @classmethod
    def concat(cls, parts: list[Boxes]) -> Boxes:
        if not parts:
            return cls.empty()
        scores = [p.score for p in parts]
        return cls(np.concatenate([p.image for p in parts]).astype(np.int64),
                   np.concatenate([p.cls for p in parts]).astype(np.int64),
                   np.concatenate([p.box.reshape(-1, 4) for p in parts]).astype(np.float64),
                   None if any(s is None for s in scores) else np.concatenate(scores).astype(np.float64))

    def __len__(self) -> int:
        return len(self.image)


def _runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct values, first positions and lengths of the runs of a sorted array (np.unique without
    the sort)."""
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, dtype=np.int64)
    counts = np.diff(np.r_[starts, len(keys)])
    return keys[starts], starts, counts


def _group_ranks(keys: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Position of each sorted element inside its run of equal keys (keys sorted, starts = run starts)."""
    run = np.cumsum(np.r_[0, (np.diff(keys) != 0).astype(np.int64)]) if len(keys) else keys
    return np.arange(len(keys)) - starts[run]


PREFILTER_MARGIN = 1e-3  # float32 IoU error is far below this for any image size a detector sees
CHUNK_ELEMENTS = 1 << 21  # (groups x detections x references) per chunk: bounds the temporaries (~8 MB each)


def _pair_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of a[i] with b[i] (float64, continuous corners)."""
    iw = np.clip(np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]), 0.0, None)
    ih = np.clip(np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]), 0.0, None)
    inter = iw * ih
    union = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return inter / union


def _candidates(dbox: np.ndarray, gbox: np.ndarray, d_start: np.ndarray, d_count: np.ndarray,
                g_start: np.ndarray, g_count: np.ndarray, threshold: float) -> tuple[np.ndarray, ...]:
    """Every (detection, ground truth) pair of the same group with IoU >= threshold, as sorted-array
    positions plus the IoU; ordered by detection, then ground-truth position.

    Groups are sorted by (detections, references) and cut into chunks, so padding stays small; a float32
    pass with a margin finds the candidate pairs, and their IoU is then recomputed in float64."""
    found: list[tuple[np.ndarray, np.ndarray]] = []
    d32 = [np.ascontiguousarray(dbox[:, c], dtype=np.float32) for c in range(4)]
    g32 = [np.ascontiguousarray(gbox[:, c], dtype=np.float32) for c in range(4)]
    order = np.lexsort((g_count, d_count))
    pos = 0
    while pos < len(order):
        size = 4096
        while True:
            chunk = order[pos:pos + size]
            width_d, width_g = int(d_count[chunk].max()), int(g_count[chunk].max())
            if size == 1 or len(chunk) * width_d * width_g <= CHUNK_ELEMENTS:
                break
            size //= 2
        pos += len(chunk)
        rows_d, rows_g = np.arange(width_d), np.arange(width_g)
        valid_d = rows_d[None, :] < d_count[chunk][:, None]
        valid_g = rows_g[None, :] < g_count[chunk][:, None]
        di = np.where(valid_d, d_start[chunk][:, None] + rows_d[None, :], 0)
        gi = np.where(valid_g, g_start[chunk][:, None] + rows_g[None, :], 0)
        ax1, ay1, ax2, ay2 = (c[di][:, :, None] for c in d32)
        bx1, by1, bx2, by2 = (c[gi][:, None, :] for c in g32)
        inter = np.minimum(ax2, bx2)
        inter -= np.maximum(ax1, bx1)
        np.maximum(inter, 0.0, out=inter)
        ih = np.minimum(ay2, by2)
        ih -= np.maximum(ay1, by1)
        np.maximum(ih, 0.0, out=ih)
        inter *= ih
        union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1)
        union -= inter
        union *= np.float32(threshold - PREFILTER_MARGIN)
        hit = inter >= union  # IoU >= threshold - margin, without a division
        hit &= valid_d[:, :, None]
        hit &= valid_g[:, None, :]
        g_idx, d_pos, g_pos = np.nonzero(hit)
        found.append((di[g_idx, d_pos], gi[g_idx, g_pos]))
    d_all = np.concatenate([f[0] for f in found])
    g_all = np.concatenate([f[1] for f in found])
    iou = _pair_iou(dbox[d_all], gbox[g_all])
    keep = iou >= threshold
    d_all, g_all, iou = d_all[keep], g_all[keep], iou[keep]
    order = np.lexsort((g_all, d_all))
    return d_all[order], g_all[order], iou[order]


def match(det: Boxes, gt: Boxes, iou_threshold: float = 0.5) -> np.ndarray:
    """True-positive flag for every detection (in `det`'s order) under the greedy rule above.

    Only pairs with IoU >= the threshold can match, so they are found first, all groups at once; the
    greedy pass then takes one step per detection rank over the (few) detections that have any."""
    tp = np.zeros(len(det), dtype=bool)
    if not len(det) or not len(gt):
        return tp
    n_cls = int(max(det.cls.max(), gt.cls.max())) + 1
    dkey = det.image * n_cls + det.cls
    gkey = gt.image * n_cls + gt.cls
    by_score = np.argsort(-det.score, kind="stable")  # score desc, then box index
    dorder = by_score[np.argsort(dkey[by_score], kind="stable")]  # then by group
    gorder = np.argsort(gkey, kind="stable")
    dk, gk = dkey[dorder], gkey[gorder]
    groups, d_start, d_count = _runs(dk)
    g_groups, g_start, g_count = _runs(gk)
    common, di, gi = np.intersect1d(groups, g_groups, assume_unique=True, return_indices=True)
    if not len(common):
        return tp
    cand_d, cand_g, cand_iou = _candidates(det.box[dorder], gt.box[gorder], d_start[di], d_count[di],
                                           g_start[gi], g_count[gi], iou_threshold)
    if not len(cand_d):
        return tp
    # one row per detection that has candidates, its candidates padded to the widest row
    dets, first, width = _runs(cand_d)
    slot = np.arange(len(cand_d)) - np.repeat(first, width)
    row = np.repeat(np.arange(len(dets)), width)
    cand = np.full((len(dets), int(width.max())), -1, dtype=np.int64)
    value = np.full(cand.shape, -1.0)
    cand[row, slot] = cand_g
    value[row, slot] = cand_iou
    # rank of each such detection among its group's detections that have candidates (score order)
    group_of = np.searchsorted(d_start, dets, side="right") - 1
    rank = _group_ranks(group_of, _runs(group_of)[1])
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.searchsorted(rank[by_rank], np.arange(int(rank.max()) + 2))
    free = np.ones(len(gt), dtype=bool)
    sorted_tp = np.zeros(len(det), dtype=bool)
    for k in range(int(rank.max()) + 1):
        rows = by_rank[bounds[k]:bounds[k + 1]]  # at most one detection per group: no conflicts
        options = cand[rows]
        vals = np.where((options >= 0) & free[np.maximum(options, 0)], value[rows], -1.0)
        pick = np.argmax(vals, axis=1)  # the first of equal best IoUs (candidates are in file order)
        chosen = options[np.arange(len(rows)), pick]
        hit = vals[np.arange(len(rows)), pick] >= iou_threshold
        sorted_tp[dets[rows[hit]]] = True
        free[chosen[hit]] = False
    tp[dorder] = sorted_tp
    return tp


def class_ap(score: np.ndarray, tp: np.ndarray, n_gt: int) -> float:
    """COCO 101-point AP of one class's pooled detections, given in tie-break order (image, box index)."""
    if n_gt == 0:
        return float("nan")
    if not len(score):
        return 0.0
    hits = tp[np.argsort(-score, kind="stable")]
    tps = np.cumsum(hits, dtype=np.float64)
    fps = np.cumsum(~hits, dtype=np.float64)
    recall = tps / n_gt
    precision = tps / (tps + fps)
    envelope = np.maximum.accumulate(precision[::-1])[::-1]
    at = np.searchsorted(recall, RECALL_POINTS, side="left")
    sampled = np.where(at < len(envelope), envelope[np.minimum(at, len(envelope) - 1)], 0.0)
    return float(sampled.mean())


@dataclass
class APResult:
    per_class: np.ndarray  # NaN for classes without ground truth
    tp: np.ndarray  # per detection, in the input order

    @property
    def mean(self) -> float:
        defined = self.per_class[~np.isnan(self.per_class)]
        return float(defined.mean()) if len(defined) else float("nan")


def tie_order(det: Boxes) -> np.ndarray:
    """Detections grouped by class, each class in (image order, box index) order: the order in which
    equal scores are ranked."""
    by_image = np.argsort(det.image, kind="stable")
    return by_image[np.argsort(det.cls[by_image], kind="stable")]


def mean_average_precision(det: Boxes, gt: Boxes, n_classes: int, iou_threshold: float = 0.5) -> APResult:
    """Per-class AP and the TP flags; `APResult.mean` is the mAP over classes with ground truth."""
    tp = match(det, gt, iou_threshold)
    n_gt = np.bincount(gt.cls, minlength=n_classes) if len(gt) else np.zeros(n_classes, dtype=np.int64)
    per_class = np.full(n_classes, np.nan)
    order = tie_order(det)
    bounds = np.searchsorted(det.cls[order], np.arange(n_classes + 1))
    for c in range(n_classes):
        sel = order[bounds[c]:bounds[c + 1]]
        per_class[c] = class_ap(det.score[sel], tp[sel], int(n_gt[c]))
    return APResult(per_class, tp)


def envelope_ap(score: np.ndarray, tp: np.ndarray, n_gt: int, points: int | None) -> float:
    """VOC-style AP for the comparison table: all-point area under the envelope (points=None) or the
    VOC2007 11-point mean; same ordering as `class_ap` when the caller pre-sorts."""
    if n_gt == 0:
        return float("nan")
    if not len(score):
        return 0.0
    hits = tp
    tps = np.cumsum(hits, dtype=np.float64)
    fps = np.cumsum(~hits, dtype=np.float64)
    recall = tps / n_gt
    precision = tps / (tps + fps)
    if points is not None:
        thresholds = np.linspace(0.0, 1.0, points)
        return float(np.mean([precision[recall >= t].max() if np.any(recall >= t) else 0.0 for t in thresholds]))
    mrec = np.r_[0.0, recall, 1.0]
    mpre = np.r_[0.0, precision, 0.0]
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]
    step = np.flatnonzero(mrec[1:] != mrec[:-1])
    return float(np.sum((mrec[step + 1] - mrec[step]) * mpre[step + 1]))
