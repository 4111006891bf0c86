"""Dice from a joint label histogram: one pass over both arrays, any number of labels.

`np.bincount(ref * n + pred)` gives the full confusion matrix; Dice per label follows from its diagonal
and margins. A label absent from both prediction and reference scores 1.0 (nothing to find, nothing
found), absent from one side only 0.0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def confusion(pred: np.ndarray, ref: np.ndarray, n_labels: int) -> np.ndarray:
    """n_labels x n_labels counts; rows = reference label, columns = predicted label."""
    if pred.shape != ref.shape:
        raise ValueError(f"shape mismatch: prediction {pred.shape} vs reference {ref.shape}")
    dtype = np.uint16 if n_labels * n_labels <= np.iinfo(np.uint16).max else np.int64
    joint = ref.astype(dtype, copy=False).ravel() * dtype(n_labels) + pred.astype(dtype, copy=False).ravel()
    return np.bincount(joint, minlength=n_labels * n_labels)[: n_labels * n_labels].reshape(n_labels, n_labels)


def dice_from_confusion(cm: np.ndarray, labels: Sequence[int]) -> dict[int, float]:
    out: dict[int, float] = {}
    for label in labels:
        tp = float(cm[label, label])
        ref = float(cm[label, :].sum())
        pred = float(cm[:, label].sum())
        out[label] = 1.0 if ref + pred == 0 else 2.0 * tp / (ref + pred)
    return out


def dice(pred: np.ndarray, ref: np.ndarray, labels: Sequence[int] = (1,)) -> dict[int, float]:
    """Dice per foreground label. Inputs are integer label maps of equal shape."""
    n = int(max(max(labels), pred.max(initial=0), ref.max(initial=0))) + 1
    return dice_from_confusion(confusion(pred, ref, n), labels)


def binary_dice(pred: np.ndarray, ref: np.ndarray) -> float:
    p = pred.astype(bool, copy=False)
    g = ref.astype(bool, copy=False)
    if p.shape != g.shape:
        raise ValueError(f"shape mismatch: prediction {p.shape} vs reference {g.shape}")
    total = int(np.count_nonzero(p)) + int(np.count_nonzero(g))
    if total == 0:
        return 1.0
    return 2.0 * int(np.count_nonzero(p & g)) / total


class DiceMetric:
    name = "dice"

    def __call__(self, prediction: np.ndarray, reference: np.ndarray, **options) -> dict[str, float]:
        labels = options.get("labels", (1,))
        return {f"dice_{k}": v for k, v in dice(prediction, reference, labels).items()}
