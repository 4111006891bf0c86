"""Every synthesis stager passes the stager conformance check (`automedbench.testing.check_stager`) on a
small download in its dataset's layout: a fresh secret per staging (which volumes, their ids: no file name or
folder order tells a case), nothing but regular files published, the perfect baseline exactly 1.0 (a case no
submission could score is never staged), and hostile downloads (links, FIFOs, damaged files) refused in one
line. Each volume has content of its own, so another case's target (a replayed answer) scores as a guess."""

from __future__ import annotations

import numpy as np
import pytest
from automedbench.testing import assert_stager_conforms, sampled
from test_synthesis_stagers import SHAPE, mha, nifti


def volume(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-1000, 1000, SHAPE).astype(np.int16)


def msd(root, n=8):
    for i in range(n):
        split = "imagesTs" if i < 5 else "imagesTr"
        nifti(root / "Task07_Pancreas" / split / f"pancreas_{i:03d}.nii.gz", volume(i))
    return root


def ctorg(root, n=8):
    for i in range(n):
        nifti(root / "OrganSegmentations" / f"volume-{i}.nii.gz", volume(100 + i))
    return root


def totalseg(root, n=8):
    for i in range(n):
        nifti(root / f"s{i:04d}" / "ct.nii.gz", volume(200 + i))
    return root


def synthrad(root, n=8):
    for i in range(n):
        folder = root / "Task1" / "HN" / f"1HNA{i:03d}"
        ct = volume(300 + i)
        mha(folder / "ct.mha", ct, compressed=i % 2 == 0)
        mha(folder / "mr.mha", (np.clip(ct, 0, 400) * 2.5).astype(np.float32))
        mha(folder / "mask.mha", np.ones(SHAPE, np.uint8))
    return root


# (task, fixture download writer, case count)
FIXTURES = [
    ("synthesis/msd-pancreas-ctsr", msd, 6),
    ("synthesis/synthrad2025-mrct", synthrad, 6),
    ("synthesis/ctorg-ctsr", ctorg, 6),
    ("synthesis/totalsegmentator-ctsr", totalseg, 6),
]


@pytest.mark.parametrize(("task_id", "write", "count"), sampled(FIXTURES, keep=2))
def test_stager_conformance(tmp_path, task_id, write, count):
    assert_stager_conforms(task_id, write(tmp_path / "download"), tmp_path / "work", case_count=count)
