"""The demo tasks, generated in code from the harness's secret per-staging seed (no download, seconds).

`synthesis/demo`: abdomen-like CT phantoms in HU (`data.phantom.abdomen`), x4 z-degraded on the same grid.
`synthesis/demo-mrct`: head phantoms with a known tissue -> HU map (the target CT) and tissue -> T1-like
intensities with a bias field (the MR), plus the dilated head outline as the body mask.
The seed is drawn fresh by the harness for every staging and kept nowhere the sandbox can read, so the
generator (installed in the sandbox) cannot regenerate the references.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from automedbench.api import StagedData, TaskSpec

from . import phantom
from .store import existing, staging


def stage_demo(task: TaskSpec, dest: Path) -> StagedData:
    key = {"generator": "synthesis-demo-v1", "params": task.params, "n": task.case_count}
    done = existing(dest, key)
    if done is not None:
        return done
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
                labels = phantom.head_labels(shape, seed * 1000 + i)
                ct, mr, mask = phantom.head_ct_mr(labels, seed * 1000 + i)
                job.add(case_id, ct, affine, {"generator": "head"}, mr=mr, mask=mask)
        return job.commit(key=key)
