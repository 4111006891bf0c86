"""The output checker: every way a mask can break the contract gives a verdict with a reason."""

from __future__ import annotations

import attrs
import nibabel as nib
import numpy as np
import pytest
from automedbench_segmentation import contract, io

SHAPE = (6, 5, 4)
AFF = np.diag([0.8, 0.8, 2.5, 1.0])


@pytest.fixture()
def case(tmp_path):
    public, sub = tmp_path / "public", tmp_path / "sub"
    io.save(public / "ct.nii.gz", np.zeros(SHAPE, np.int16), AFF)
    sub.mkdir()
    return public, sub


def write(sub, name, data, affine=AFF):
    img = nib.Nifti1Image(data, affine)
    img.set_data_dtype(data.dtype)
    nib.save(img, str(sub / name))


def verdict(amb_registry, task_id, public, sub):
    _, task = amb_registry.task(task_id)
    return contract.check_case(task, "c", sub, public)


def good_mask(value=1):
    m = np.zeros(SHAPE, np.uint8)
    m[1:3, 1:3, 1:3] = value
    return m


def test_valid_pair(amb_registry, case):
    public, sub = case
    write(sub, "organ.nii.gz", good_mask())
    write(sub, "lesion.nii.gz", np.zeros(SHAPE, np.uint8))
    v = verdict(amb_registry, "segmentation/demo", public, sub)
    assert v.valid and v.present and v.reasons == []


@pytest.mark.parametrize(("lesion", "affine", "needle"), [
    (None, AFF, "lesion.nii.gz: missing"),
    (np.zeros((6, 5, 3), np.uint8), AFF, "shape (6, 5, 3) != input (6, 5, 4)"),
    (good_mask(), np.diag([1.0, 1.0, 1.0, 1.0]), "affine differs"),
    (good_mask().astype(np.float32) * 0.6, AFF, "non-integer values in 8 voxel(s)"),
    (np.full(SHAPE, np.nan, np.float32), AFF, "every voxel is NaN or Inf"),
    (np.where(good_mask() > 0, np.nan, 0).astype(np.float32), AFF, "8 NaN/Inf voxel(s)"),
    (good_mask(2), AFF, "values outside [0, 1] (min 0, max 2)"),
    (good_mask().astype(np.int16) - 1, AFF, "values outside [0, 1] (min -1, max 0)"),
])
def test_broken_lesion(amb_registry, case, lesion, affine, needle):
    public, sub = case
    write(sub, "organ.nii.gz", good_mask())
    if lesion is not None:
        write(sub, "lesion.nii.gz", lesion, affine)
    v = verdict(amb_registry, "segmentation/demo", public, sub)
    assert not v.valid and v.present
    assert any(needle in r for r in v.reasons), v.reasons


def test_unreadable_file(amb_registry, case):
    public, sub = case
    write(sub, "organ.nii.gz", good_mask())
    (sub / "lesion.nii.gz").write_bytes(b"not a nifti at all")
    v = verdict(amb_registry, "segmentation/demo", public, sub)
    assert not v.valid and any("lesion.nii.gz: unreadable" in r for r in v.reasons)


def test_integral_floats_and_bool_are_accepted(amb_registry, case):
    public, sub = case
    write(sub, "organ.nii.gz", good_mask().astype(np.float32))
    write(sub, "lesion.nii.gz", good_mask().astype(np.int16))
    assert verdict(amb_registry, "segmentation/demo", public, sub).valid
    assert contract.value_problems("m", good_mask().astype(bool), {0, 1}) == []


def test_multilabel_label_set(amb_registry, case):
    public, sub = case
    write(sub, "labels.nii.gz", good_mask(3))
    assert verdict(amb_registry, "segmentation/demo-multilabel", public, sub).valid
    write(sub, "labels.nii.gz", good_mask(4))
    v = verdict(amb_registry, "segmentation/demo-multilabel", public, sub)
    assert not v.valid and "values outside [0, 1, 2, 3] (min 0, max 4)" in v.reasons[0]


def test_label_set_with_gaps_uses_counts(amb_registry):
    """A label set like {0, 1, 3} cannot be checked by min/max alone."""
    data = good_mask(2)
    data[0, 0, 0] = 3
    assert contract.value_problems("m", data, {0, 1, 3}) == ["m: labels [2] not in [0, 1, 3]"]
    assert contract.value_problems("m", good_mask(3), {0, 1, 3}) == []
    _, task = amb_registry.task("segmentation/demo-multilabel")
    gappy = attrs.evolve(task, params={**task.params, "labels": {"1": "a", "3": "c"}})
    assert contract.allowed_values(gappy, "labels.nii.gz") == {0, 1, 3}


def test_large_volume_check_is_chunked():
    """More voxels than one chunk: problems found in the last chunk are still reported."""
    data = np.zeros(contract.CHUNK * 2 + 5, np.float32)
    data[-1] = 0.5
    assert "non-integer values in 1 voxel(s)" in contract.value_problems("m", data, {0, 1})[0]
    data[-1] = np.inf
    assert contract.value_problems("m", data, {0, 1}) == ["m: 1 NaN/Inf voxel(s)"]
