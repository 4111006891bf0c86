"""Optional boundary metrics (HD95, normalised surface Dice) computed by MONAI, reported beside Dice.

They are extra components only, never part of the Task score. MONAI needs torch, which the evaluator
may lack: then every value is None and the reason is recorded once. Both masks are cropped to the
bounding box of their union (plus one voxel) first; distances between the two surfaces do not change,
and a KiTS-sized volume costs a kidney-sized distance transform instead of a full-volume one.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from functools import lru_cache

import numpy as np


def _import_monai() -> None:
    """Import MONAI's metrics without Hugging Face transformers when nothing has imported it yet.

    `import monai` loads every MONAI subpackage, and its TransChex network imports transformers' BERT (with
    torch's compiler stack): 2.9 of the 7.1 CPU-s MONAI's import takes, paid by every evaluator process that
    scores a task with surface metrics, for a network no metric uses. Hidden during that import, MONAI keeps
    its placeholder for the missing optional package (used only by TransChex); the placeholder entry is removed
    afterwards, so a later `import transformers` (report_gen's scorers in the same warm evaluator) works as
    usual. Only `sys.modules` is touched, in the evaluator process: no file, no environment."""
    if "monai" in sys.modules or "transformers" in sys.modules:
        import monai.metrics
        return
    sys.modules["transformers"] = None  # type: ignore[assignment]  # an import of it fails at once
    try:
        import monai.metrics  # noqa: F401
    finally:
        if "transformers" in sys.modules and sys.modules["transformers"] is None:
            del sys.modules["transformers"]


@lru_cache(maxsize=1)
def unavailable() -> str:
    """Why MONAI's surface metrics cannot run here ('' when they can)."""
    try:
        _import_monai()
        import torch  # noqa: F401
    except Exception as exc:
        return f"MONAI not importable ({type(exc).__name__}: {exc})"
    return ""


def _crop(pred: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    union = pred | ref
    box = []
    for axis in range(union.ndim):
        other = tuple(a for a in range(union.ndim) if a != axis)
        hit = np.flatnonzero(union.any(axis=other))
        box.append(slice(max(0, hit[0] - 1), hit[-1] + 2))
    return pred[tuple(box)], ref[tuple(box)]


def surface_metrics(pred: np.ndarray, ref: np.ndarray, spacing: Sequence[float],
                    tolerance_mm: float = 2.0) -> dict[str, float | None]:
    """HD95 (mm) and surface Dice at `tolerance_mm` of two binary masks; None where undefined or unavailable."""
    pred, ref = pred.astype(bool, copy=False), ref.astype(bool, copy=False)
    if unavailable():
        return {"hd95_mm": None, "surface_dice": None}
    has_pred, has_ref = bool(pred.any()), bool(ref.any())
    if not (has_pred and has_ref):
        # MONAI's conventions: no surface on either side -> both undefined; on one side only -> no surface point
        # within tolerance (NSD 0, counted in the mean), the distance undefined (NaN: left out)
        return {"hd95_mm": None, "surface_dice": 0.0 if has_pred or has_ref else None}
    import torch
    from monai.metrics import compute_hausdorff_distance, compute_surface_dice

    p, g = _crop(pred, ref)
    # MONAI wants one-hot (batch, channel, *spatial); channel 0 is a dummy background it skips.
    tp = torch.from_numpy(np.stack([~p, p])[None].astype(np.float32))
    tg = torch.from_numpy(np.stack([~g, g])[None].astype(np.float32))
    spacing = [float(s) for s in spacing]
    with warnings.catch_warnings():  # MONAI warns about its own internal use of a deprecated argument
        warnings.simplefilter("ignore", FutureWarning)
        hd = float(compute_hausdorff_distance(tp, tg, percentile=95, spacing=spacing)[0, 0])
        nsd = float(compute_surface_dice(tp, tg, class_thresholds=[tolerance_mm], spacing=spacing)[0, 0])
    return {"hd95_mm": hd if np.isfinite(hd) else None, "surface_dice": nsd if np.isfinite(nsd) else None}
