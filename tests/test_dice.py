"""Dice against hand-computed cases and MONAI's DiceMetric (an independent implementation)."""

from __future__ import annotations

import numpy as np
import pytest
from automedbench_segmentation.metrics import binary_dice, confusion, dice


def test_hand_computed():
    pred = np.array([1, 1, 0, 0, 1], dtype=np.uint8)
    ref = np.array([1, 0, 0, 1, 1], dtype=np.uint8)
    assert binary_dice(pred, ref) == pytest.approx(2 * 2 / (3 + 3))
    assert dice(pred, ref)[1] == pytest.approx(2 / 3)


def test_empty_cases():
    zeros = np.zeros((4, 4), np.uint8)
    ones = np.ones((4, 4), np.uint8)
    assert binary_dice(zeros, zeros) == 1.0
    assert binary_dice(ones, zeros) == 0.0 and binary_dice(zeros, ones) == 0.0
    assert dice(zeros, zeros, labels=(1, 2)) == {1: 1.0, 2: 1.0}


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shape mismatch"):
        dice(np.zeros((2, 2), np.uint8), np.zeros((2, 3), np.uint8))


def test_multilabel_confusion_hand_computed():
    ref = np.array([0, 1, 1, 2, 2, 2])
    pred = np.array([0, 1, 2, 2, 2, 0])
    cm = confusion(pred, ref, 3)
    assert cm.tolist() == [[1, 0, 0], [0, 1, 1], [1, 0, 2]]
    d = dice(pred, ref, labels=(1, 2))
    assert d[1] == pytest.approx(2 * 1 / (2 + 1))
    assert d[2] == pytest.approx(2 * 2 / (3 + 3))


def test_matches_monai_dice_metric():
    torch = pytest.importorskip("torch")
    monai_metrics = pytest.importorskip("monai.metrics")
    rng = np.random.default_rng(0)
    ref = rng.integers(0, 4, size=(24, 20, 16))
    pred = np.where(rng.random(ref.shape) < 0.7, ref, rng.integers(0, 4, size=ref.shape))
    pred[pred == 3] = 0  # label 3 never predicted: Dice 0 for it
    ours = dice(pred, ref, labels=(1, 2, 3))

    def onehot(a):
        return torch.from_numpy(np.stack([(a == k) for k in range(4)])[None].astype(np.float32))

    metric = monai_metrics.DiceMetric(include_background=False, reduction="none", ignore_empty=False)
    theirs = metric(onehot(pred), onehot(ref))[0].numpy()
    assert np.allclose([ours[1], ours[2], ours[3]], theirs, atol=1e-6)
