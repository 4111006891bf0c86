"""Each case's picture for the run page: the input (the degraded CT, or the MR), the agent's synthetic CT and the
target CT, on one slice: coronal for z super-resolution (where the lost slices show), axial for MR to CT, with the
voxels' aspect kept. Both CTs share the target's grey window. The CTs are the volumes the scoring just read (the
output with the contract's parser); of the (harness-staged) input only the slice shown is read."""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
from automedbench.api import CasePicture, Panel, TaskSpec, volume_slice

AXIAL, CORONAL = 2, 1


def input_slice(path: Path, index: int, axis: int) -> np.ndarray:
    """One slice of the staged input, turned for display, through nibabel's proxy (the volume is never held)."""
    where: list = [slice(None)] * 3
    where[axis] = index
    return np.rot90(np.asarray(nib.load(str(path)).dataobj[tuple(where)], dtype=np.float32))


def case_picture(task: TaskSpec, source: Path, predicted: np.ndarray | None, target: np.ndarray,
                 mask: np.ndarray | None, affine: np.ndarray) -> CasePicture:
    axis = CORONAL if task.params.get("kind") == "ctsr" else AXIAL
    index = target.shape[axis] // 2
    truth = volume_slice(target, index, axis)
    inside = truth if mask is None else truth[volume_slice(mask, index, axis) > 0]
    low, high = (float(v) for v in np.percentile(inside if inside.size else truth, [1, 99]))
    window = (low, high) if high > low else None
    zooms = np.linalg.norm(np.asarray(affine, dtype=np.float64)[:3, :3], axis=0)  # voxel sizes along x, y, z
    # a slice's rows run along z (coronal) or y (axial), its columns along x
    aspect = float(zooms[2 if axis == CORONAL else 1] / zooms[0]) if zooms[0] > 0 else 1.0
    same = window if task.params.get("kind") == "ctsr" else None  # an MR input keeps its own grey window
    panels = [Panel(f"input {task.input_files[0]}", image=input_slice(source, index, axis), window=same,
                    role="input", aspect=aspect),
              Panel("output sCT", image=volume_slice(predicted, index, axis), window=window, role="output",
                    aspect=aspect) if predicted is not None else Panel("output sCT", note="no valid output",
                                                                       role="output"),
              Panel("target CT", image=truth, window=window, role="reference", aspect=aspect)]
    plane = "coronal" if axis == CORONAL else "axial"
    legend = window_legend(window, same is not None)
    return CasePicture(panels, f"{plane} slice {index} of {target.shape[axis]}; {legend}")


def window_legend(window: tuple[float, float] | None, input_shared: bool) -> str:
    """Which grey window the panels show, for the legend: the target CT's 1st-99th percentile (inside its mask) in
    HU, shared by the input when it is a CT too; an MR input keeps its own."""
    if window is None:
        return "each panel on its own grey window (the target slice is flat)"
    shared = "all three" if input_shared else "both CTs (the MR input on its own)"
    return (f"grey window [{window[0]:.4g}, {window[1]:.4g}] HU for {shared}: the target CT's 1st-99th "
            "percentile")
