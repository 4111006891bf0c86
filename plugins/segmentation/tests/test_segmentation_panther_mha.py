"""PANTHER `.mha` → NIfTI: geometry kept (checked against SimpleITK's own index-to-world mapping), values checked."""

from __future__ import annotations

import nibabel as nib
import numpy as np
import pytest
from automedbench.api import UserError
from automedbench_segmentation.data import panther

sitk = None  # SimpleITK, loaded by the fixture below when a test here runs (not at collection: every worker would)


@pytest.fixture(autouse=True)
def _simpleitk():
    global sitk
    sitk = pytest.importorskip("SimpleITK")

SPACING = (0.7, 0.9, 3.0)
ORIGIN = (-120.5, 33.25, 17.0)


def oblique_direction() -> tuple[float, ...]:
    """A proper rotation (about z by 20 degrees, then about x by 10) so no axis is aligned with the grid."""
    a, b = np.deg2rad(20), np.deg2rad(10)
    rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, np.cos(b), -np.sin(b)], [0, np.sin(b), np.cos(b)]])
    return tuple((rx @ rz).ravel().tolist())


def write_mha(path, array_zyx, spacing=SPACING, origin=ORIGIN, direction=None):
    image = sitk.GetImageFromArray(array_zyx)
    image.SetSpacing(spacing)
    image.SetOrigin(origin)
    image.SetDirection(direction or oblique_direction())
    path.parent.mkdir(parents=True, exist_ok=True)
    sitk.WriteImage(image, str(path))
    return image


def test_round_trip_keeps_voxels_spacing_origin_and_direction(tmp_path):
    rng = np.random.default_rng(3)
    data = rng.integers(-500, 1500, size=(5, 6, 7)).astype(np.int16)  # (z, y, x) as SimpleITK wants
    source = write_mha(tmp_path / "img_0000.mha", data)
    nifti = tmp_path / "img.nii.gz"
    panther.mha_to_nifti(tmp_path / "img_0000.mha", nifti)
    back = sitk.ReadImage(str(nifti))  # SimpleITK's own NIfTI reader: an independent route back to LPS
    assert np.allclose(back.GetSpacing(), SPACING, atol=1e-5)
    assert np.allclose(back.GetOrigin(), ORIGIN, atol=1e-4)
    assert np.allclose(back.GetDirection(), oblique_direction(), atol=1e-5)
    assert np.array_equal(sitk.GetArrayFromImage(back), data)
    img = nib.load(str(nifti))
    vox = np.asanyarray(img.dataobj)
    assert vox.shape == (7, 6, 5) and vox.dtype == np.int16
    for index in [(0, 0, 0), (6, 0, 0), (2, 5, 1), (6, 5, 4)]:
        lps = np.array(source.TransformIndexToPhysicalPoint(index))
        ras = img.affine @ [*index, 1.0]
        assert np.allclose(ras[:3], lps * [-1, -1, 1], atol=1e-4), index
        assert vox[index] == data[index[2], index[1], index[0]]


def test_label_values_outside_panther_scheme_are_refused(tmp_path):
    labels = np.zeros((3, 4, 5), np.uint8)
    labels[1, 1, 1:3] = [1, 2]
    write_mha(tmp_path / "ok.mha", labels)
    assert set(np.unique(panther.mha_to_nifti(tmp_path / "ok.mha", tmp_path / "ok.nii.gz", label=True))) == {0, 1, 2}
    labels[2, 2, 2] = 3
    write_mha(tmp_path / "bad.mha", labels)
    with pytest.raises(UserError, match=r"label values 3 are not PANTHER's 0 background, 1 tumour, 2 pancreas"):
        panther.mha_to_nifti(tmp_path / "bad.mha", tmp_path / "bad.nii.gz", label=True)
    soft = np.full((3, 4, 5), 0.5, np.float32)
    write_mha(tmp_path / "soft.mha", soft)
    with pytest.raises(UserError, match=r"label values 0\.5"):
        panther.mha_to_nifti(tmp_path / "soft.mha", tmp_path / "soft.nii.gz", label=True)


def test_two_dimensional_image_is_unreadable_not_a_crash(tmp_path):
    flat = sitk.GetImageFromArray(np.zeros((4, 5), np.int16))
    sitk.WriteImage(flat, str(tmp_path / "flat.mha"))
    with pytest.raises(ValueError, match="2-D image"):
        panther.read_mha(tmp_path / "flat.mha")
