"""Dice for label maps, fused into one streaming pass over both arrays.

Both volumes are walked in cache-sized chunks: each chunk is read from memory once, and the per-label
counts (|P=k|, |G=k|, |P=k ∧ G=k|) are taken while it sits in cache. The two chunk maxima (one fast
reduction each) skip every label above them, so background chunks (most of a CT) and tumour-free
chunks cost almost nothing. A label absent from both
prediction and reference scores 1.0 (nothing to find, nothing found), absent from one side only 0.0.

`confusion` (a full joint histogram via `np.bincount`) is kept as the simple, obviously-correct
reference the tests compare the fast path against.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CHUNK = 1 << 17  # voxels per chunk: 128 KiB of uint8; both inputs and three scratch masks stay in L2


def _flat_pair(pred: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """1-D views of both arrays in the same element order, copying only if their layouts differ."""
    if pred.shape != ref.shape:
        raise ValueError(f"shape mismatch: prediction {pred.shape} vs reference {ref.shape}")
    if pred.flags.c_contiguous and ref.flags.c_contiguous:
        return pred.reshape(-1), ref.reshape(-1)
    if pred.flags.f_contiguous and ref.flags.f_contiguous:  # nibabel hands out Fortran-ordered arrays
        return pred.T.reshape(-1), ref.T.reshape(-1)
    return np.ascontiguousarray(pred).reshape(-1), np.ascontiguousarray(ref).reshape(-1)


def label_counts(pred: np.ndarray, ref: np.ndarray, labels: Sequence[int],
                 chunk: int = CHUNK) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per label: voxels predicted, voxels in the reference, voxels in both (int64 arrays)."""
    p, g = _flat_pair(pred, ref)
    n_labels = len(labels)
    n_pred, n_ref, n_both = (np.zeros(n_labels, np.int64) for _ in range(3))
    in_p, in_g, both = (np.empty(min(chunk, p.size), dtype=bool) for _ in range(3))
    count, equal, land, peak = np.count_nonzero, np.equal, np.logical_and, np.maximum.reduce
    can_skip = min(labels, default=1) > 0  # a chunk whose maximum is below a label cannot contain it
    for start in range(0, p.size, chunk):
        ps, gs = p[start:start + chunk], g[start:start + chunk]
        top = max(peak(ps), peak(gs)) if can_skip else np.inf
        if top <= 0:
            continue
        m = ps.size
        bp, bg, bb = in_p[:m], in_g[:m], both[:m]
        for i, k in enumerate(labels):
            if k > top:
                continue
            equal(ps, k, out=bp)
            equal(gs, k, out=bg)
            cp, cg = count(bp), count(bg)
            n_pred[i] += cp
            n_ref[i] += cg
            if cp and cg:
                land(bp, bg, out=bb)
                n_both[i] += count(bb)
    return n_pred, n_ref, n_both


FOREGROUND_ABOVE = 0.5  # the original binarises both masks at > 0.5


def _nonzero_is_foreground(array: np.ndarray) -> bool:
    """Bool and unsigned volumes: nonzero is exactly > 0.5, so the fast count needs no comparison."""
    return array.dtype.kind in "bu"


def binary_counts(pred: np.ndarray, ref: np.ndarray, chunk: int = CHUNK) -> tuple[int, int, int]:
    """Foreground voxels (> 0.5, the original's binarisation: a negative, a 0.3 or a NaN is background) in
    the prediction, the reference, and both."""
    p, g = _flat_pair(pred, ref)
    size = min(chunk, p.size)
    both = np.empty(size, dtype=bool)
    # a float or signed volume is compared with 0.5 into a scratch mask, chunk by chunk
    p_mask = None if _nonzero_is_foreground(p) else np.empty(size, dtype=bool)
    g_mask = None if _nonzero_is_foreground(g) else np.empty(size, dtype=bool)
    n_pred = n_ref = n_both = 0
    count = np.count_nonzero
    for start in range(0, p.size, chunk):
        ps, gs = p[start:start + chunk], g[start:start + chunk]
        if p_mask is not None:
            ps = np.greater(ps, FOREGROUND_ABOVE, out=p_mask[:ps.size])
        if g_mask is not None:
            gs = np.greater(gs, FOREGROUND_ABOVE, out=g_mask[:gs.size])
        cp, cg = count(ps), count(gs)
        n_pred += cp
        n_ref += cg
        if cp and cg:
            bb = both[:ps.size]
            np.logical_and(ps, gs, out=bb)
            n_both += count(bb)
    return int(n_pred), int(n_ref), int(n_both)


def dice_from_counts(n_pred: int, n_ref: int, n_both: int) -> float:
    total = n_pred + n_ref
    return 1.0 if total == 0 else 2.0 * n_both / total


def uniform_dice(size: int, n_ref: int) -> float:
    """Dice of a mask that marks every one of `size` voxels against a reference of `n_ref`: what the constant
    baseline scores on a case, known from the counts already taken (no second pass, no extra evaluation)."""
    return dice_from_counts(size, n_ref, n_ref)


def has_nan(array: np.ndarray) -> bool:
    """A float volume with a NaN anywhere (a broken reference: its Dice is 0, not a skipped label)."""
    return array.dtype.kind == "f" and bool(np.isnan(array).any())


def dice(pred: np.ndarray, ref: np.ndarray, labels: Sequence[int] = (1,)) -> dict[int, float]:
    """Dice per foreground label. Inputs are integer label maps of equal shape; a reference holding
    a NaN scores 0 for every label (NaN equals no label, so the label would otherwise read as absent: 1.0)."""
    return dice_and_present(pred, ref, labels)[0]


def integer_labels(array: np.ndarray) -> np.ndarray:
    """A float label map rounded to the nearest integer, as the original reads label maps (`np.rint`);
    integer maps unchanged, without a copy. NaN stays NaN (it equals no label)."""
    return np.rint(array) if array.dtype.kind == "f" else array


def dice_and_present(pred: np.ndarray, ref: np.ndarray,
                     labels: Sequence[int] = (1,)) -> tuple[dict[int, float], list[int], dict[int, int]]:
    """`dice`, and from the same pass the labels the reference contains and its voxels of each label. A float
    reference is read as
    rounded labels (the original's rule); a prediction is not rounded here: the contract admits integral values
    only, except where the task reads a float map rounded (FeTA), and there the caller rounds it first."""
    ref = integer_labels(ref)
    n_pred, n_ref, n_both = label_counts(pred, ref, labels)
    present = [int(k) for k, n in zip(labels, n_ref, strict=True) if n > 0]
    voxels = {int(k): int(n) for k, n in zip(labels, n_ref, strict=True)}
    if has_nan(ref):
        return {int(k): 0.0 for k in labels}, present, voxels
    counts = zip(labels, n_pred, n_ref, n_both, strict=True)
    return {int(k): dice_from_counts(int(a), int(b), int(c)) for k, a, b, c in counts}, present, voxels


def binary_dice(pred: np.ndarray, ref: np.ndarray) -> float:
    """Dice of the > 0.5 regions (0 when the reference holds a NaN)."""
    return 0.0 if has_nan(ref) else dice_from_counts(*binary_counts(pred, ref))


def confusion(pred: np.ndarray, ref: np.ndarray, n_labels: int) -> np.ndarray:
    """n_labels x n_labels counts; rows = reference label, columns = predicted label (reference method)."""
    if pred.shape != ref.shape:
        raise ValueError(f"shape mismatch: prediction {pred.shape} vs reference {ref.shape}")
    joint = ref.astype(np.int64).ravel() * n_labels + pred.astype(np.int64).ravel()
    return np.bincount(joint, minlength=n_labels * n_labels)[: n_labels * n_labels].reshape(n_labels, n_labels)


def dice_from_confusion(cm: np.ndarray, labels: Sequence[int]) -> dict[int, float]:
    return {int(k): dice_from_counts(int(cm[:, k].sum()), int(cm[k, :].sum()), int(cm[k, k])) for k in labels}
