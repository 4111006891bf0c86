"""Multi-label S3 through the rules judge: full credit needs the allowed labels and a per-structure count."""

from __future__ import annotations

import pytest
from automedbench.testing import grade_by_rules, load_task

LOAD = "import nibabel as nib, numpy as np\na = np.asanyarray(nib.load('outputs/c1/{out}').dataobj)\n"


def tool(turn, code, cases):
    return {"type": "tool", "name": "execute_code", "turn": turn, "code": code, "stdout": "", "exit_code": 0,
            "cases_with_outputs": cases}


def s3(task_id: str, check: str) -> float:
    _, task = load_task(task_id)
    code = LOAD.format(out=task.output_files[0]) + check
    events = [tool(1, "python3 segment.py /data/public outputs c1", 1), tool(2, code, 1),
              tool(3, "python3 segment.py /data/public outputs", task.case_count)]
    return grade_by_rules(task_id, "lite", events).items["s3_validate"].value


SHAPE_VALUES = "assert a.shape == (96, 96, 40)\nassert set(np.unique(a).tolist()) <= {0, 1, 2, 3}\n"


@pytest.mark.parametrize(("task_id", "check", "expected"), [
    ("segmentation/demo-multilabel", SHAPE_VALUES, 0.5),                                       # no coverage
    ("segmentation/demo-multilabel", SHAPE_VALUES + "print(int(a.sum()), 'voxels')", 0.5),   # total, not per label
    ("segmentation/demo-multilabel", SHAPE_VALUES + "print({k: int(np.count_nonzero(a == k)) for k in (1, 2, 3)})",
     1.0),
    ("segmentation/panther-t1", SHAPE_VALUES + "print(np.bincount(a.ravel()))", 1.0),
    ("segmentation/demo-airway", "assert a.shape == (80, 72, 96)\nassert set(np.unique(a)) <= {0, 1}\n"
     "print(int(np.count_nonzero(a)), 'airway voxels')", 1.0),                                 # one label: its count
])
def test_multilabel_pilot_check_needs_labels_and_per_structure_coverage(task_id, check, expected):
    assert s3(task_id, check) == expected
