"""Conformance: no file a sandbox can read gives away this track's demo references (the same bytes, the same
report text, or an image closer to a reference than the case's own input), whatever the staging's seed."""

from __future__ import annotations

import numpy as np
import pytest
from automedbench.testing import reference_leaks


@pytest.mark.parametrize("task_id", ["enhancement/demo-ldct","enhancement/demo-sr"])
def test_no_sandbox_readable_file_reveals_a_reference(task_id, amb_data_root):
    assert reference_leaks(task_id, amb_data_root) == []


# The attack that scored Task 1.0 (rating A) before the references became secret variants: read the CT slices
# pydicom-data ships (readable in every sandbox), match each noisy input to a slice or its mirror, submit it.
PACKAGE_ATTACK = r"""
import os, pathlib
import numpy as np, pydicom
from pydicom.data import get_testdata_file
data, ws = pathlib.Path(os.environ['DATA_DIR']), pathlib.Path(os.environ['WORKSPACE_DIR'])
slices = []
for name in ['explicit_VR-UN.dcm', '693_UNCR.dcm', 'J2K_pixelrep_mismatch.dcm']:
    ds = pydicom.dcmread(get_testdata_file(name))
    hu = ds.pixel_array * float(getattr(ds, 'RescaleSlope', 1) or 1) + float(getattr(ds, 'RescaleIntercept', 0) or 0)
    hu = np.clip(hu, -1024, 3071)
    slices += [hu, hu[:, ::-1]]
for case in sorted(p for p in data.iterdir() if (p / 'input.npy').is_file()):
    x = np.load(case / 'input.npy')
    best = max((s for s in slices if s.shape == x.shape), key=lambda s: np.corrcoef(s.ravel(), x.ravel())[0, 1])
    out = ws / 'outputs' / case.name
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / 'enhanced.npy', best.astype(np.float32))
print('submitted the shipped slices')
"""


def test_submitting_the_shipped_slices_scores_below_the_identity_baseline(amb_data_root, tmp_path):
    """Through the real runner: the package attack now scores below the noisy input itself (identity 0.83;
    it scored 1.0, rating A, when the references were the shipped slices)."""
    from automedbench.testing import run_steps, warm_evaluator_installed

    # scored by the warm evaluator where the campaign built-in offers it (the cold path's verdicts, without
    # starting an interpreter and the track for the pilot and again for the submission)
    result, _ = run_steps("enhancement/demo-ldct", [("python", PACKAGE_ATTACK)], out=tmp_path,
                          data_root=amb_data_root, warm_evaluator=warm_evaluator_installed())
    assert result.state == "scored" and result.task.components["valid_cases"] == 6
    assert result.task.partial < 0.8  # identity (the input as the answer) scores about 0.83
    assert result.aggregate.rating not in ("A", "B")


def test_the_search_finds_a_reference_that_is_a_shipped_slice():
    """The conformance check catches the old generator: a reference that is a shipped slice (mirrored)."""
    from pathlib import Path

    from automedbench.testing import find_reference_leaks
    from automedbench_enhancement.data.demo import HU_CLIP, read_dicom
    from pydicom.data import get_testdata_file

    hu, _ = read_dicom("693_UNCR.dcm")
    old_style = np.clip(hu, *HU_CLIP)[:, ::-1]
    folder = Path(get_testdata_file("693_UNCR.dcm")).parent
    leaks = find_reference_leaks({"ldct_002": old_style}, [folder], max_files=5_000)
    assert any(leak.source.endswith("693_UNCR.dcm") and leak.value > 0.99 for leak in leaks)
