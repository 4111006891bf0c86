"""Reference baselines for `automedbench evaluate --baseline`: the references, all-zero and all-one masks."""

from __future__ import annotations

import shutil
from pathlib import Path

from automedbench.api import StagedData, TaskSpec, UserError

BASELINES = {"perfect": "the references themselves", "empty": "all-zero masks",
             "constant": "every voxel foreground"}


def write_baseline(task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
    """One folder per case under `dest` with the baseline's masks, on each input's grid and affine."""
    import nibabel as nib
    import numpy as np

    from . import io

    if name not in BASELINES:
        raise UserError(f"unknown baseline {name!r}")
    for case in staged.case_ids:
        target = dest / case
        target.mkdir(parents=True, exist_ok=True)
        if name == "perfect":
            for out in task.output_files:
                shutil.copyfile(staged.private / case / out, target / out)
            continue
        image = nib.load(str(staged.public / case / task.input_files[0]))
        fill = 0 if name == "empty" else 1
        mask = np.full(image.shape, fill, dtype=np.uint8)
        for out in task.output_files:
            io.save(target / out, mask, image.affine)
