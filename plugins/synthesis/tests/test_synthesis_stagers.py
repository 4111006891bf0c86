"""Stagers on small copies of each download layout written here (MSD, CT-ORG, TotalSegmentator, SynthRAD2025),
validate-task on each, and the untrusted-input refusals."""

from __future__ import annotations

import re
import zlib

import nibabel as nib
import numpy as np
import pytest
from automedbench.api import UserError
from automedbench.testing import check_download
from automedbench_synthesis.data.readers import read_mha
from automedbench_synthesis.data.stagers import stage_source
from automedbench_synthesis.track import SynthesisTrack

SHAPE = (24, 20, 17)


def ct_volume(seed: int, shape=SHAPE) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x, y, z = np.ogrid[:shape[0], :shape[1], :shape[2]]
    body = ((x - 12) / 10) ** 2 + ((y - 10) / 8) ** 2 < 1
    ct = np.where(body, 40, -1000) + np.where(((x - 12 - z / 4) ** 2 + (y - 10) ** 2) < 6, 300, 0)
    return (ct + rng.integers(-10, 10, shape)).astype(np.int16)


def nifti(path, volume, affine=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(volume, np.diag([0.8, 0.8, 2.5, 1.0]) if affine is None else affine), str(path))


def mha(path, volume, compressed=False, spacing=(1.0, 1.0, 3.0)):
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = {"int16": "MET_SHORT", "float32": "MET_FLOAT", "uint8": "MET_UCHAR"}[str(volume.dtype)]
    raw = np.ascontiguousarray(volume.transpose(2, 1, 0)).astype(volume.dtype.newbyteorder("<")).tobytes()
    if compressed:
        raw = zlib.compress(raw)
    header = (f"ObjectType = Image\nNDims = 3\nBinaryData = True\nBinaryDataByteOrderMSB = False\n"
              f"CompressedData = {compressed}\nTransformMatrix = 1 0 0 0 1 0 0 0 1\nOffset = -10 -20 5\n"
              f"ElementSpacing = {' '.join(map(str, spacing))}\nDimSize = {' '.join(map(str, volume.shape))}\n"
              f"ElementType = {kind}\nElementDataFile = LOCAL\n")
    path.write_bytes(header.encode() + raw)


def msd(root, n=22):
    for i in range(n):
        split = "imagesTs" if i < 15 else "imagesTr"
        nifti(root / "Task07_Pancreas" / split / f"pancreas_{i:03d}.nii.gz", ct_volume(i))
        (root / "Task07_Pancreas" / split / f"._pancreas_{i:03d}.nii.gz").write_bytes(b"\0\5\26\7 resource fork")
    (root / "Task07_Pancreas" / "dataset.json").write_text("{}")
    return root


def ctorg(root, n=21):
    for i in range(n):
        nifti(root / "OrganSegmentations" / f"volume-{i}.nii.gz", ct_volume(100 + i))
        nifti(root / "OrganSegmentations" / f"labels-{i}.nii.gz", np.zeros(SHAPE, np.uint8))
    return root


def totalseg(root, n=21):
    for i in range(n):
        nifti(root / f"s{i:04d}" / "ct.nii.gz", ct_volume(200 + i))
        nifti(root / f"s{i:04d}" / "segmentations" / "liver.nii.gz", np.zeros(SHAPE, np.uint8))
    return root


def synthrad(root, n=20):
    for i in range(n):
        folder = root / "Task1" / "HN" / f"1HNA{i:03d}"
        ct = ct_volume(300 + i)
        mask = (ct > -500).astype(np.uint8)
        mha(folder / "ct.mha", ct, compressed=i % 2 == 0)
        mha(folder / "mr.mha", (np.clip(ct, 0, 400) * 2.5).astype(np.float32))
        mha(folder / "mask.mha", mask)
    return root


LAYOUTS = {"synthesis/msd-pancreas-ctsr": msd, "synthesis/ctorg-ctsr": ctorg,
           "synthesis/totalsegmentator-ctsr": totalseg, "synthesis/synthrad2025-mrct": synthrad}


def task(task_id: str):
    return next(t for t in SynthesisTrack().tasks() if t.id == task_id)


@pytest.mark.slow  # stages and validates a copy of each layout
@pytest.mark.parametrize("task_id", sorted(LAYOUTS))
def test_validate_task_passes_on_a_staged_copy_of_each_layout(tmp_path, task_id):
    data = tmp_path / "data"
    check_download(task_id, LAYOUTS[task_id](tmp_path / "src"), data)
    public = data / task_id
    names = sorted({p.name for p in (public / "public").rglob("*") if p.is_file()})
    assert names == (["mask.nii.gz", "mr.nii.gz"] if "mrct" in task_id else ["ct.nii.gz"])
    assert not any("pancreas_" in p.name or "volume-" in p.name for p in (public / "public").rglob("*"))


def test_msd_stager_degrades_on_the_same_grid_and_skips_resource_forks(tmp_path):
    import json

    staged = stage_source(task("synthesis/msd-pancreas-ctsr"), tmp_path / "dest", msd(tmp_path / "src"))
    assert len(staged.case_ids) == 20 and all(re.fullmatch(r"MSDPSR_[0-9a-f]{8}", c) for c in staged.case_ids)
    record = json.loads((staged.private / "cases.json").read_text())
    chosen = sorted(record["cases"][c]["source"] for c in staged.case_ids)
    assert len(set(chosen)) == 20 and sum(s.startswith("Task07_Pancreas/imagesTs/") for s in chosen) == 15  # Ts first
    case = staged.case_ids[0]
    low = nib.load(str(staged.public / case / "ct.nii.gz"))
    target = nib.load(str(staged.private / case / "target.nii.gz"))
    assert low.shape == target.shape == SHAPE and np.allclose(low.affine, target.affine)
    lo, hi = np.asarray(low.dataobj), np.asarray(target.dataobj)
    assert np.array_equal(lo[:, :, ::4], hi[:, :, ::4])  # kept slices untouched
    assert np.allclose(lo[:, :, 2], (hi[:, :, 0] + hi[:, :, 4]) / 2)  # the slice between: linear in z
    assert np.allclose(lo[:, :, 16], hi[:, :, 16])
    assert 0 < record["cases"][case]["ssim_identity"] < 1


def test_mha_reader_round_trip_and_refusals(tmp_path):
    volume = ct_volume(5)
    mha(tmp_path / "a.mha", volume, compressed=True)
    read, affine = read_mha(tmp_path / "a.mha")
    assert np.array_equal(read, volume.astype(np.float32))
    assert np.allclose(affine[:3, 3], [10, 20, 5]) and np.allclose(np.diag(affine)[:3], [-1, -1, 3])  # LPS -> RAS
    text = (tmp_path / "a.mha").read_bytes()
    (tmp_path / "big.mha").write_bytes(text.replace(b"DimSize = 24 20 17", b"DimSize = 4000 4000 4000"))
    with pytest.raises(UserError, match="voxels, more than"):
        read_mha(tmp_path / "big.mha")
    (tmp_path / "short.mha").write_bytes(text.replace(b"CompressedData = True", b"CompressedData = False"))
    with pytest.raises(UserError, match="truncated"):
        read_mha(tmp_path / "short.mha")
    (tmp_path / "ext.mha").write_bytes(text.replace(b"ElementDataFile = LOCAL", b"ElementDataFile = /etc/passwd"))
    with pytest.raises(UserError, match="LOCAL"):
        read_mha(tmp_path / "ext.mha")


def test_incomplete_downloads_are_refused_in_one_line(tmp_path):
    source = synthrad(tmp_path / "src", n=2)
    (source / "Task1" / "HN" / "1HNA001" / "mask.mha").unlink()
    with pytest.raises(UserError, match="1HNA001: SynthRAD2025 case incomplete; missing mask"):
        stage_source(task("synthesis/synthrad2025-mrct"), tmp_path / "d1", source)
    with pytest.raises(UserError, match="only 5 usable volume"):
        stage_source(task("synthesis/ctorg-ctsr"), tmp_path / "d2", ctorg(tmp_path / "c", n=5))
    with pytest.raises(UserError, match="no totalsegmentator-ctsr volumes found"):
        stage_source(task("synthesis/totalsegmentator-ctsr"), tmp_path / "d3", tmp_path / "c")


def test_downloads_with_a_trailing_singleton_axis_are_read_outputs_are_not(tmp_path):
    from automedbench_synthesis.contract import read_volume
    from automedbench_synthesis.data.readers import read_nifti

    volume = ct_volume(9)
    nifti(tmp_path / "v.nii.gz", volume[..., None])
    read, _ = read_nifti(tmp_path / "v.nii.gz")
    assert read.shape == SHAPE and np.array_equal(read, volume.astype(np.float32))
    nifti(tmp_path / "c" / "sct.nii.gz", volume[..., None])
    assert "4-D image" in read_volume(tmp_path, "c", "sct.nii.gz", SHAPE, None)[1][0]


@pytest.mark.parametrize(("coarse", "shape"), [((4, 4, 4), (80, 96, 64)), ((7, 8, 5), (80, 96, 64)),
                                               ((2, 3, 2), (5, 40, 7)), ((4, 4, 4), (33, 17, 9))])
def test_the_mrct_demos_smooth_fields_are_scipys_cubic_zoom(coarse, shape):
    """The MR-to-CT demo's warp and shell fields are zoomed one axis at a time (a quarter of the staging's CPU):
    the values of `scipy.ndimage.zoom(..., order=3)` on the whole grid, to rounding."""
    from automedbench_synthesis.data import mni
    from scipy import ndimage

    values = np.random.default_rng(sum(shape)).normal(size=coarse)
    expected = ndimage.zoom(values, [n / c for n, c in zip(shape, coarse, strict=True)], order=3)
    found = mni._zoom_cubic(values, shape)
    assert found.shape == expected.shape == shape
    np.testing.assert_allclose(found, expected, rtol=0, atol=1e-12)
