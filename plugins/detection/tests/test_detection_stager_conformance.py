"""Every detection stager passes the stager conformance check (`automedbench.testing.check_stager`) on a
small download in its dataset's layout: a fresh secret per staging (no split-file order, table row or file
name predicts an image's boxes), nothing but regular files published, the perfect baseline exactly 1.0, and
hostile downloads (links, FIFOs, damaged files) refused in one line. Each image's findings sit at a position
of their own (`varied`), so another image's boxes score as a guess would."""

from __future__ import annotations

import detection_layouts as layouts
import pytest
from automedbench.testing import assert_stager_conforms, sampled

# task -> (fixture download writer, case count staged from it)
FIXTURES = {
    "detection/bccd": (lambda p: layouts.voc(p, count=16, split=14, varied=True), 12),
    "detection/grazpedwri-dx": (lambda p: layouts.yolo(p, count=14, varied=True), 12),
    "detection/dentex": (lambda p: layouts.coco(p, count=14, varied=True), 12),
    "detection/vindr-cxr": (lambda p: layouts.vindr(p, positives=10, negatives=3, varied=True), 10),
}


@pytest.mark.parametrize("task_id", sampled(list(FIXTURES), keep=4))
def test_stager_conformance(tmp_path, task_id):
    if task_id.endswith("vindr-cxr"):
        pytest.importorskip("pydicom")
    write, count = FIXTURES[task_id]
    assert_stager_conforms(task_id, write(tmp_path / "download"), tmp_path / "work", case_count=count)
