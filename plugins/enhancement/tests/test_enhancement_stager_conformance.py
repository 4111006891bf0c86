"""Every enhancement stager passes the stager conformance check (`automedbench.testing.check_stager`) on a
small download in its dataset's layout: a fresh secret per staging (which slices, their ids, and for the
simulated low-dose CT tasks the noise itself: an item staged twice gets unrelated noise, and adding another
staging's residual to an input scores as a guess does), nothing but regular files published, the perfect
baseline exactly 1.0, and hostile downloads (links, FIFOs, damaged files) refused in one line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from automedbench.testing import assert_stager_conforms, sampled

sys.path.insert(0, str(Path(__file__).parent))
import release_layouts as layouts  # a helper module beside the tests (tests/ is not a package)
from test_enhancement_stagers import write_fastmri, write_simnict

pytest.importorskip("pydicom")
pytest.importorskip("skimage")


def simnict(src: Path) -> Path:
    write_simnict(src, 6, shape=(512, 512))
    return src


def fastmri(src: Path) -> Path:
    src.mkdir(parents=True)
    for i in range(6):  # names of different lengths: write_fastmri seeds each volume by its name's length
        write_fastmri(src / f"file_brain_{i:0{i + 1}d}.h5", shape=(330, 324))
    return src


def release(task_id: str, n: int):
    def build(src: Path) -> Path:
        layouts.WRITERS[task_id](src, n)
        return src
    return build


# (task, fixture download writer, case count, random degradation)
FIXTURES = [
    ("enhancement/lidc-idri-denoising", release("enhancement/lidc-idri-denoising", 5), 5, True),
    ("enhancement/ixi-t1-sr", release("enhancement/ixi-t1-sr", 6), 5, False),
    ("enhancement/ldct", simnict, 5, False),
    ("enhancement/deeplesion-denoising", release("enhancement/deeplesion-denoising", 5), 5, True),
    ("enhancement/brats-t1c-sr", release("enhancement/brats-t1c-sr", 6), 5, False),
    ("enhancement/nih-cxr-sr", release("enhancement/nih-cxr-sr", 6), 5, False),
    ("enhancement/mri-sr", fastmri, 5, False),
]


@pytest.mark.parametrize(("task_id", "write", "count", "noise"), sampled(FIXTURES, keep=3))
def test_stager_conformance(tmp_path, task_id, write, count, noise):
    if task_id.endswith("mri-sr"):
        pytest.importorskip("h5py")
    assert_stager_conforms(task_id, write(tmp_path / "download"), tmp_path / "work", case_count=count,
                           random_degradation=noise)
