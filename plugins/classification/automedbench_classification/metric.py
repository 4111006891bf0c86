"""The classification Task metric: balanced accuracy or accuracy over every staged case, as the release.

- accuracy = correct / N over all staged cases; a missing or invalid prediction is never correct but
  stays in the denominator.
- balanced accuracy = the mean, over the classes present in the reference, of that class's recall; a
  missing prediction counts wrong within its true class, and a class absent from the reference (even
  if predicted) is left out of the mean. Equal to scikit-learn's `balanced_accuracy_score` with missing
  predictions as an extra sentinel label (checked in the tests).

`params.score_metric` names the Task (`balanced_accuracy` or `accuracy`). Partial = that value (the
release's own: no completion factor); strict = the same when every case is valid, else 0. Components:
both metrics, macro-F1 over the task's classes seen in the reference or the predictions, per-class
recall and support, completeness, and the confusion matrix's non-zero cells as `cm_<true>__<predicted>`
counts (`missing` for a case without a valid prediction; an absent cell is 0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import CasePicture, CaseScore, MetricBlock, StagedData, TaskEvaluation, TaskSpec

from . import contract
from .data.staged import read_label

MISSING = "missing"
METRICS = ("balanced_accuracy", "accuracy")


def confusion(truth: list[str], predicted: list[str | None], classes: list[str]) -> np.ndarray:
    """Counts with rows = reference class, columns = predicted class then one `missing` column."""
    k = len(classes)
    index = {c: i for i, c in enumerate(classes)}
    rows = np.fromiter((index[t] for t in truth), dtype=np.int64, count=len(truth))
    cols = np.fromiter((k if p is None else index[p] for p in predicted), dtype=np.int64, count=len(predicted))
    return np.bincount(rows * (k + 1) + cols, minlength=k * (k + 1)).reshape(k, k + 1)


def chance_kappa(matrix: np.ndarray) -> float:
    """Cohen's kappa of the predictions against the reference (a missing prediction agrees with nothing): 0 for
    one label everywhere or labels drawn blind from any prior, whatever the class mix."""
    k = matrix.shape[0]
    total = float(matrix.sum())
    if not total:
        return 0.0
    observed = float(np.trace(matrix[:, :k])) / total
    expected = float(np.dot(matrix.sum(axis=1), matrix[:, :k].sum(axis=0))) / total**2
    return 0.0 if expected >= 1.0 else (observed - expected) / (1.0 - expected)


def one_label_score(matrix: np.ndarray, score_metric: str) -> float:
    """The best Task one label written for every case scores here: 1/classes present on balanced accuracy,
    the commonest class's share on accuracy (the constant and majority-class baselines)."""
    support = matrix.sum(axis=1)
    if not support.sum():
        return 0.0
    if score_metric == "accuracy":
        return float(support.max() / support.sum())
    return 1.0 / int(np.count_nonzero(support))


def scores_from_confusion(matrix: np.ndarray) -> dict[str, Any]:
    """Accuracy, balanced accuracy, per-class recall (None without support) and macro-F1 from the counts."""
    k = matrix.shape[0]
    support = matrix.sum(axis=1)
    correct = np.diag(matrix[:, :k])
    total = int(support.sum())
    present = support > 0
    recall = np.where(present, correct / np.maximum(support, 1), np.nan)
    predicted = matrix[:, :k].sum(axis=0)
    seen = present | (predicted > 0)
    precision = np.where(predicted > 0, correct / np.maximum(predicted, 1), 0.0)
    rec0 = np.nan_to_num(recall)
    f1 = np.where(precision + rec0 > 0, 2 * precision * rec0 / np.maximum(precision + rec0, 1e-300), 0.0)
    return {
        "accuracy": float(correct.sum() / total) if total else 0.0,
        "balanced_accuracy": float(np.mean(recall[present])) if present.any() else 0.0,
        "macro_f1": float(np.mean(f1[seen])) if seen.any() else 0.0,
        "recall": [None if np.isnan(r) else float(r) for r in recall],
        "support": [int(s) for s in support],
    }


class ClassificationEvaluation(TaskEvaluation):
    def __init__(self, task: TaskSpec, staged: StagedData, options: dict[str, str] | None = None) -> None:
        super().__init__(task, staged, options)
        self.classes, self.aliases = contract.task_labels(task.params)
        self.score_metric = str(task.params.get("score_metric", "balanced_accuracy"))
        if self.score_metric not in METRICS:
            raise ValueError(f"{task.id}: score_metric must be one of {', '.join(METRICS)}")
        self.predictions: dict[str, str] = {}

    def score_case(self, case_id: str, submitted: Path) -> CaseScore:
        _, parsed = contract.case_prediction(submitted.parent, case_id, self.classes, self.aliases)
        if not parsed.valid or parsed.label is None:
            raise ValueError("; ".join(parsed.reasons))
        self.predictions[case_id] = parsed.label
        return CaseScore(case_id, {"label": parsed.label})

    def case_picture(self, case_id: str, submitted: Path | None) -> CasePicture | None:
        from .picture import case_picture

        predicted = self.predictions.get(case_id) if submitted is not None else None
        return case_picture(self.staged.public / case_id, self.task.input_files[0], predicted,
                            read_label(self.staged.private / case_id))

    def aggregate(self, scores: list[CaseScore | None], case_ids: list[str]) -> MetricBlock:
        order = list(case_ids)
        truth = [read_label(self.staged.private / c) for c in order]
        predicted = [self.predictions.get(c) for c in order]
        matrix = confusion(truth, predicted, self.classes)
        result = scores_from_confusion(matrix)
        value = float(result[self.score_metric])
        n_valid = sum(p is not None for p in predicted)
        components: dict[str, float | None] = {
            "balanced_accuracy": result["balanced_accuracy"], "accuracy": result["accuracy"],
            "macro_f1": result["macro_f1"], "completeness": n_valid / len(order) if order else 0.0,
            # S5's and the S3 bound's whole-run facts: above one label everywhere, and beyond chance (round 39)
            "one_label_score": one_label_score(matrix, self.score_metric), "chance_kappa": chance_kappa(matrix),
        }
        for k, name in enumerate(self.classes):
            components[f"recall_{name}"] = result["recall"][k]
            components[f"support_{name}"] = float(result["support"][k])
        for i, row_name in enumerate(self.classes):  # the confusion matrix, its non-zero cells
            for j, col_name in enumerate([*self.classes, MISSING]):
                if matrix[i, j]:
                    components[f"cm_{row_name}__{col_name}"] = float(matrix[i, j])
        per_case = [{"case_id": c, "valid": p is not None, "label": t, "predicted": p, "correct": p == t}
                    for c, t, p in zip(order, truth, predicted, strict=True)]
        complete = n_valid == len(order) and len(scores) == len(order)
        return MetricBlock(self.task.metric, value if complete else 0.0, value, components=components,
                           per_case=per_case, counts=[k for k in components if k.startswith(("support_", "cm_"))])
