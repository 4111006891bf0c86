"""Every classification stager passes the stager conformance check (`automedbench.testing.check_stager`) on
a small download in its dataset's layout: a fresh secret per staging (no public order, file name or table
row predicts a label), nothing but regular files published, the perfect baseline exactly 1.0, and hostile
downloads (links, FIFOs, damaged files) refused in one line. One task per stager runs by default, every
task with AUTOMEDBENCH_ALL_LAYOUT_CHECKS=1."""

from __future__ import annotations

import classification_layouts as layouts
import pytest
from automedbench.testing import assert_stager_conforms, sampled

# task -> (fixture download writer, case count staged from it)
FIXTURES = {
    "classification/brain-tumour-mri": (lambda p: layouts.brain_tumour(p, per_class=10), 40),
    "classification/skin-lesion": (layouts.ham10000, 40),
    "classification/patchcamelyon": (lambda p: layouts.pcam(p, count=60), 40),
    "classification/crc-histology": (lambda p: layouts.crc(p, per_class=5), 45),
    "classification/chest-xray-pneumonia": (lambda p: layouts.kermany(p, per_class=20), 40),
}


@pytest.mark.parametrize("task_id", sampled(list(FIXTURES), keep=3))
def test_stager_conformance(tmp_path, task_id):
    if task_id.endswith("patchcamelyon"):
        pytest.importorskip("h5py")
    write, count = FIXTURES[task_id]
    assert_stager_conforms(task_id, write(tmp_path / "download"), tmp_path / "work", case_count=count)


def test_isic2018_layout_conforms_too(tmp_path):
    assert_stager_conforms("classification/skin-lesion", layouts.isic2018(tmp_path / "download"),
                           tmp_path / "work", case_count=40, checks=["public-knowledge", "perfect"])
