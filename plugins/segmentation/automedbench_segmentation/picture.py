"""Each case's picture for the run page: one CT/MR slice under the output's and the reference's masks.

The slice is the one where the reference shows most foreground (the lesion's, for organ + lesion tasks), so
a missed tumour shows as an empty output over a coloured reference. Thin trees (the airway task, `picture:
projection` in its params) are shown as the masks' maximum projection over a coronal slice instead. Every
mask is read through the contract check's cache (`io.CaseCache`: header-checked, size-limited, what the scoring
just loaded); of the image only the one slice shown is read (a CT of KiTS size is never held whole for it).
"""

from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
from automedbench.api import CasePicture, Panel, TaskSpec, focus_index, max_projection, volume_slice

from .dice import integer_labels
from .io import CaseCache, precheck
from .labels import rounds_labels

AXIAL, CORONAL = 2, 1


def label_map(task: TaskSpec, folder: Path, cache: CaseCache) -> np.ndarray:
    """The case's masks in one label volume: organ 1 and lesion 2 (lesion drawn over organ), or the label map."""
    if task.params.get("kind") == "multilabel":
        labels = np.asarray(cache.load(folder / task.output_files[0])[1])
        return integer_labels(labels) if rounds_labels(task) else labels
    labels = None
    for value, name in enumerate(task.output_files, start=1):
        mask = np.asarray(cache.load(folder / name)[1]) > 0
        labels = np.zeros(mask.shape, np.uint8) if labels is None else labels
        labels[mask] = value
    assert labels is not None
    return labels


def image_slice(path: Path, index: int, axis: int) -> np.ndarray:
    """One slice of the input image, turned for display, read through nibabel's proxy (only that slice is kept;
    a multi-channel input, prostate's T2 + ADC, shows its first channel)."""
    precheck(path)
    proxy = nib.load(str(path)).dataobj
    where: list = [slice(None)] * len(proxy.shape)
    where[axis] = index
    if len(proxy.shape) == 4:
        where[3] = 0
    return np.rot90(np.asarray(proxy[tuple(where)]))


def case_picture(task: TaskSpec, inputs: Path, outputs: Path | None, reference: Path,
                 cache: CaseCache) -> CasePicture:
    truth = label_map(task, reference, cache)
    predicted = label_map(task, outputs, cache) if outputs is not None else None
    shape = truth.shape
    source = inputs / task.input_files[0]
    if task.params.get("picture") == "projection":
        index = shape[CORONAL] // 2
        view = image_slice(source, index, CORONAL)

        def overlay(labels: np.ndarray) -> np.ndarray:
            return max_projection(labels, CORONAL)
        where = "coronal slice, masks as maximum projections"
    else:
        # the lesion (highest label) first: the structure most often missed is the one worth seeing
        top = truth == truth.max() if truth.max() > 0 else None
        index = focus_index(shape, top, truth, axis=AXIAL)
        view = image_slice(source, index, AXIAL)

        def overlay(labels: np.ndarray) -> np.ndarray:
            return volume_slice(labels, index, AXIAL)
        where = f"axial slice {index} of {shape[AXIAL]}"
    panels = [Panel("input", image=view, role="input"),
              Panel("output", image=view, mask=overlay(predicted), role="output") if predicted is not None
              else Panel("output", note="no valid output", role="output"),
              Panel("reference", image=view, mask=overlay(truth), role="reference")]
    return CasePicture(panels, where, labels=label_names(task))


def label_names(task: TaskSpec) -> dict[int, str]:
    """What each label drawn means: the label map's names (`params.labels`), else the output files' (organ 1,
    lesion 2): the legend says "organ red, lesion green", not label numbers."""
    if task.params.get("kind") == "multilabel":
        named = task.params.get("labels") or {}
        return {int(k): str(v) for k, v in named.items()} if isinstance(named, dict) else {}
    return {value: name.split(".", 1)[0] for value, name in enumerate(task.output_files, start=1)}
