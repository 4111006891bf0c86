"""Stage the real tasks from the official download layouts the user already has.

- `enhancement/ldct`, SimNICT (parquet release, HF `image` columns `ICT` and `LDCT_High`): one row per
  slice; the PNG's pixel values map to HU by the task's `pixel_to_hu` (slope, intercept). 8-bit
  previews are refused: they cannot be mapped back to HU.
- `enhancement/ldct`, AAPM 2016 Low-Dose CT Grand Challenge: `<patient>/full_1mm/*.IMA` (full dose, the
  reference) and `<patient>/quarter_1mm/*.IMA` (quarter dose, the input), paired by InstanceNumber; the
  slices are spread evenly over all pairs.
- `enhancement/mri-sr`, fastMRI `.h5`: the middle slice of `reconstruction_rss` (multi-coil) or
  `reconstruction_esc` (single-coil) divided by the volume's `max` attribute and clipped to [0, 1] is
  the reference (centre-cropped to the task's grid); the input is the centre half of its k-space.
Every hidden choice comes from the staging's secret (`area.secret`): the order candidates are tried in
(so which slices or volumes are staged), the case ids (drawn at random: their sorted order is no source
order) and the noise added to a slice. Every case is written to a staging area and swapped in when all are
made; each staging draws anew.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import (
    StagedData,
    StagingSecret,
    TaskSpec,
    UserError,
    check_download_file,
    check_image,
    check_pixels,
    read_download_bytes,
)

from .. import contract
from . import degrade
from .store import staging

PARQUET_MAX_BYTES = 8 << 30  # one SimNICT shard
# (low, reference, public facts, private facts) of one case
Case = tuple[np.ndarray, np.ndarray, dict[str, Any], dict[str, Any]]
Cases = Callable[[TaskSpec, StagingSecret], Iterator[Case]]


def stage_source(task: TaskSpec, dest: Path, source: Path) -> StagedData:
    if "stager" in task.params:  # the full release's LIDC-IDRI, DeepLesion, BraTS, IXI and ChestXray14 tasks
        from .release_stagers import stage_release

        return stage_release(task, dest, source)
    kind = task.params["kind"]
    if kind == "ldct":
        parquet = sorted(p for p in source.rglob("*.parquet") if not p.name.startswith("."))
        if parquet:
            return _stage(task, dest, source, lambda t, secret: _simnict_cases(t, parquet, secret))
        series = _aapm_series(source, task.params)
        if series:
            return _stage(task, dest, source, lambda t, secret: _aapm_cases(t, series, secret))
        full, quarter = task.params["aapm_dirs"]
        raise UserError(f"{source}: neither a SimNICT parquet release (*.parquet with ICT and "
                        f"{task.params['low_column']} columns) nor an AAPM 2016 layout (<patient>/{full}/*.IMA "
                        f"with <patient>/{quarter}/*.IMA)")
    files = sorted(p for p in source.rglob("*.h5") if not p.name.startswith("."))
    if not files:
        raise UserError(f"{source}: no fastMRI .h5 files (expected file_*.h5 with reconstruction_rss or "
                        "reconstruction_esc)")
    return _stage(task, dest, source, lambda t, secret: _fastmri_cases(t, files, secret))


def _stage(task: TaskSpec, dest: Path, source: Path, cases: Cases) -> StagedData:
    """The first `case_count` usable cases `cases` yields, the candidates tried in the staging's secret order,
    under case ids drawn from the secret."""
    prefix = task.id.split("/", 1)[1].replace("-", "")
    with staging(task, dest) as job:
        ids = job.area.secret.id_stream(prefix)
        for low, ref, info, origin in cases(task, job.area.secret):
            if len(job.case_ids) == task.case_count:
                break
            job.add(next(ids), low, ref, info, origin)
        if len(job.case_ids) < task.case_count:
            raise UserError(f"{source}: only {len(job.case_ids)} usable case(s), {task.id} needs {task.case_count}")
        return job.commit(source=str(source.resolve()))


# ---------------------------------------------------------------- SimNICT parquet


def _image_cell(cell: Any, column: str, where: str) -> np.ndarray:
    """An HF `image` cell ({bytes, path}) or a nested list as a 2-D array of raw pixel values."""
    from PIL import Image

    if isinstance(cell, dict) and cell.get("bytes"):
        image = Image.open(io.BytesIO(cell["bytes"]))
        check_pixels([image.width, image.height, len(image.getbands())], 2, where)  # before any pixel is decoded
        if image.mode in ("L", "P", "RGB", "RGBA", "LA"):
            raise UserError(f"{where}: column {column} holds {image.mode} (8-bit) images, which cannot be mapped "
                            "back to HU; stage a release with 16-bit images")
        return np.asarray(image, dtype=np.float64)
    array = np.asarray(cell, dtype=np.float64)
    if array.ndim != 2:
        raise UserError(f"{where}: column {column} is neither an image nor a 2-D array")
    return array


def _simnict_cases(task: TaskSpec, files: list[Path], secret: StagingSecret) -> Iterator[Case]:
    """Shards in a secret order, and the rows of each in a secret order (the release's own low-dose input)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    params = task.params
    low_col, ref_col = params["low_column"], params["reference_column"]
    slope, intercept = params["pixel_to_hu"]
    for path in secret.shuffled(files, "shards"):
        data = read_download_bytes(path, PARQUET_MAX_BYTES)  # no link, bounded: pyarrow never opens the path
        try:
            table = pq.read_table(pa.BufferReader(data))
        except Exception as exc:  # pyarrow raises several types on a corrupt shard
            raise UserError(f"{path}: unreadable parquet ({type(exc).__name__}: {str(exc)[:100]})") from None
        missing = [c for c in (ref_col, low_col) if c not in table.column_names]
        if missing:
            raise UserError(f"{path}: not a SimNICT parquet file; missing column(s) {', '.join(missing)} "
                            f"(found {', '.join(table.column_names[:8])})")
        refs, lows = table.column(ref_col).to_pylist(), table.column(low_col).to_pylist()
        for row in secret.shuffled(range(len(refs)), f"rows of {path.name}"):
            ref_cell, low_cell = refs[row], lows[row]
            where = f"{path.name} row {row}"
            ref = _image_cell(ref_cell, ref_col, where) * slope + intercept
            low = _image_cell(low_cell, low_col, where) * slope + intercept
            if ref.shape != contract.output_shape(task) or low.shape != ref.shape:
                continue
            yield low, ref, {}, {"file": path.name, "row": row}


# ---------------------------------------------------------------- AAPM 2016 DICOM


def _aapm_series(source: Path, params: dict[str, Any]) -> dict[str, tuple[list[Path], list[Path]]]:
    """patient -> (full-dose files, quarter-dose files) for every patient folder holding both series."""
    full_dir, quarter_dir = params["aapm_dirs"]
    found = {}
    for patient in sorted(p for p in source.iterdir() if p.is_dir() and not p.name.startswith(".")):
        full = sorted(f for f in (patient / full_dir).glob("*") if f.suffix.upper() in (".IMA", ".DCM"))
        quarter = sorted(f for f in (patient / quarter_dir).glob("*") if f.suffix.upper() in (".IMA", ".DCM"))
        if full or quarter:
            if not full or not quarter:
                gone = full_dir if not full else quarter_dir
                raise UserError(f"{patient}: AAPM layout incomplete; {gone}/ holds no .IMA/.dcm files")
            found[patient.name] = (full, quarter)
    return found


def _instance(path: Path) -> int:
    import pydicom

    return int(pydicom.dcmread(check_download_file(path), stop_before_pixels=True).InstanceNumber)


def _hu(path: Path) -> tuple[np.ndarray, float]:
    import pydicom

    ds = pydicom.dcmread(check_image(Path(path), kind="dicom"))  # rows x columns x frames checked first
    hu = ds.pixel_array.astype(np.float64) * float(ds.get("RescaleSlope", 1) or 1) + float(
        ds.get("RescaleIntercept", 0) or 0)
    return hu, float(ds.PixelSpacing[0])


def _aapm_cases(task: TaskSpec, series: dict[str, tuple[list[Path], list[Path]]],
                secret: StagingSecret) -> Iterator[Case]:
    """Full/quarter-dose pairs (by InstanceNumber) of every patient, tried in a secret order."""
    pairs = []
    for patient, (full, quarter) in series.items():
        by_number = {_instance(f): f for f in quarter}
        for f in full:
            match = by_number.get(_instance(f))
            if match is not None:
                pairs.append((patient, f, match))
    for patient, full, quarter in secret.shuffled(pairs, "pairs"):
        ref, spacing = _hu(full)
        low, _ = _hu(quarter)
        if ref.shape != contract.output_shape(task) or low.shape != ref.shape:
            continue
        yield low, ref, {"pixel_spacing_mm": spacing}, {"patient": patient, "full": full.name, "quarter": quarter.name}


# ---------------------------------------------------------------- fastMRI


def _fastmri_cases(task: TaskSpec, files: list[Path], secret: StagingSecret) -> Iterator[Case]:
    """The middle slice of each volume, the volumes tried in a secret order."""
    import h5py

    h, w = contract.output_shape(task)
    keys = task.params["recon_keys"]
    for path in secret.shuffled(files, "volumes"):
        check_download_file(path)  # HDF5 opens the file in C: no link may stand in for it
        try:
            handle = h5py.File(path, "r")
        except OSError as exc:
            raise UserError(f"{path}: not a readable HDF5 file ({exc})") from None
        with handle:
            key = next((k for k in keys if k in handle), None)
            if key is None:
                raise UserError(f"{path}: no {' or '.join(keys)} dataset (found {', '.join(list(handle)[:6])})")
            volume = handle[key]
            if volume.ndim != 3:
                raise UserError(f"{path}: {key} is {volume.ndim}-D, expected [slices, H, W]")
            middle = volume.shape[0] // 2
            image = np.asarray(volume[middle], dtype=np.float64)
            scale = float(handle.attrs.get("max", 0.0)) or float(np.max(volume))
        if image.shape[0] < h or image.shape[1] < w:
            continue
        top, left = (image.shape[0] - h) // 2, (image.shape[1] - w) // 2
        hr = np.clip(image[top:top + h, left:left + w] / scale, 0.0, 1.0)
        lr = np.clip(degrade.kspace_down(hr), 0.0, 1.0)
        yield lr, hr, {}, {"file": path.name, "dataset": key, "slice": middle, "max": scale}

