"""Stagers for the full release's five further enhancement tasks, each from its dataset's published layout.

Low-dose CT denoising (the LDCT recipe): a full-dose slice is the reference, the input is that slice plus
the documented noise model of `degrade.low_dose` (default: image-domain noise with a filtered
back-projection power spectrum, `sigma_hu` inside the body and 0.4 of it in air), each case's noise drawn
from the staging's secret (never from a seed anyone can read: the noise cannot be recomputed and subtracted).
Every stager tries its candidates (patients, rows, volumes, images) in the staging's secret order: which
ones are staged is secret too, and no case follows the download's own numbering.
- LIDC-IDRI (TCIA, NBIA download): `LIDC-IDRI/LIDC-IDRI-NNNN/<study>/<series>/*.dcm`; per patient the
  series folder with the most files (the CT; LIDC also holds radiograph series) and its middle file by
  name (NBIA names slices in instance order), kept when it is a 512x512 CT slice.
- NIH DeepLesion: `DL_info.csv` + `Images_png/<patient>_<study>_<series>/<slice>.png` (16-bit, HU =
  value - 32768); the key slices of the official test split (`Train_Val_Test` 3) not flagged
  `Possibly_noisy`, 512x512, one per patient, in file-name order.
MRI x2 super-resolution (k-space truncation as `mri-sr`): the reference is a slice divided by the volume's
99.5th percentile of non-zero voxels and clipped to [0, 1]; the input keeps the central half of its k-space.
- BraTS 2023 GLI: `BraTS-GLI-NNNNN-NNN/BraTS-GLI-NNNNN-NNN-t1c.nii.gz` (240x240x155); the middle axial slice.
- IXI T1: `IXINNN-<site>-NNNN-T1.nii.gz` (256x256x~150); the middle slice of the last axis, centre-cropped.
Radiograph x2 super-resolution:
- NIH ChestXray14: `images/NNNNNNNN_NNN.png` (1024x1024, 8-bit; the Kaggle copy's `images_0NN/images/`
  too), `test_list.txt` and `Data_Entry_2017.csv` when present (test split, PA views). Reference = the
  image / 255 averaged over 2x2 blocks (512x512); input = the reference averaged over 2x2 blocks again
  (256x256), i.e. a detector with twice the pixel pitch.

Everything is read through the API's untrusted-download layer: no-follow bounded reads, bounded gunzip,
image dimensions checked before pixels are decoded, record paths that leave the dataset refused.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import (
    StagedData,
    StagingSecret,
    TaskSpec,
    UserError,
    gunzip,
    read_download_bytes,
    read_download_text,
)

from .. import contract
from . import degrade

DICOM_MAX_BYTES = 64 << 20
NIFTI_MAX_BYTES = 1 << 30
PNG_MAX_BYTES = 32 << 20
TABLE_MAX_BYTES = 256 << 20
MAX_PIXELS = 4096 * 4096
HU_CLIP = (-1024.0, 3071.0)
Case = tuple[np.ndarray, np.ndarray, dict[str, Any], dict[str, Any]]


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def _visible_dirs(folder: Path) -> list[Path]:
    return sorted((p for p in folder.iterdir() if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")),
                  key=lambda p: _natural(p.name)) if folder.is_dir() else []


# ---------------------------------------------------------------- readers (untrusted bytes in, arrays out)


def read_dicom(path: Path) -> tuple[np.ndarray, Any]:
    """(values with the rescale applied, the dataset) of one DICOM file, read no-follow and bounded."""
    import pydicom

    data = read_download_bytes(path, DICOM_MAX_BYTES)
    try:
        ds = pydicom.dcmread(io.BytesIO(data), force=True)
        rows, cols = int(ds.Rows), int(ds.Columns)
        if rows * cols > MAX_PIXELS:
            raise ValueError(f"{rows}x{cols} pixels")
        pixels = ds.pixel_array.astype(np.float64)
    except Exception as exc:  # pydicom raises many types on a damaged file
        raise ValueError(f"{path.name}: not a readable DICOM image ({type(exc).__name__}: {str(exc)[:80]})") from None
    slope = float(getattr(ds, "RescaleSlope", 1) or 1)
    return pixels * slope + float(getattr(ds, "RescaleIntercept", 0) or 0), ds


def read_png(path: Path) -> np.ndarray:
    """A PNG's pixels (grey; RGB/RGBA reduced to grey), dimensions checked before decoding."""
    from PIL import Image

    data = read_download_bytes(path, PNG_MAX_BYTES)
    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.width * image.height > MAX_PIXELS:
                raise ValueError(f"{image.width}x{image.height} pixels")
            if image.mode in ("RGB", "RGBA", "LA", "P"):
                image = image.convert("L")
            return np.asarray(image, dtype=np.float64)
    except Exception as exc:  # PIL raises many types on a damaged file
        raise ValueError(f"{path.name}: not a readable PNG ({type(exc).__name__}: {str(exc)[:80]})") from None


def read_nifti(path: Path) -> np.ndarray:
    """A NIfTI volume's voxels (scaled), read no-follow and bounded, gunzipped bounded."""
    import nibabel as nib

    raw = read_download_bytes(path, NIFTI_MAX_BYTES)
    data = gunzip(raw, str(path), NIFTI_MAX_BYTES) if raw[:2] == b"\x1f\x8b" else raw
    try:
        return np.asarray(nib.Nifti1Image.from_bytes(data).get_fdata(dtype=np.float32))
    except Exception as exc:  # nibabel raises many types on a damaged header
        raise ValueError(f"{path.name}: not a readable NIfTI-1 volume ({type(exc).__name__})") from None


def read_table(path: Path, delimiter: str = ",") -> list[dict[str, str]]:
    text = read_download_text(path, TABLE_MAX_BYTES)
    try:
        return [{(k or "").strip(): (v or "").strip() for k, v in row.items() if not isinstance(v, list)}
                for row in csv.DictReader(io.StringIO(text), delimiter=delimiter)]
    except csv.Error as exc:
        raise UserError(f"{path}: not a readable table ({exc})") from None


def _inside(root: Path, rel: str, what: str) -> Path:
    parts = Path(rel).parts
    if not rel or Path(rel).is_absolute() or ".." in parts or "\0" in rel:
        raise UserError(f"{what}: path {rel[:80]!r} leaves the dataset folder")
    return root.joinpath(*parts)


# ---------------------------------------------------------------- degradations and normalisation


def low_dose(task: TaskSpec, ref: np.ndarray, seed: int, pixel_mm: float) -> np.ndarray:
    """The reference plus the task's noise model, drawn with `seed` (one the staging's secret gave this case)."""
    return degrade.low_dose(ref, task.params, seed, pixel_mm)


def unit_scale(volume: np.ndarray) -> float:
    """The 99.5th percentile of the non-zero voxels: an MR volume's intensity scale, robust to a few hot voxels."""
    nonzero = volume[volume > 0]
    return float(np.percentile(nonzero, 99.5)) if nonzero.size else 0.0


def bin2(image: np.ndarray) -> np.ndarray:
    """The mean of each 2x2 block (what a detector with twice the pixel pitch records)."""
    h, w = image.shape[0] // 2 * 2, image.shape[1] // 2 * 2
    return image[:h, :w].reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))


def centre_crop(image: np.ndarray, shape: tuple[int, int]) -> np.ndarray | None:
    h, w = shape
    if image.shape[0] < h or image.shape[1] < w:
        return None
    top, left = (image.shape[0] - h) // 2, (image.shape[1] - w) // 2
    return image[top:top + h, left:left + w]


def sr_pair(task: TaskSpec, hr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(input, reference): k-space truncation, or 2x2 binning for radiographs (`resample: binning`)."""
    hr = np.clip(hr, 0.0, 1.0)
    low = bin2(hr) if task.params.get("resample") == "binning" else degrade.kspace_down(hr)
    return np.clip(low, 0.0, 1.0), hr


# ---------------------------------------------------------------- LIDC-IDRI


def lidc_patients(source: Path) -> list[Path]:
    root = source / "LIDC-IDRI" if (source / "LIDC-IDRI").is_dir() else source
    patients = [p for p in _visible_dirs(root) if re.fullmatch(r"LIDC-IDRI-\d{4}", p.name)]
    if not patients:
        raise UserError(f"{source}: no LIDC-IDRI-NNNN patient folders (expected the NBIA download: "
                        "LIDC-IDRI/LIDC-IDRI-NNNN/<study>/<series>/*.dcm)")
    return patients


def _series_folders(patient: Path) -> list[tuple[Path, list[str]]]:
    """(folder, its .dcm entry names) for every folder below the patient (two levels: study, series); folder
    links are not followed, file links are listed so that reading one stops staging with one line."""
    found = []
    for study in _visible_dirs(patient):
        for series in [study, *_visible_dirs(study)]:
            names = sorted((e.name for e in os.scandir(series) if e.name.lower().endswith(".dcm")
                            and (e.is_file(follow_symlinks=False) or e.is_symlink())), key=_natural)
            if names:
                found.append((series, names))
    return found


def lidc_cases(task: TaskSpec, patients: list[Path], secret: StagingSecret) -> Iterator[Case]:
    shape = contract.output_shape(task)
    for patient in secret.shuffled(patients, "patients"):
        series = _series_folders(patient)
        if not series:
            continue
        folder, names = max(series, key=lambda s: len(s[1]))
        path = folder / names[len(names) // 2]
        try:
            hu, ds = read_dicom(path)
        except ValueError:
            continue
        if str(getattr(ds, "Modality", "")) != "CT" or hu.shape != shape:
            continue
        ref = np.clip(hu, *HU_CLIP)
        pixel_mm = float(ds.PixelSpacing[0]) if "PixelSpacing" in ds else 0.7
        seed = secret.seed(f"noise/{patient.name}")
        yield (low_dose(task, ref, seed, pixel_mm), ref, {"pixel_spacing_mm": pixel_mm},
               {"patient": patient.name, "series": folder.name, "file": path.name, "noise_seed": seed})


# ---------------------------------------------------------------- DeepLesion


DL_COLUMNS = ("File_name", "Patient_index", "Train_Val_Test")


def deeplesion_rows(source: Path, task: TaskSpec) -> list[dict[str, str]]:
    info = source / "DL_info.csv"
    if not (source / "Images_png").is_dir() or not (info.exists() or info.is_symlink()):
        raise UserError(f"{source}: not a DeepLesion folder; expected DL_info.csv and "
                        "Images_png/<patient>_<study>_<series>/<slice>.png")
    rows = read_table(info)
    missing = [c for c in DL_COLUMNS if rows and c not in rows[0]]
    if not rows or missing:
        raise UserError(f"{info}: needs columns {', '.join(DL_COLUMNS)}; missing {', '.join(missing) or 'every row'}")
    split = str(task.params.get("split", "3"))
    keep, seen = [], set()
    for row in sorted(rows, key=lambda r: _natural(r["File_name"])):
        if row["Train_Val_Test"] != split or row.get("Possibly_noisy", "0") not in ("0", ""):
            continue
        if row["Patient_index"] in seen:
            continue
        seen.add(row["Patient_index"])
        keep.append(row)
    return keep


def deeplesion_cases(task: TaskSpec, source: Path, rows: list[dict[str, str]],
                     secret: StagingSecret) -> Iterator[Case]:
    shape = contract.output_shape(task)
    for row in secret.shuffled(rows, "rows"):
        name = row["File_name"]
        match = re.fullmatch(r"(\d+_\d+_\d+)_(\d+)\.png", name)
        if match is None:
            raise UserError(f"DL_info.csv: File_name {name[:80]!r} is not <patient>_<study>_<series>_<slice>.png")
        path = _inside(source / "Images_png", f"{match[1]}/{int(match[2]):03d}.png", "DL_info.csv")
        if not path.exists() and not path.is_symlink():
            continue
        try:
            pixels = read_png(path)
        except ValueError:
            continue
        if pixels.shape != shape or pixels.max(initial=0) <= 255:  # 8-bit: not DeepLesion's 16-bit HU + 32768
            continue
        ref = np.clip(pixels - 32768.0, *HU_CLIP)
        spacing = re.findall(r"[\d.]+", row.get("Spacing_mm_px_", ""))
        pixel_mm = float(spacing[0]) if spacing else 0.7
        seed = secret.seed(f"noise/{name}")
        yield (low_dose(task, ref, seed, pixel_mm), ref, {"pixel_spacing_mm": pixel_mm},
               {"file": name, "noise_seed": seed})


# ---------------------------------------------------------------- BraTS 2023 and IXI (MRI)


def brats_files(source: Path) -> list[Path]:
    folders = [p for p in _visible_dirs(source) if p.name.startswith("BraTS-")]
    if not folders:
        below = [p for d in _visible_dirs(source) for p in _visible_dirs(d) if p.name.startswith("BraTS-")]
        folders = sorted(below, key=lambda p: _natural(p.name))
    if not folders:
        raise UserError(f"{source}: no BraTS-GLI-NNNNN-NNN case folders (expected <case>/<case>-t1c.nii.gz, "
                        "in SOURCE or one folder below it)")
    return [f / f"{f.name}-t1c.nii.gz" for f in folders]


def ixi_files(source: Path) -> list[Path]:
    files = sorted((p for p in source.glob("IXI*-T1.nii.gz") if not p.name.startswith(".")),
                   key=lambda p: _natural(p.name))
    if not files:
        raise UserError(f"{source}: no IXI T1 volumes (expected IXINNN-<site>-NNNN-T1.nii.gz, the unpacked IXI-T1.tar)")
    return files


def mri_cases(task: TaskSpec, files: list[Path], secret: StagingSecret) -> Iterator[Case]:
    shape = contract.output_shape(task)
    axis = int(task.params.get("slice_axis", 2))
    for path in secret.shuffled(files, "volumes"):
        if not path.exists() and not path.is_symlink():
            continue  # a BraTS case without its t1c file
        try:
            volume = read_nifti(path)
        except ValueError:
            continue
        if volume.ndim != 3:
            continue
        scale = unit_scale(volume)
        middle = volume.shape[axis] // 2
        image = centre_crop(np.take(volume, middle, axis=axis).astype(np.float64), shape)
        if image is None or scale <= 0:
            continue
        low, ref = sr_pair(task, image / scale)
        yield low, ref, {}, {"file": path.name, "slice": middle, "axis": axis, "scale": scale}


# ---------------------------------------------------------------- NIH ChestXray14


def cxr_images(source: Path) -> dict[str, Path]:
    """Image name -> path over `images/` and the Kaggle copy's `images_0NN/images/`."""
    folders = [source / "images", *(d / "images" for d in _visible_dirs(source) if d.name.startswith("images_"))]
    found: dict[str, Path] = {}
    for folder in folders:
        if folder.is_dir() and not folder.is_symlink():
            for entry in os.scandir(folder):
                if entry.name.endswith(".png") and not entry.name.startswith("."):
                    found.setdefault(entry.name, folder / entry.name)
    if not found:
        raise UserError(f"{source}: no ChestXray14 images (expected images/NNNNNNNN_NNN.png or "
                        "images_0NN/images/*.png)")
    return found


def cxr_selection(source: Path, images: dict[str, Path]) -> list[Path]:
    names = sorted(images, key=_natural)
    tests = source / "test_list.txt"
    if tests.exists() or tests.is_symlink():
        listed = {line.strip() for line in read_download_text(tests, TABLE_MAX_BYTES).splitlines() if line.strip()}
        names = [n for n in names if n in listed]
    entries = source / "Data_Entry_2017.csv"
    if entries.exists() or entries.is_symlink():
        views = {r.get("Image Index", ""): r.get("View Position", "") for r in read_table(entries)}
        names = [n for n in names if views.get(n, "PA") == "PA"]
    return [images[n] for n in names]


def cxr_cases(task: TaskSpec, files: list[Path], secret: StagingSecret) -> Iterator[Case]:
    full = tuple(2 * s for s in contract.output_shape(task))
    for path in secret.shuffled(files, "images"):
        try:
            pixels = read_png(path)
        except ValueError:
            continue
        if pixels.shape != full or pixels.max(initial=0) > 255:
            continue
        low, ref = sr_pair(task, bin2(pixels / 255.0))
        yield low, ref, {}, {"file": path.name}


# ---------------------------------------------------------------- dispatch


def stage_release(task: TaskSpec, dest: Path, source: Path) -> StagedData:
    from .stagers import _stage

    stager = task.params["stager"]
    if stager == "lidc_idri":
        patients = lidc_patients(source)
        return _stage(task, dest, source, lambda t, secret: lidc_cases(t, patients, secret))
    if stager == "deeplesion":
        rows = deeplesion_rows(source, task)
        return _stage(task, dest, source, lambda t, secret: deeplesion_cases(t, source, rows, secret))
    if stager in ("brats_t1c", "ixi_t1"):
        files = brats_files(source) if stager == "brats_t1c" else ixi_files(source)
        return _stage(task, dest, source, lambda t, secret: mri_cases(t, files, secret))
    if stager == "chestxray14":
        files = cxr_selection(source, cxr_images(source))
        return _stage(task, dest, source, lambda t, secret: cxr_cases(t, files, secret))
    raise UserError(f"task {task.id}: unknown stager {stager!r} "
                    "(lidc_idri, deeplesion, brats_t1c, ixi_t1, chestxray14)")
