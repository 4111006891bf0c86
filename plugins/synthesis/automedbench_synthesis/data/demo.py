"""The demo tasks, generated in code from the harness's secret per-staging seed (no download, seconds).

`synthesis/demo`: abdomen-like CT phantoms in HU (`data.phantom.abdomen`), x4 z-degraded on the same grid.
`synthesis/demo-mrct`: heads built on nilearn's MNI152 brain template (`data.mni`), warped by the secret seed,
with a known tissue -> HU map (the target CT) and the T1 template plus tissue -> T1-like values with a bias
field (the MR), plus the dilated head outline as the body mask.
The seed is drawn fresh by the harness for every staging and kept nowhere the sandbox can read, so the
generator (installed in the sandbox) cannot regenerate the references.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from automedbench.api import StagedData, TaskSpec

from . import mni, phantom
from .store import staging


def stage_demo(task: TaskSpec, dest: Path) -> StagedData:
    generator = "synthesis-demo-v1" if task.params["kind"] == "ctsr" else "synthesis-demo-mni152-v1"
    params = task.params
    shape = tuple(int(n) for n in params["shape"])
    affine = np.diag([*(float(s) for s in params["spacing_mm"]), 1.0])
    seed = int(params["seed"])
    with staging(task, dest) as job:
        for i in range(task.case_count):
            case_id = f"{params['case_prefix']}_{i + 1:04d}"
            if params["kind"] == "ctsr":
                job.add(case_id, phantom.abdomen(shape, seed * 1000 + i), affine, {"generator": "abdomen"})
            else:
                spacing = tuple(float(s) for s in params["spacing_mm"])
                ct, mr, mask = mni.head_case(shape, spacing, seed * 1000 + i)
                job.add(case_id, ct, affine, {"generator": "mni152-head"}, mr=mr, mask=mask)
        return job.commit(generator=generator)
