"""NIFTI_ONLY, the first line of the scripted solutions' NIfTI steps: nibabel loads without pydicom (and its
`requests`), and what it reads and writes is the same."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from automedbench.api import NIFTI_ONLY

ROUND_TRIP = """
import sys
import nibabel as nib, numpy as np
a = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
nib.save(nib.Nifti1Image(a, np.diag([1.5, 2.0, 2.5, 1.0])), sys.argv[1])
img = nib.load(sys.argv[1])
assert (np.asanyarray(img.dataobj) == a).all() and img.header.get_zooms() == (1.5, 2.0, 2.5)
print(sorted(m for m in ('pydicom', 'requests') if sys.modules.get(m) is not None))
"""


def imported(code: str, path: Path) -> str:
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_nifti_step_reads_and_writes_the_same_without_pydicom(tmp_path):
    pytest.importorskip("pydicom")
    assert imported(ROUND_TRIP, tmp_path / "a.nii.gz") == "['pydicom', 'requests']"  # what the line avoids
    assert imported(NIFTI_ONLY + ROUND_TRIP, tmp_path / "b.nii.gz") == "[]"
    assert (tmp_path / "a.nii.gz").stat().st_size == (tmp_path / "b.nii.gz").stat().st_size


@pytest.mark.parametrize("package, name", [("automedbench_segmentation.solution", "method.py"),
                                           ("automedbench_segmentation.solution", "airway_method.py"),
                                           ("automedbench_synthesis.solution", "method.py")])
def test_the_scripted_methods_refuse_pydicom_before_nibabel(package, name):
    pytest.importorskip(package)
    from automedbench.api import solution_source

    source = solution_source(package, name)
    assert source.index("sys.modules.setdefault(\"pydicom\", None)") < source.index("import nibabel")
