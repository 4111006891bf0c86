"""Each case's picture for the run page: before (the degraded input), after (the agent's output) and the
reference, on one grey window (the reference's 1st-99th percentile inside the metric's clip range), so the three
compare pixel for pixel. The arrays are the ones the scoring just read (the output with the contract's parser)."""

from __future__ import annotations

import numpy as np
from automedbench.api import CasePicture, Panel, TaskSpec

from .metric import window


def case_picture(task: TaskSpec, low: np.ndarray, after: np.ndarray | None, truth: np.ndarray,
                 note: str = "no valid output") -> CasePicture:
    lo, hi = window(task)
    shown_lo, shown_hi = (float(v) for v in np.percentile(np.clip(truth[::2, ::2], lo, hi), [1, 99]))
    shown = (shown_lo, shown_hi) if shown_hi > shown_lo else (lo, hi)
    panels = [Panel(f"before {low.shape[0]}x{low.shape[1]}", image=low, window=shown, role="input"),
              Panel("after", image=after, window=shown, role="output") if after is not None
              else Panel("after", note=note, role="output"),
              Panel("reference", image=truth, window=shown, role="reference")]
    return CasePicture(panels, f"grey window [{shown[0]:.4g}, {shown[1]:.4g}] for all three")
