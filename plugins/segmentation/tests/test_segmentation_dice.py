"""Dice against hand-computed cases, a plain joint histogram, and MONAI's DiceMetric (independent)."""

from __future__ import annotations

import numpy as np
import pytest
from automedbench_segmentation.dice import (
    binary_counts,
    binary_dice,
    confusion,
    dice,
    dice_from_confusion,
    label_counts,
)


def test_hand_computed():
    pred = np.array([1, 1, 0, 0, 1], dtype=np.uint8)
    ref = np.array([1, 0, 0, 1, 1], dtype=np.uint8)
    assert binary_dice(pred, ref) == pytest.approx(2 * 2 / (3 + 3))
    assert dice(pred, ref)[1] == pytest.approx(2 / 3)
    assert binary_counts(pred, ref) == (3, 3, 2)


def test_empty_cases():
    zeros = np.zeros((4, 4), np.uint8)
    ones = np.ones((4, 4), np.uint8)
    assert binary_dice(zeros, zeros) == 1.0
    assert binary_dice(ones, zeros) == 0.0 and binary_dice(zeros, ones) == 0.0
    assert dice(zeros, zeros, labels=(1, 2)) == {1: 1.0, 2: 1.0}
    labels = np.array([[0, 1], [1, 1]], np.uint8)
    assert dice(labels, labels, labels=(1, 2)) == {1: 1.0, 2: 1.0}  # label 2 absent from both


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="shape mismatch"):
        dice(np.zeros((2, 2), np.uint8), np.zeros((2, 3), np.uint8))
    with pytest.raises(ValueError, match="shape mismatch"):
        binary_dice(np.zeros((2, 2), np.uint8), np.zeros((2, 3), np.uint8))


def test_multilabel_confusion_hand_computed():
    ref = np.array([0, 1, 1, 2, 2, 2])
    pred = np.array([0, 1, 2, 2, 2, 0])
    cm = confusion(pred, ref, 3)
    assert cm.tolist() == [[1, 0, 0], [0, 1, 1], [1, 0, 2]]
    d = dice(pred, ref, labels=(1, 2))
    assert d[1] == pytest.approx(2 * 1 / (2 + 1))
    assert d[2] == pytest.approx(2 * 2 / (3 + 3))


def _pair(rng, shape, n_labels, sparse):
    ref = rng.integers(0, n_labels, size=shape).astype(np.uint8)
    if sparse:  # mostly background, foreground in one slab: exercises chunk skipping
        ref[: shape[0] // 2] = 0
        ref[shape[0] * 3 // 4:] = 0
    pred = np.where(rng.random(shape) < 0.7, ref, rng.integers(0, n_labels, size=shape)).astype(np.uint8)
    return pred, ref


@pytest.mark.parametrize("chunk", [7, 1000, 1 << 17])
@pytest.mark.parametrize("sparse", [False, True])
def test_fast_counts_equal_joint_histogram(chunk, sparse):
    rng = np.random.default_rng(chunk)
    pred, ref = _pair(rng, (30, 21, 17), 5, sparse)
    cm = confusion(pred, ref, 5)
    n_pred, n_ref, n_both = label_counts(pred, ref, (1, 2, 3, 4), chunk=chunk)
    assert n_pred.tolist() == [int(cm[:, k].sum()) for k in (1, 2, 3, 4)]
    assert n_ref.tolist() == [int(cm[k, :].sum()) for k in (1, 2, 3, 4)]
    assert n_both.tolist() == [int(cm[k, k]) for k in (1, 2, 3, 4)]
    b = binary_counts(pred, ref, chunk=chunk)
    both = int(np.count_nonzero(np.logical_and(pred, ref)))
    assert b == (int(np.count_nonzero(pred)), int(np.count_nonzero(ref)), both)


def test_memory_layouts_and_dtypes_agree():
    """nibabel returns Fortran-ordered arrays; outputs may be int16 or integral floats."""
    rng = np.random.default_rng(1)
    pred, ref = _pair(rng, (12, 9, 7), 4, False)
    expected = dice_from_confusion(confusion(pred, ref, 4), (1, 2, 3))
    for p, g in [(np.asfortranarray(pred), np.asfortranarray(ref)), (np.asfortranarray(pred), ref),
                 (pred.astype(np.int16), ref), (pred.astype(np.float32), ref), (pred[:, ::-1], ref[:, ::-1])]:
        got = dice(p, g, (1, 2, 3))
        if p.base is not None and p.strides[1] < 0:  # reversed views: compare with reversed reference
            got_ref = dice_from_confusion(confusion(np.ascontiguousarray(p), np.ascontiguousarray(g), 4), (1, 2, 3))
            assert got == pytest.approx(got_ref)
        else:
            assert got == pytest.approx(expected)


def _onehot(torch, a, n):
    return torch.from_numpy(np.stack([(a == k) for k in range(n)])[None].astype(np.float32))


@pytest.mark.slow  # imports torch and MONAI
def test_matches_monai_dice_metric():
    torch = pytest.importorskip("torch")
    monai_metrics = pytest.importorskip("monai.metrics")
    rng = np.random.default_rng(0)
    ref = rng.integers(0, 4, size=(24, 20, 16))
    pred = np.where(rng.random(ref.shape) < 0.7, ref, rng.integers(0, 4, size=ref.shape))
    pred[pred == 3] = 0  # label 3 never predicted: Dice 0 for it
    ours = dice(pred, ref, labels=(1, 2, 3))
    metric = monai_metrics.DiceMetric(include_background=False, reduction="none", ignore_empty=False)
    theirs = metric(_onehot(torch, pred, 4), _onehot(torch, ref, 4))[0].numpy()
    assert np.allclose([ours[1], ours[2], ours[3]], theirs, atol=1e-6)


def test_matches_monai_on_empty_labels():
    """Both empty = 1 and one side empty = 0 are MONAI's conventions too (ignore_empty=False)."""
    torch = pytest.importorskip("torch")
    monai_metrics = pytest.importorskip("monai.metrics")
    ref = np.zeros((6, 6, 6), np.uint8)
    ref[1:3, 1:3, 1:3] = 1
    pred = ref.copy()
    pred[4, 4, 4] = 3  # label 3 predicted, absent from the reference; label 2 absent from both
    ours = dice(pred, ref, labels=(1, 2, 3))
    metric = monai_metrics.DiceMetric(include_background=False, reduction="none", ignore_empty=False)
    theirs = metric(_onehot(torch, pred, 4), _onehot(torch, ref, 4))[0].numpy()
    assert ours == {1: 1.0, 2: 1.0, 3: 0.0}
    assert np.allclose([ours[1], ours[2], ours[3]], theirs)


def test_background_label_and_negative_values_are_counted():
    """Chunk skipping relies on the chunk maximum: it must stay exact for label 0 and for negative values."""
    pred = np.array([0, 0, -1, 2, 0, 0], dtype=np.int16)
    ref = np.array([0, 1, -1, 2, 0, 0], dtype=np.int16)
    n_pred, n_ref, n_both = label_counts(pred, ref, (0, 1, 2), chunk=2)
    assert n_pred.tolist() == [4, 0, 1] and n_ref.tolist() == [3, 1, 1] and n_both.tolist() == [3, 0, 1]
    assert dice(pred, ref, (1, 2)) == {1: 0.0, 2: 1.0}


@pytest.mark.parametrize("chunk", [2, 3, 1 << 17])
def test_binary_masks_are_read_at_above_one_half_as_the_original(chunk):
    """The original binarises both masks at > 0.5: in a float or signed reference a 0.3, a -1 or a 0.5
    is background, a 0.6 foreground (before: every nonzero voxel was foreground)."""
    ref = np.array([0.0, 0.3, 0.5, 0.6, 1.0, -1.0, 2.0, 0.0], dtype=np.float32)
    pred = np.array([0, 1, 1, 1, 1, 1, 0, 0], dtype=np.uint8)
    # foreground: reference {3, 4, 6}, prediction {1, 2, 3, 4, 5}, both {3, 4}: Dice 2*2 / (5 + 3)
    assert binary_counts(pred, ref, chunk=chunk) == (5, 3, 2)
    assert binary_dice(pred, ref) == pytest.approx(4 / 8)
    signed = np.array([0, -1, -1, 1, 1, -3, 1, 0], dtype=np.int16)  # negatives are background
    assert binary_counts(pred, signed, chunk=chunk) == (5, 3, 2)
    assert binary_counts(signed, pred, chunk=chunk) == (3, 5, 2)
    rng = np.random.default_rng(chunk)
    a, b = rng.normal(0.5, 0.6, size=(9, 8, 7)), rng.normal(0.5, 0.6, size=(9, 8, 7)).astype(np.float32)
    fa, fb = a > 0.5, b > 0.5
    assert binary_counts(a, b, chunk=chunk) == (int(fa.sum()), int(fb.sum()), int((fa & fb).sum()))


def test_float_label_maps_are_rounded_as_the_original():
    """The original reads label maps as `np.rint(...)`: a float reference holding 1.4 is label 1, 1.6 label 2."""
    ref = np.array([0.0, 1.4, 1.6, 2.0, 0.4, 2.6], dtype=np.float32)
    pred = np.array([0, 1, 2, 2, 0, 3], dtype=np.uint8)
    # rounded reference [0, 1, 2, 2, 0, 3]: every label matches
    assert dice(pred, ref, (1, 2, 3)) == {1: 1.0, 2: 1.0, 3: 1.0}
    assert dice(pred, np.array([0, 1, 1, 2, 1, 3], dtype=np.float64), (1, 2, 3)) == {
        1: pytest.approx(2 * 1 / (1 + 3)), 2: pytest.approx(2 * 1 / (2 + 1)), 3: 1.0}
