"""Generated detection sets and other mAP implementations, for the tests, the benchmark and the
agreement table (scripts/compare_map.py). pycocotools is imported only when asked for (test extra)."""

from __future__ import annotations

import contextlib
import io

import numpy as np

from .average_precision import Boxes, envelope_ap, match, tie_order


def generated_set(seed: int, n_img: int = 40, n_cls: int = 3, size: float = 512.0, gt_per: tuple[int, int] = (0, 7),
                  dup: float = 0.25, tied: bool = False, extra_fp: int = 4) -> tuple[Boxes, Boxes]:
    """Jittered true positives, lower-scored duplicates, class flips and random false positives."""
    rng = np.random.default_rng(seed)
    gi, gc, gb, di, dc, db, ds = [], [], [], [], [], [], []

    def add(i, c, b, s):
        di.append(i)
        dc.append(c)
        db.append(b)
        ds.append(round(s, 1) if tied else s)

    for i in range(n_img):
        for _ in range(int(rng.integers(*gt_per))):
            w, h = rng.uniform(8, 120, 2)
            x, y = rng.uniform(0, size - w), rng.uniform(0, size - h)
            c = int(rng.integers(n_cls))
            gi.append(i)
            gc.append(c)
            gb.append([x, y, x + w, y + h])
            if rng.random() < 0.85:
                j = rng.normal(0, 0.12 * min(w, h), 4)
                b = np.clip([x + j[0], y + j[1], x + w + j[2], y + h + j[3]], 0, size)
                if b[2] > b[0] + 1 and b[3] > b[1] + 1:
                    cc = c if rng.random() > 0.1 else int(rng.integers(n_cls))
                    add(i, cc, b, rng.random())
                    if rng.random() < dup:
                        add(i, cc, np.clip(b + rng.uniform(-2, 2, 4) * [1, 1, -1, -1], 0, size), rng.random() * 0.5)
        for _ in range(int(rng.integers(0, extra_fp + 1))):
            w, h = rng.uniform(8, 120, 2)
            x, y = rng.uniform(0, size - w), rng.uniform(0, size - h)
            add(i, int(rng.integers(n_cls)), [x, y, x + w, y + h], rng.random())
    det = Boxes(np.array(di, dtype=np.int64), np.array(dc, dtype=np.int64),
                np.array(db, dtype=float).reshape(-1, 4), np.array(ds, dtype=float))
    gt = Boxes(np.array(gi, dtype=np.int64), np.array(gc, dtype=np.int64), np.array(gb, dtype=float).reshape(-1, 4))
    return det, gt


def coco_per_class(det: Boxes, gt: Boxes, n_img: int, n_cls: int, iou: float = 0.5,
                   recall_points: np.ndarray | None = None) -> np.ndarray:
    """Per-class AP from pycocotools COCOeval (iouThrs=[iou], maxDets raised, one area range), NaN
    for classes without ground truth. Image ids follow the evaluation order (1 + image index). `recall_points`
    replaces its np.linspace recall samples (the track's are the original's k / 100, round 24)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    def xywh(b):
        return [float(b[0]), float(b[1]), float(b[2] - b[0]), float(b[3] - b[1])]

    dataset = {"images": [{"id": i + 1} for i in range(n_img)],
               "categories": [{"id": c + 1, "name": str(c)} for c in range(n_cls)],
               "annotations": [{"id": k + 1, "image_id": int(gt.image[k]) + 1, "category_id": int(gt.cls[k]) + 1,
                                "bbox": xywh(b), "area": float((b[2] - b[0]) * (b[3] - b[1])), "iscrowd": 0}
                               for k, b in enumerate(gt.box)]}
    results = [{"image_id": int(det.image[k]) + 1, "category_id": int(det.cls[k]) + 1, "bbox": xywh(b),
                "score": float(det.score[k])} for k, b in enumerate(det.box)]
    with contextlib.redirect_stdout(io.StringIO()):
        truth = COCO()
        truth.dataset = dataset
        truth.createIndex()
        found = truth.loadRes(results) if results else COCO()
        if not results:
            found.dataset = {"images": dataset["images"], "categories": dataset["categories"], "annotations": []}
            found.createIndex()
        ev = COCOeval(truth, found, "bbox")
        ev.params.iouThrs = np.array([iou])
        ev.params.maxDets = [1, 10, 10**6]
        ev.params.areaRng = [[0, 1e12]]
        ev.params.areaRngLbl = ["all"]
        if recall_points is not None:
            ev.params.recThrs = np.asarray(recall_points, dtype=np.float64)
        ev.evaluate()
        ev.accumulate()
    precision = ev.eval["precision"][0, :, :, 0, -1]
    return np.array([precision[:, k].mean() if (precision[:, k] > -1).all() else np.nan for k in range(n_cls)])


def voc_per_class(det: Boxes, gt: Boxes, n_cls: int, points: int | None, iou: float = 0.5) -> np.ndarray:
    """VOC-style AP per class on the same matching: all-point area (points=None) or VOC2007 11-point."""
    tp = match(det, gt, iou)
    order = tie_order(det)
    out = np.full(n_cls, np.nan)
    n_gt = np.bincount(gt.cls, minlength=n_cls)
    for c in range(n_cls):
        sel = order[det.cls[order] == c]
        ranked = sel[np.argsort(-det.score[sel], kind="stable")]
        out[c] = envelope_ap(det.score[ranked], tp[ranked], int(n_gt[c]), points)
    return out
