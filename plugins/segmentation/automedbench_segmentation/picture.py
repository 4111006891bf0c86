"""Each case's picture for the run page: one CT/MR slice under the output's and the reference's masks.

The slice is the one where the reference shows most foreground (the lesion's, for organ + lesion tasks), so
a missed tumour shows as an empty output over a coloured reference. Thin trees (the airway task, `picture:
projection` in its params) are shown as the masks' maximum projection over a coronal slice instead. Every
volume is read through the contract check's cache (`io.CaseCache`: header-checked, size-limited, no agent code).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from automedbench.api import CasePicture, Panel, TaskSpec, focus_index, max_projection, volume_slice

from .io import CaseCache

AXIAL, CORONAL = 2, 1


def label_map(task: TaskSpec, folder: Path, cache: CaseCache) -> np.ndarray:
    """The case's masks in one label volume: organ 1 and lesion 2 (lesion drawn over organ), or the label map."""
    if task.params.get("kind") == "multilabel":
        return np.asarray(cache.load(folder / task.output_files[0])[1])
    labels = None
    for value, name in enumerate(task.output_files, start=1):
        mask = np.asarray(cache.load(folder / name)[1]) > 0
        labels = np.zeros(mask.shape, np.uint8) if labels is None else labels
        labels[mask] = value
    assert labels is not None
    return labels


def case_picture(task: TaskSpec, inputs: Path, outputs: Path | None, reference: Path,
                 cache: CaseCache) -> CasePicture:
    image = np.asarray(cache.load(inputs / task.input_files[0])[1])
    if image.ndim == 4:  # a multi-channel input (prostate T2/ADC): its first channel
        image = image[..., 0]
    truth = label_map(task, reference, cache)
    predicted = label_map(task, outputs, cache) if outputs is not None else None
    if task.params.get("picture") == "projection":
        index = image.shape[CORONAL] // 2
        view = volume_slice(image, index, CORONAL)

        def overlay(labels: np.ndarray) -> np.ndarray:
            return max_projection(labels, CORONAL)
        where = "coronal slice, masks as maximum projections"
    else:
        # the lesion (highest label) first: the structure most often missed is the one worth seeing
        top = truth == truth.max() if truth.max() > 0 else None
        index = focus_index(image.shape, top, truth, axis=AXIAL)
        view = volume_slice(image, index, AXIAL)

        def overlay(labels: np.ndarray) -> np.ndarray:
            return volume_slice(labels, index, AXIAL)
        where = f"axial slice {index} of {image.shape[AXIAL]}"
    panels = [Panel("input", image=view, role="input"),
              Panel("output", image=view, mask=overlay(predicted), role="output") if predicted is not None
              else Panel("output", note="no valid output", role="output"),
              Panel("reference", image=view, mask=overlay(truth), role="reference")]
    return CasePicture(panels, where)
