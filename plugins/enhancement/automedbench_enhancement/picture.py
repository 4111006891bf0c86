"""Each case's picture for the run page: before (the degraded input), after (the agent's output) and the
reference, on one grey window so the three compare pixel for pixel: a CT task's soft-tissue window in HU (the
metric's clip range, [-1024, 3071], leaves soft tissue one grey), else the reference's 1st-99th percentile inside
the clip range. The arrays are the ones the scoring just read (the output with the contract's parser)."""

from __future__ import annotations

import numpy as np
from automedbench.api import CasePicture, Panel, TaskSpec

from .metric import window


def case_picture(task: TaskSpec, low: np.ndarray, after: np.ndarray | None, truth: np.ndarray,
                 note: str = "no valid output") -> CasePicture:
    shown, legend = grey_window(task, truth)
    panels = [Panel(f"before {low.shape[0]}x{low.shape[1]}", image=low, window=shown, role="input"),
              Panel("after", image=after, window=shown, role="output") if after is not None
              else Panel("after", note=note, role="output"),
              Panel("reference", image=truth, window=shown, role="reference")]
    return CasePicture(panels, f"{legend} for all three")


def grey_window(task: TaskSpec, truth: np.ndarray) -> tuple[tuple[float, float], str]:
    """The window the three panels share, with the legend that says which: on CT (kind ldct, in HU) the task's
    soft-tissue window (W 400 L 40), on normalised images the reference's 1st-99th percentile."""
    lo, hi = window(task)
    if task.params.get("kind") == "ldct":
        low, high = (float(v) for v in task.params.get("soft_window", SOFT_TISSUE_HU))
        return (low, high), (f"soft-tissue grey window W {high - low:.4g} L {(low + high) / 2:.4g} HU "
                             f"([{low:.4g}, {high:.4g}] HU)")
    shown_lo, shown_hi = (float(v) for v in np.percentile(np.clip(truth[::2, ::2], lo, hi), [1, 99]))
    if shown_hi > shown_lo:
        return (shown_lo, shown_hi), (f"grey window [{shown_lo:.4g}, {shown_hi:.4g}] (the reference's 1st-99th "
                                      "percentile)")
    return (lo, hi), f"grey window [{lo:.4g}, {hi:.4g}] (the metric's clip range)"


SOFT_TISSUE_HU = (-160.0, 240.0)  # W 400 L 40, where a CT task names no soft_window
