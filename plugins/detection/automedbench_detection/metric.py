"""The detection Task metric: mAP@IoU (COCO 101-point, mean over classes with ground truth), pooled.

mAP is not a mean of per-case scores, so `score_case` only parses and keeps each valid case's boxes;
`aggregate` reads every case's ground truth (missing and invalid cases too: their boxes are misses)
and computes the cohort metric once. Partial = that value; strict = 0 unless every case was valid
(the original's completeness gate: a missing prediction.json zeroes the strict Task).

Task params: `classes` (the names in meta.json), `iou_threshold` (0.5), `score_threshold` (the operating
point: `micro_*_at_threshold` and the per-case TP/FP/FN count boxes with score >= it; `micro_*` count every
box, as the original scorer does), and optionally `task_class`: every box, of
any class, is scored as that one class for the Task (VinDr-CXR's "abnormality"), with per-class AP
over `classes` as components.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import CasePicture, CaseScore, MetricBlock, StagedData, TaskEvaluation, TaskSpec

from . import contract
from .average_precision import Boxes, mean_average_precision
from .data.staged import read_truth
from .hedging import cap_per_image, cross_class_duplicates


def task_classes(task: TaskSpec) -> tuple[list[str], str | None]:
    """(the class names an agent may use besides `task_class`, the collapsed Task class or None)."""
    return [str(c) for c in task.params["classes"]], task.params.get("task_class")


def micro_prf(tp: int, n_pred: int, n_gt: int) -> dict[str, float]:
    """Micro precision/recall/F1 with the original's empty-side rule: no box claimed is precision 1, nothing to
    find is recall 1 (so both empty is perfect, and one empty side still gives F1 0)."""
    precision = tp / n_pred if n_pred else 1.0
    recall = tp / n_gt if n_gt else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


class DetectionEvaluation(TaskEvaluation):
    def __init__(self, task: TaskSpec, staged: StagedData, options: dict[str, str] | None = None) -> None:
        super().__init__(task, staged, options)
        self.classes, self.task_class = task_classes(task)
        self.extra = (self.task_class,) if self.task_class else ()
        self.iou = float(task.params.get("iou_threshold", 0.5))
        self.score_threshold = float(task.params.get("score_threshold", 0.5))
        self.predictions: dict[str, contract.Parsed] = {}

    def score_case(self, case_id: str, submitted: Path) -> CaseScore:
        meta = contract.read_meta(self.staged.public / case_id)
        parsed = contract.parse_prediction(submitted / contract.PREDICTION_FILE, meta, self.extra, self.task_class)
        if not parsed.valid:
            raise ValueError("; ".join(parsed.reasons))
        self.predictions[case_id] = parsed
        return CaseScore(case_id, {"boxes": len(parsed.cls)})

    def case_picture(self, case_id: str, submitted: Path | None) -> CasePicture | None:
        from .picture import case_picture

        parsed = self.predictions.get(case_id) if submitted is not None else None
        return case_picture(self.staged.public / case_id, self.staged.private / case_id, parsed, self.extra,
                            self.score_threshold)

    # ---------------------------------------------------------------- cohort

    def _truth(self, order: list[str]) -> tuple[Boxes, list[tuple[int, int]]]:
        index = {name: k for k, name in enumerate(self.classes)}
        parts, sizes = [], []
        for k, case_id in enumerate(order):
            record = read_truth(self.staged.private / case_id)
            boxes = record["boxes"]
            sizes.append((int(record["width"]), int(record["height"])))
            other = len(self.classes) + len(self.extra)
            cls = np.array([index.get(b["class"], other) for b in boxes], dtype=np.int64)
            xyxy = np.array([[b["x1"], b["y1"], b["x2"], b["y2"]] for b in boxes], dtype=np.float64).reshape(-1, 4)
            parts.append(Boxes(np.full(len(boxes), k, dtype=np.int64), cls, xyxy))
        return Boxes.concat(parts), sizes

    def _detections(self, order: list[str]) -> Boxes:
        parts = [Boxes(np.full(len(p.cls), k, dtype=np.int64), p.cls, p.box, p.score)
                 for k, case_id in enumerate(order) if (p := self.predictions.get(case_id)) is not None]
        return Boxes.concat(parts) if parts else Boxes.empty(with_scores=True)

    def aggregate(self, scores: list[CaseScore | None], case_ids: list[str]) -> MetricBlock:
        order = sorted(case_ids)  # the tie-break order: case id, then box index
        gt, sizes = self._truth(order)
        det = self._detections(order)
        # class indices: the task's classes, then `task_class` (VinDr), then ground truth of other classes
        n_cls = len(self.classes) + len(self.extra) + 1
        components: dict[str, float | None] = {}
        per_class = mean_average_precision(det, gt, n_cls, self.iou)
        class_ap = per_class.per_class[: len(self.classes)]
        mean_class = float(np.nanmean(class_ap)) if np.any(~np.isnan(class_ap)) else float("nan")
        if self.task_class:
            agnostic = mean_average_precision(_one_class(det), _one_class(gt), 1, self.iou)
            value, tp = agnostic.mean, agnostic.tp
            components[f"ap_{self.task_class}"] = _num(agnostic.per_class[0])
            components["map_per_class"] = _num(mean_class)
        else:
            value, tp = mean_class, per_class.tp
        for k, name in enumerate(self.classes):
            components[f"ap_{name}"] = _num(class_ap[k])
        value = 0.0 if np.isnan(value) else float(value)
        confident = det.score >= self.score_threshold
        # the original's micro values count every box, whatever its score; the operating point's beside them
        components.update({f"micro_{k}": v for k, v in micro_prf(int(np.sum(tp)), len(det), len(gt)).items()})
        at_threshold = micro_prf(int(np.sum(tp & confident)), int(np.sum(confident)), len(gt))
        components.update({f"micro_{k}_at_threshold": v for k, v in at_threshold.items()})
        components.update(self._diagnostics(det, gt, order, sizes))
        components.update(self._hedging(det, gt, n_cls))
        components.update(self._chance(det, gt, sizes, n_cls, tp, confident))
        components["unscored_boxes"] = float(sum(p.unscored for p in self.predictions.values()))
        components.update({"gt_boxes": float(len(gt)), "predicted_boxes": float(len(det)),
                           "iou_threshold": self.iou, "score_threshold": self.score_threshold})
        per_case = self._per_case(order, det, gt, tp, confident)
        complete = len(scores) == len(case_ids) and all(s is not None for s in scores)
        return MetricBlock(self.task.metric, value if complete else 0.0, value, components=components,
                           per_case=per_case, counts=list(COUNTS))

    def _per_case(self, order: list[str], det: Boxes, gt: Boxes, hits: np.ndarray,
                  confident: np.ndarray) -> list[dict[str, Any]]:
        """Per case: true positives at any score (`tp`, S5's evidence: each lifts the mAP above 0, as the
        original's matching has no score cut) and TP/FP/FN among the boxes scored at the operating point."""
        n = len(order)
        found = np.bincount(det.image[hits], minlength=n)
        tp = np.bincount(det.image[hits & confident], minlength=n)
        pred = np.bincount(det.image[confident], minlength=n)
        truth = np.bincount(gt.image, minlength=n)
        rows = []
        for k, case_id in enumerate(order):
            valid = case_id in self.predictions
            rows.append({"case_id": case_id, "valid": valid, "gt_boxes": int(truth[k]),
                         "predicted_boxes": int(np.sum(det.image == k)) if valid else None,
                         "unscored_boxes": self.predictions[case_id].unscored if valid else None,
                         "tp": int(found[k]), "tp_at_threshold": int(tp[k]), "fp_at_threshold": int(pred[k] - tp[k]),
                         "fn_at_threshold": int(truth[k] - tp[k])})
        return rows

    def _matches(self, det: Boxes, gt: Boxes, n_cls: int) -> np.ndarray:
        """True-positive flags as the Task counts them (per class, or every box as `task_class`), at any score."""
        if self.task_class:
            return mean_average_precision(_one_class(det), _one_class(gt), 1, self.iou).tp
        return mean_average_precision(det, gt, n_cls, self.iou).tp

    def _chance(self, det: Boxes, gt: Boxes, sizes: list[tuple[int, int]], n_cls: int, tp: np.ndarray,
                confident: np.ndarray) -> dict[str, float | None]:
        """The boxes' true positives (`matched`) beside what the same boxes match against other images' references
        (each case's boxes over the references of the case CHANCE_SHIFTS later, scaled to that image's size,
        averaged): boxes placed without looking, a grid or the same prior boxes in every image, match both alike
        (S5's whole-run fact; rounds 39, 41). The same counts among the boxes at the operating score too: a
        detector's low-score tail (a score floor of 0.001, as mAP is measured) can match other images as often as
        its own while its confident boxes do not (review32). And the references' own count over other images'
        (`reference_matched_by_chance`): how far a perfect detector stands above what its boxes match elsewhere
        (near all of it where every image shows the same anatomy in the same place). None with fewer than two
        cases."""
        n = len(sizes)
        own: dict[str, float | None] = {"matched": float(np.sum(tp)),
                                        "matched_at_threshold": float(np.sum(tp & confident))}
        if n < 2:
            return own | {"matched_by_chance": None, "matched_at_threshold_by_chance": None,
                          "reference_matched_by_chance": None}
        shifts = range(1, min(CHANCE_SHIFTS, n - 1) + 1)
        truth = Boxes(gt.image, gt.cls, gt.box, np.ones(len(gt)))
        reference = [np.sum(self._matches(_moved(truth, k, sizes), gt, n_cls)) for k in shifts]
        own["reference_matched_by_chance"] = round(float(np.mean(reference)), 4)
        if not len(det):
            return own | {"matched_by_chance": None, "matched_at_threshold_by_chance": None}
        flags = [self._matches(_moved(det, k, sizes), gt, n_cls) for k in shifts]
        return own | {"matched_by_chance": round(float(np.mean([np.sum(f) for f in flags])), 4),
                      "matched_at_threshold_by_chance": round(float(np.mean([np.sum(f & confident) for f in flags])),
                                                              4)}

    def _hedging(self, det: Boxes, gt: Boxes, n_cls: int) -> dict[str, float]:
        """Class hedging made visible (the Task keeps the paper's uncapped mAP): the share of boxes that
        repeat another class's box, and mAP with COCO's 100-boxes-per-image cap."""
        duplicates = cross_class_duplicates(det, gt=gt, match_iou=self.iou)
        capped = cap_per_image(det)
        if self.task_class:
            capped_value = mean_average_precision(_one_class(capped), _one_class(gt), 1, self.iou).mean
        else:
            capped_ap = mean_average_precision(capped, gt, n_cls, self.iou).per_class[: len(self.classes)]
            capped_value = float(np.nanmean(capped_ap)) if np.any(~np.isnan(capped_ap)) else 0.0
        return {"cross_class_duplicates": float(duplicates),
                "cross_class_duplicate_share": round(duplicates / len(det), 4) if len(det) else 0.0,
                "map_max100": 0.0 if np.isnan(capped_value) else float(capped_value)}

    def _diagnostics(self, det: Boxes, gt: Boxes, order: list[str], sizes: list[tuple[int, int]]) -> dict:
        """Facts for the error-code detectors: boxes inside [0, 1] (normalised, not pixels) and how many
        more ground truths a class-agnostic match finds with x and y swapped."""
        if not len(det):
            return {"diag_normalised_cases": 0.0, "diag_tp_agnostic": 0.0, "diag_tp_xy_swapped": 0.0}
        normalised = 0
        for k in np.unique(det.image):
            width, height = sizes[k]
            if max(width, height) > 8 and float(det.box[det.image == k].max()) <= 1.0:
                normalised += 1
        plain = mean_average_precision(_one_class(det), _one_class(gt), 1, self.iou).tp
        swapped = Boxes(det.image, np.zeros_like(det.cls), det.box[:, [1, 0, 3, 2]], det.score)
        flipped = mean_average_precision(swapped, _one_class(gt), 1, self.iou).tp
        return {"diag_normalised_cases": float(normalised), "diag_tp_agnostic": float(plain.sum()),
                "diag_tp_xy_swapped": float(flipped.sum())}


# components that count boxes or cases: printed as whole numbers (a 0 duplicate reads `0`, not a score's `0.000`)
COUNTS = ("unscored_boxes", "gt_boxes", "predicted_boxes", "cross_class_duplicates", "diag_normalised_cases",
          "diag_tp_agnostic", "diag_tp_xy_swapped", "matched",
          "matched_at_threshold")
CHANCE_SHIFTS = 3  # other images' references each box set is also matched against (averaged: a steadier chance)


def _moved(boxes: Boxes, k: int, sizes: list[tuple[int, int]]) -> Boxes:
    """Each image's boxes on the image k places later, scaled to its size: a box at a fixed fraction of the image
    (a prior in relative coordinates) lands where it would have been written there."""
    n = len(sizes)
    if not len(boxes):
        return boxes
    wh = np.asarray(sizes, dtype=np.float64).reshape(-1, 2)
    target = (boxes.image + k) % n
    scale = wh[target] / np.maximum(wh[boxes.image], 1.0)
    return Boxes(target, boxes.cls, boxes.box * np.tile(scale, 2), boxes.score)


def _one_class(boxes: Boxes) -> Boxes:
    return Boxes(boxes.image, np.zeros_like(boxes.cls), boxes.box, boxes.score)


def _num(value: float) -> float | None:
    return None if np.isnan(value) else float(value)
