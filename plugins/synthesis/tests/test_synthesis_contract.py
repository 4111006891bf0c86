"""The output reader: no-follow, bounded, geometry-checked; the gate refuses too few valid outputs."""

from __future__ import annotations

import gzip
import os

import nibabel as nib
import numpy as np
import pytest
from automedbench_synthesis.contract import OUTPUT, gate, read_volume
from automedbench_synthesis.track import SynthesisTrack

SHAPE = (16, 12, 9)
AFFINE = np.diag([0.8, 0.8, 2.5, 1.0])


def write(path, volume, affine=AFFINE):
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(volume, affine), str(path))


def test_valid_int_and_float_outputs_are_read(tmp_path):
    write(tmp_path / "c1" / OUTPUT, np.full(SHAPE, -1000, dtype=np.int16))
    volume, reasons = read_volume(tmp_path, "c1", OUTPUT, SHAPE, AFFINE)
    assert reasons == [] and volume.dtype == np.float32 and float(volume.max()) == -1000.0


@pytest.mark.parametrize("make, reason", [
    (lambda p: write(p, np.zeros((16, 12, 8), np.float32)), "shape (16, 12, 8) != input (16, 12, 9)"),
    (lambda p: write(p, np.zeros(SHAPE, np.float32), np.diag([1.0, 0.8, 2.5, 1.0])), "affine differs"),
    (lambda p: write(p, np.full(SHAPE, np.nan, np.float32)), "NaN/Inf"),
    (lambda p: write(p, np.zeros((16, 12, 9, 2), np.float32)), "4-D image"),
    (lambda p: p.write_bytes(b"not a nifti at all" * 30), "not a NIfTI"),
    (lambda p: p.write_bytes(gzip.compress(b"\0" * (16 * 12 * 9 * 8 + (2 << 20)))), "decompresses past"),
])
def test_bad_outputs_get_one_reason(tmp_path, make, reason):
    path = tmp_path / "c1" / OUTPUT
    path.parent.mkdir(parents=True)
    make(path)
    volume, reasons = read_volume(tmp_path, "c1", OUTPUT, SHAPE, AFFINE)
    assert volume is None and len(reasons) == 1 and reason in reasons[0], reasons


def test_links_are_never_followed(tmp_path):
    write(tmp_path / "elsewhere" / "x.nii.gz", np.zeros(SHAPE, np.float32))
    (tmp_path / "c1").mkdir()
    os.symlink(tmp_path / "elsewhere" / "x.nii.gz", tmp_path / "c1" / OUTPUT)
    assert "symlink" in read_volume(tmp_path, "c1", OUTPUT, SHAPE, AFFINE)[1][0]
    os.symlink(tmp_path / "elsewhere", tmp_path / "c2")
    assert "symlink" in read_volume(tmp_path, "c2", OUTPUT, SHAPE, AFFINE)[1][0]
    (tmp_path / "c3").mkdir()
    os.link(tmp_path / "elsewhere" / "x.nii.gz", tmp_path / "c3" / OUTPUT)
    assert "hard link" in read_volume(tmp_path, "c3", OUTPUT, SHAPE, AFFINE)[1][0]
    assert read_volume(tmp_path, "c4", OUTPUT, SHAPE, AFFINE)[1] == [f"{OUTPUT}: missing"]


def test_gate_needs_half_the_cases(tmp_path):
    task = next(t for t in SynthesisTrack().tasks() if t.id == "synthesis/demo")
    ids = ["a", "b", "c", "d"]
    for case in ids:
        write(tmp_path / "public" / case / "ct.nii.gz", np.zeros(SHAPE, np.float32))
    write(tmp_path / "out" / "a" / OUTPUT, np.zeros(SHAPE, np.float32))
    refused = gate(task, ids, tmp_path / "public", tmp_path / "out")
    assert refused and refused.startswith("submission refused: 1 of the 4 cases")
    assert "b: sct.nii.gz: missing" in refused
    write(tmp_path / "out" / "b" / OUTPUT, np.zeros(SHAPE, np.float32))
    assert gate(task, ids, tmp_path / "public", tmp_path / "out") is None
