"""Stagers on small files the tests write in each official layout: SimNICT parquet, AAPM 2016 DICOM, fastMRI .h5."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import attrs
import numpy as np
import pytest
from automedbench.api import UserError
from automedbench_enhancement.data import degrade
from automedbench_enhancement.data.stagers import stage_source
from automedbench_enhancement.track import EnhancementTrack

N = 3


def small(task_id: str, shape: tuple[int, int], **params):
    task = next(t for t in EnhancementTrack().tasks() if t.id == task_id)
    down = (shape[0] // 2, shape[1] // 2) if task.params["kind"] == "sr" else shape
    return attrs.evolve(task, case_count=N, params={**task.params, "output_shape": list(shape),
                                                    "input_shape": list(down), **params})


# ---------------------------------------------------------------- SimNICT


def png16(values: np.ndarray) -> dict:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(values.astype(np.uint16)).save(buffer, format="PNG")
    return {"bytes": buffer.getvalue(), "path": None}


def write_simnict(root, rows: int, shape=(32, 32), eight_bit=False, drop=None):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from PIL import Image

    rng = np.random.default_rng(0)
    cols = {"ICT": [], "LDCT_Low": [], "LDCT_High": []}
    refs = []
    for _ in range(rows):
        ref = rng.integers(0, 2500, shape)
        refs.append(ref)
        for name in cols:
            values = ref if name == "ICT" else ref + rng.integers(0, 200, shape)
            if eight_bit:
                buffer = io.BytesIO()
                Image.fromarray((values // 16).astype(np.uint8)).save(buffer, format="PNG")
                cols[name].append({"bytes": buffer.getvalue(), "path": None})
            else:
                cols[name].append(png16(values))
    if drop:
        cols.pop(drop)
    (root / "data").mkdir(parents=True)
    pq.write_table(pa.table(cols), root / "data" / "test_previews-00000-of-00001.parquet")
    return refs


def test_simnict_parquet_staged_in_hu(tmp_path):
    refs = write_simnict(tmp_path / "src", 4)
    task = small("enhancement/ldct", (32, 32))
    staged = stage_source(task, tmp_path / "dest", tmp_path / "src")
    assert len(staged.case_ids) == 3 and all(re.fullmatch(r"ldct_[0-9a-f]{8}", c) for c in staged.case_ids)
    manifest = json.loads((staged.private / "manifest.json").read_text())
    rows = {c["row"]: c["case_id"] for c in manifest["cases"]}  # three of the four rows, drawn from the secret
    assert len(rows) == 3 and all(c["file"] == "test_previews-00000-of-00001.parquet" for c in manifest["cases"])
    row, case = next(iter(rows.items()))
    ref = np.load(staged.private / case / "reference.npy")
    assert np.array_equal(ref, refs[row] - 1024.0)  # pixel_to_hu: value * 1 - 1024
    low = np.load(staged.public / case / "input.npy")
    assert low.dtype == np.float32 and (low - ref).min() >= 0 and (low - ref).max() < 200
    meta = json.loads((staged.public / case / "meta.json").read_text())
    assert meta["units"] == "HU" and meta["output_shape"] == [32, 32]


def test_simnict_refuses_8_bit_previews_and_missing_columns(tmp_path):
    write_simnict(tmp_path / "a", 4, eight_bit=True)
    with pytest.raises(UserError, match="8-bit"):
        stage_source(small("enhancement/ldct", (32, 32)), tmp_path / "d1", tmp_path / "a")
    write_simnict(tmp_path / "b", 4, drop="LDCT_High")
    with pytest.raises(UserError, match=r"missing column.s. LDCT_High"):
        stage_source(small("enhancement/ldct", (32, 32)), tmp_path / "d2", tmp_path / "b")
    write_simnict(tmp_path / "c", 2)
    with pytest.raises(UserError, match="only 2 usable case"):
        stage_source(small("enhancement/ldct", (32, 32)), tmp_path / "d3", tmp_path / "c")
    assert not (tmp_path / "d3" / "public").exists() and not (tmp_path / "d3" / ".incoming").exists()


def test_restaging_draws_anew(tmp_path):
    """Each staging draws its own secret: new case ids, the old staging replaced whole (no stale case left)."""
    write_simnict(tmp_path / "src", 4)
    task = small("enhancement/ldct", (32, 32))
    first = stage_source(task, tmp_path / "dest", tmp_path / "src")
    again = stage_source(task, tmp_path / "dest", tmp_path / "src")
    assert not set(first.case_ids) & set(again.case_ids)
    assert sorted(p.name for p in again.public.iterdir()) == again.case_ids


# ---------------------------------------------------------------- AAPM 2016


def write_dicom(path, hu: np.ndarray, instance: int):
    pydicom = pytest.importorskip("pydicom")
    sys.path.insert(0, str(Path(__file__).parent))
    from release_layouts import write_dicom as write  # the helper beside the tests (tests/ is not a package)

    write(path, hu, instance=instance)
    assert pydicom.dcmread(path).InstanceNumber == instance


def test_aapm_pairs_full_and_quarter_dose_by_instance_number(tmp_path):
    rng = np.random.default_rng(1)
    src = tmp_path / "src"
    full = {}
    for patient in ("L067", "L096"):
        for k in range(1, 4):
            hu = rng.integers(-1000, 1500, (24, 24)).astype(np.float64)
            full[(patient, k)] = hu
            write_dicom(src / patient / "full_1mm" / f"{patient}_FD_1_1.CT.0001.{k:04d}.IMA", hu, k)
            # quarter-dose files named in reverse order: pairing must use InstanceNumber, not names
            write_dicom(src / patient / "quarter_1mm" / f"{patient}_QD_1_1.CT.0001.{4 - k:04d}.IMA", hu + 7, k)
    staged = stage_source(small("enhancement/ldct", (24, 24)), tmp_path / "dest", src)
    manifest = json.loads((staged.private / "manifest.json").read_text())
    assert len({(c["patient"], c["full"]) for c in manifest["cases"]}) == 3  # three of the 6 pairs, drawn secretly
    for entry in manifest["cases"]:
        case = entry["case_id"]
        low = np.load(staged.public / case / "input.npy")
        ref = np.load(staged.private / case / "reference.npy")
        assert np.array_equal(low - ref, np.full((24, 24), 7.0))
        number = int(entry["full"].split(".")[-2])
        assert np.array_equal(ref, full[(entry["patient"], number)])
    assert json.loads((staged.public / staged.case_ids[0] / "meta.json").read_text())["pixel_spacing_mm"] == 0.7


def test_aapm_partial_layout_and_unknown_layout_get_one_line(tmp_path):
    write_dicom(tmp_path / "src" / "L067" / "full_1mm" / "a.IMA", np.zeros((24, 24)), 1)
    (tmp_path / "src" / "L067" / "quarter_1mm").mkdir(parents=True)
    with pytest.raises(UserError, match="quarter_1mm/ holds no"):
        stage_source(small("enhancement/ldct", (24, 24)), tmp_path / "d", tmp_path / "src")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"neither a SimNICT parquet release .* nor an AAPM 2016 layout") as err:
        stage_source(small("enhancement/ldct", (24, 24)), tmp_path / "d", tmp_path / "empty")
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- fastMRI


def write_fastmri(path, key="reconstruction_rss", slices=5, shape=(40, 40), vmax=2.0):
    h5py = pytest.importorskip("h5py")
    rng = np.random.default_rng(len(path.name))
    volume = rng.uniform(0, vmax, (slices, *shape)).astype(np.float32)
    with h5py.File(path, "w") as handle:
        handle.create_dataset(key, data=volume)
        handle.create_dataset("kspace", data=np.zeros((slices, 4, 4), np.complex64))
        handle.attrs["max"] = vmax
        handle.attrs["acquisition"] = "CORPD_FBK"
    return volume


def test_fastmri_middle_slice_normalised_and_kspace_truncated(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    volumes = [write_fastmri(src / f"file_brain_{i}.h5", shape=(40, 36)) for i in range(3)]
    write_fastmri(src / "file_knee_9.h5", key="reconstruction_esc")  # single-coil naming is accepted too
    staged = stage_source(small("enhancement/mri-sr", (32, 32)), tmp_path / "dest", src)
    assert len(staged.case_ids) == 3 and all(re.fullmatch(r"mrisr_[0-9a-f]{8}", c) for c in staged.case_ids)
    files = {c["file"]: c["case_id"] for c in json.loads((staged.private / "manifest.json").read_text())["cases"]}
    brain = next(f for f in sorted(files) if f.startswith("file_brain_"))
    ref = np.load(staged.private / files[brain] / "reference.npy")
    expected = np.clip(volumes[int(brain[11])][2, 4:36, 2:34] / 2.0, 0, 1)  # middle slice, centre crop, / max
    assert np.allclose(ref, expected, atol=1e-6)
    low = np.load(staged.public / files[brain] / "input.npy")
    assert low.shape == (16, 16)
    assert np.allclose(low, np.clip(degrade.kspace_down(ref.astype(np.float64)), 0, 1), atol=1e-6)


def test_fastmri_wrong_files_get_one_line(tmp_path):
    (tmp_path / "none").mkdir()
    with pytest.raises(UserError, match=r"no fastMRI \.h5 files"):
        stage_source(small("enhancement/mri-sr", (32, 32)), tmp_path / "d", tmp_path / "none")
    (tmp_path / "bad").mkdir()
    write_fastmri(tmp_path / "bad" / "file_1.h5", key="image")
    with pytest.raises(UserError, match="no reconstruction_rss or reconstruction_esc dataset"):
        stage_source(small("enhancement/mri-sr", (32, 32)), tmp_path / "d", tmp_path / "bad")
    (tmp_path / "bad" / "file_1.h5").write_bytes(b"not hdf5")
    with pytest.raises(UserError, match="not a readable HDF5 file"):
        stage_source(small("enhancement/mri-sr", (32, 32)), tmp_path / "d", tmp_path / "bad")
