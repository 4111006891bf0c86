"""Per-case scores and the cohort metric for both task kinds.

organ + lesion: Task = 0.5 · mean lesion Dice over the reference-positive cases + 0.5 · mean organ
Dice over all cases; with no reference-positive case the lesion term is 0 (the original's `mean_lesion_dice`
of an empty list; before round 18 the Task was then the organ Dice alone). Multi-label: Task = macro mean over
labels of the per-label mean Dice, or, with `primary_label: K` (PANTHER: the tumour), the mean Dice of
label K alone, the other labels and the macro mean staying as components. A label absent from both
prediction and reference scores 1. A missing or invalid case counts 0 in the partial value and makes
the strict value 0. HD95 / surface Dice (MONAI) are extra components, averaged over the cases where
they are defined. `present_dice` (multi-label) is the same fold over only the (case, label) pairs whose
reference contains the label: the Dice earned on structures that are there, which an output cannot collect
from labels absent from a scan's field of view (the track holds a Task it is below the okay band of at C).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import (
    CASE_LEFT_OUT,
    CasePicture,
    CaseScore,
    MetricBlock,
    StagedData,
    TaskEvaluation,
    TaskSpec,
    UserError,
)

from . import dice, io, surface
from .labels import rounds_labels, task_labels

SURFACE_KEYS = ("hd95_mm", "surface_dice")


def _surface(task: TaskSpec, prefix: str, pred: np.ndarray, ref: np.ndarray, spacing) -> dict[str, Any]:
    if not task.params.get("surface_metrics") or surface.unavailable():
        return {}
    tol = float(task.params.get("surface_tolerance_mm", 2.0))
    return {f"{prefix}_{k}": v for k, v in surface.surface_metrics(pred, ref, spacing, tol).items()}


def score_organ_lesion(task: TaskSpec, case_id: str, submitted: Path, private: Path,
                       cache: io.CaseCache) -> CaseScore:
    values: dict[str, Any] = {}
    for part in ("organ", "lesion"):
        _, pred = cache.load(submitted / f"{part}.nii.gz")
        ref_image, ref = cache.load(private / f"{part}.nii.gz")
        n_pred, n_ref, n_both = dice.binary_counts(pred, ref)
        broken = dice.has_nan(ref)  # a NaN in the reference: Dice 0, never a skipped label
        values[f"{part}_dice"] = 0.0 if broken else dice.dice_from_counts(n_pred, n_ref, n_both)
        values[f"{part}_positive"] = n_ref > 0
        # the constant baseline's (every voxel foreground) Dice on this case: S5's positive evidence and S3's bound
        # ask for more, so an all-ones mask (Dice ~0.04 against the demo's organ) shows no agreement (round 37)
        values[f"{part}_constant_dice"] = 0.0 if broken else dice.uniform_dice(int(ref.size), n_ref)
        values.update(_surface(task, part, pred, ref, ref_image.header.get_zooms()[:3]))
    return CaseScore(case_id, values)


def score_multilabel(task: TaskSpec, case_id: str, submitted: Path, private: Path,
                     cache: io.CaseCache) -> CaseScore:
    name = task.output_files[0]
    labels = sorted(task_labels(task))
    _, pred = cache.load(submitted / name)
    if rounds_labels(task):  # a float map read as its nearest labels, as the checker admitted it
        pred = dice.integer_labels(pred)
    ref_image, ref = cache.load(private / name)
    per, present, voxels = dice.dice_and_present(pred, ref, labels)
    values: dict[str, Any] = {f"dice_{k}": v for k, v in per.items()}
    # each label's uniform mask (label k everywhere): its Dice on this case, the bar for positive evidence (round 37)
    values.update({f"uniform_dice_{k}": dice.uniform_dice(int(ref.size), n) for k, n in voxels.items() if k in present})
    values["macro_dice"] = float(np.mean(list(per.values())))
    values["reference_labels"] = present
    if task.params.get("surface_metrics") and not surface.unavailable():
        spacing = ref_image.header.get_zooms()[:3]
        ref = dice.integer_labels(ref)  # a float reference read as rounded labels, as its Dice reads it
        for k in labels:
            values.update(_surface(task, f"label_{k}", pred == k, ref == k, spacing))
    return CaseScore(case_id, values)


def primary_label(task: TaskSpec) -> int | None:
    """The label whose Dice is the Task (`params.primary_label`), or None for the macro mean over labels."""
    value = task.params.get("primary_label")
    if value is None:
        return None
    if int(value) not in task_labels(task):
        raise UserError(f"{task.id}: primary_label {value} is not one of its labels {sorted(task_labels(task))}")
    return int(value)


def present_dice(scores: list[CaseScore | None], labels: list[int]) -> float | None:
    """Macro mean over `labels` of each label's mean Dice over the cases whose reference contains it (labels
    no reference contains are left out); None when no reference contains any of them. A missing or invalid
    case counts Dice 0 for every label (which ones its reference holds is not read): leaving out the cases a
    submission does badly on can only lower this, never lift it past the rating cap."""
    per_label = []
    for k in labels:
        values = [0.0 if s is None else s.values[f"dice_{k}"] for s in scores
                  if s is None or k in s.values.get("reference_labels", [])]
        if values:
            per_label.append(float(np.mean(values)))
    return float(np.mean(per_label)) if per_label else None


def _mean_defined(scores: list[CaseScore | None], key: str) -> float | None:
    vals = [s.values[key] for s in scores if s is not None and s.values.get(key) is not None]
    return float(np.mean(vals)) if vals else None


def _surface_components(task: TaskSpec, scores: list[CaseScore | None], prefixes: list[str]) -> dict:
    if not task.params.get("surface_metrics"):
        return {}
    if surface.unavailable():
        return {f"{p}_{k}": None for p in prefixes for k in SURFACE_KEYS}
    return {f"{p}_{k}": _mean_defined(scores, f"{p}_{k}") for p in prefixes for k in SURFACE_KEYS}


def aggregate(task: TaskSpec, scores: list[CaseScore | None], case_ids: list[str], private: Path) -> MetricBlock:
    complete = len(scores) == len(case_ids) and all(s is not None for s in scores)
    per_case = [{"case_id": c, **(s.values if s else {"valid": False})} for c, s in zip(case_ids, scores, strict=True)]
    if task.params.get("kind") == "multilabel":
        names = task_labels(task)
        per_label = {f"dice_{k}_{names[k]}": float(np.mean([s.values[f"dice_{k}"] if s else 0.0 for s in scores]))
                     for k in sorted(names)} if scores else {}
        macro = float(np.mean(list(per_label.values()))) if per_label else 0.0
        primary = primary_label(task)
        partial = per_label.get(f"dice_{primary}_{names[primary]}", 0.0) if primary is not None else macro
        comps: dict[str, float | None] = {"macro_dice": macro, **per_label, "present_dice": present_dice(
            scores, [primary] if primary is not None else sorted(names))}
        comps.update(_surface_components(task, scores, [f"label_{k}" for k in sorted(names)]))
    else:
        facts = io.read_case_facts(private)
        positive = [bool(s.values["lesion_positive"]) if s else bool(facts.get(c, {}).get("lesion_present", True))
                    for c, s in zip(case_ids, scores, strict=True)]
        organ = float(np.mean([s.values["organ_dice"] if s else 0.0 for s in scores])) if scores else 0.0
        lesion_vals = [s.values["lesion_dice"] if s else 0.0 for s, p in zip(scores, positive, strict=True) if p]
        lesion = float(np.mean(lesion_vals)) if lesion_vals else 0.0  # no positive case: 0, as the original
        partial = 0.5 * organ + 0.5 * lesion
        for row, score in zip(per_case, scores, strict=True):
            if score is not None and not score.values["lesion_positive"]:  # Dice 1 by convention, not counted
                row[CASE_LEFT_OUT] = {"lesion_dice": "no lesion in the reference: the Task's lesion Dice is the "
                                                     "mean over the cases with one"}
        comps = {"organ_dice": organ, "lesion_dice": lesion, "lesion_positive_cases": float(sum(positive)),
                 # the original's previous weighting, which the paper's worked example (App. I.1) prints as Task
                 "organ25_lesion75": 0.25 * organ + 0.75 * lesion}
        comps.update(_surface_components(task, scores, ["organ", "lesion"]))
    # a surface distance is a length, printed with its unit where Dice values beside it have none
    units = {k: "mm" for k in comps if k.endswith("_hd95_mm")}
    return MetricBlock(task.metric, partial if complete else 0.0, partial, components=comps, per_case=per_case,
                       counts=[k for k in ("lesion_positive_cases",) if k in comps], units=units)


class SegmentationEvaluation(TaskEvaluation):
    """One evaluation: Dice per case (binary pair or label map), then the cohort fold.

    `cache` is the track's case cache, shared with the contract check so each volume loads once per case."""

    def __init__(self, task: TaskSpec, staged: StagedData, options: dict[str, str] | None = None,
                 cache: io.CaseCache | None = None) -> None:
        super().__init__(task, staged, options)
        self.cache = cache if cache is not None else io.CaseCache()

    def score_case(self, case_id: str, submitted: Path) -> CaseScore:
        self.cache.begin(case_id)
        private = self.staged.private / case_id
        if self.task.params.get("kind") == "multilabel":
            return score_multilabel(self.task, case_id, submitted, private, self.cache)
        return score_organ_lesion(self.task, case_id, submitted, private, self.cache)

    def case_picture(self, case_id: str, submitted: Path | None) -> CasePicture | None:
        from .picture import case_picture

        self.cache.begin(case_id)  # the volumes the check and the scoring just loaded stay cached
        return case_picture(self.task, self.staged.public / case_id, submitted, self.staged.private / case_id,
                            self.cache)

    def aggregate(self, scores: list[CaseScore | None], case_ids: list[str]) -> MetricBlock:
        self.cache.begin("")  # the last case's volumes are no longer needed
        return aggregate(self.task, scores, case_ids, self.staged.private)
