"""Medical Segmentation Decathlon layout: `TaskNN_Name/dataset.json`, `imagesTr/`, `labelsTr/`.

One finder and one reader serve every MSD task (Liver, Colon, HepaticVessel, Spleen, Heart, Prostate).
The task file names the folder (`msd_task`), the file prefix (`msd_prefix`), the label names the
release's `dataset.json` must list (`msd_labels`) and the image channels (`channels`, one public input
file each: Prostate's 4-D T2 + ADC volume is split into two 3-D files on the same grid).

The download is untrusted input: `dataset.json` is read bounded and depth-limited, its `training`
paths must be `./imagesTr/<name>.nii.gz`, and every volume is read through the API's no-follow,
size-limited reader and bounded gunzip before nibabel sees a byte (a symlinked or oversized file stops
staging with one line). Single-channel images are passed on byte for byte.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
from automedbench.api import TaskSpec, UserError, gunzip, loads_json, read_download_bytes

from .layouts import SourceCase, _natural, _visible

DATASET_JSON = "dataset.json"
DATASET_JSON_MAX_BYTES = 16 << 20  # the largest release's (Task03 Liver) is ~20 kB
VOLUME_MAX_BYTES = 2 << 30  # compressed or not: MSD's largest volume (a LiTS CT) decompresses to ~0.5 GB
_TRAINING_PATH = re.compile(r"^(?:\./)?imagesTr/(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)\.nii\.gz$")


def _root(source: Path, folder: str) -> Path:
    for root in (source / folder, source):
        if (root / "imagesTr").is_dir() or (root / "labelsTr").is_dir():
            return root
    return source / folder if (source / folder).is_dir() else source


def _foreground(labels: Any) -> list[str]:
    """The foreground label names of dataset.json's `labels` ({"0": "background", "1": ...}), in key order."""
    if not isinstance(labels, dict):
        return []
    keyed = []
    for key, name in labels.items():
        if str(key).isdigit() and int(key) > 0:
            keyed.append((int(key), str(name)))
    return [name for _, name in sorted(keyed)]


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def read_dataset_json(root: Path, params: dict[str, Any]) -> list[str] | None:
    """The training case names listed in dataset.json (None when the file is absent), after checking
    that its labels and channels are this task's (a different Decathlon task is refused by name)."""
    path = root / DATASET_JSON
    if not path.exists() and not path.is_symlink():
        return None
    doc = loads_json(read_download_bytes(path, DATASET_JSON_MAX_BYTES), str(path))
    if not isinstance(doc, dict):
        raise UserError(f"{path}: not a JSON object (an MSD dataset.json has name, labels, modality, training)")
    folder = params["msd_task"]
    expected = [str(v) for _, v in sorted((int(k), v) for k, v in params["msd_labels"].items())]
    found = _foreground(doc.get("labels"))
    if [_norm(n) for n in found] != [_norm(n) for n in expected]:
        raise UserError(f"{path}: labels {found} are not {folder}'s {expected} (another Decathlon task?)")
    channels = params.get("channels", ["image"])
    modality = doc.get("modality")
    if isinstance(modality, dict) and len(modality) != len(channels):
        raise UserError(f"{path}: {len(modality)} image channel(s) {sorted(modality.values())}, "
                        f"{folder} has {len(channels)} ({', '.join(channels)})")
    training = doc.get("training")
    if not isinstance(training, list) or not training:
        raise UserError(f"{path}: no 'training' list of image/label pairs")
    names = []
    for entry in training:
        image = entry.get("image") if isinstance(entry, dict) else None
        match = _TRAINING_PATH.match(image) if isinstance(image, str) else None
        if match is None:
            raise UserError(f"{path}: training entry {str(entry)[:80]!r} is not ./imagesTr/<name>.nii.gz")
        names.append(match["name"])
    return names


def find_msd(source: Path, params: dict[str, Any]) -> list[SourceCase]:
    """The training cases (dataset.json's list when present, else `imagesTr/<prefix>_N.nii.gz`) in numeric order."""
    folder, prefix = params["msd_task"], params["msd_prefix"]
    root = _root(source, folder)
    images, labels = root / "imagesTr", root / "labelsTr"
    missing = [p.name + "/" for p in (images, labels) if not p.is_dir() or p.is_symlink()]
    if missing:
        raise UserError(f"{source}: not an MSD {folder} folder; missing {', '.join(missing)} "
                        f"(expected dataset.json, imagesTr/{prefix}_N.nii.gz and labelsTr/{prefix}_N.nii.gz)")
    names = read_dataset_json(root, params)
    if names is None:
        names = [p.name.removesuffix(".nii.gz") for p in _visible(images.glob(f"{prefix}_*.nii.gz"))]
    names = sorted(set(names), key=_natural)
    if not names:
        raise UserError(f"{images}: no {prefix}_N.nii.gz images")
    cases = []
    for name in names:
        image, label = images / f"{name}.nii.gz", labels / f"{name}.nii.gz"
        missing = [f"{p.parent.name}/{p.name}" for p in (image, label) if not (p.exists() or p.is_symlink())]
        cases.append(SourceCase(name, image, {"labels": label}, f"missing {', '.join(missing)}" if missing else ""))
    return cases


def read_volume(path: Path) -> tuple[bytes, nib.Nifti1Image]:
    """(the file's bytes, the image parsed from them): no symlink, bounded size, bounded gunzip."""
    raw = read_download_bytes(path, VOLUME_MAX_BYTES)
    data = gunzip(raw, str(path), VOLUME_MAX_BYTES) if raw[:2] == b"\x1f\x8b" else raw
    try:
        image = nib.Nifti1Image.from_bytes(data)
    except Exception as exc:  # nibabel raises many types on a corrupt header
        raise ValueError(f"{path.name}: not a readable NIfTI-1 volume ({type(exc).__name__})") from None
    return raw, image


def _save(path: Path, data: np.ndarray, affine: np.ndarray, header: Any) -> None:
    image = nib.Nifti1Image(data, affine, header)
    image.set_data_dtype(data.dtype)
    nib.save(image, str(path))


def read_case(task: TaskSpec, case: SourceCase, scratch: Path) -> SourceCase:
    """The case as safe local NIfTI files under `scratch`: channel 0 is the image, other channels are
    further inputs (named by the task's input files), the label map is the download's bytes."""
    channels = task.params.get("channels", ["image"])
    folder = scratch / case.source_id
    folder.mkdir(parents=True, exist_ok=True)
    raw, image = read_volume(case.image)
    shape = image.shape
    if len(channels) == 1:
        if len(shape) != 3:
            raise ValueError(f"{case.image.name}: {len(shape)}-D image, expected 3-D")
        (folder / "image.nii.gz").write_bytes(raw if raw[:2] == b"\x1f\x8b" else gunzip_free(raw))
        inputs: dict[str, Path] = {}
    else:
        if len(shape) != 4 or shape[3] != len(channels):
            raise ValueError(f"{case.image.name}: shape {shape}, expected 3-D x {len(channels)} channels "
                             f"({', '.join(channels)})")
        volume = np.asanyarray(image.dataobj)
        header = image.header.copy()
        header.set_data_shape(shape[:3])
        paths = [folder / "image.nii.gz", *(folder / name for name in task.input_files[1:])]
        for k, path in enumerate(paths):
            _save(path, np.ascontiguousarray(volume[..., k]), image.affine, header)
        inputs = dict(zip(task.input_files[1:], paths[1:], strict=True))
    label_raw, label = read_volume(case.references["labels"])
    if tuple(label.shape) != tuple(shape[:3]):
        raise ValueError(f"{case.references['labels'].name}: shape {label.shape} != image grid {shape[:3]}")
    (folder / "labels.nii.gz").write_bytes(label_raw if label_raw[:2] == b"\x1f\x8b" else gunzip_free(label_raw))
    return SourceCase(case.source_id, folder / "image.nii.gz", {"labels": folder / "labels.nii.gz"},
                      case.problem, inputs)


def gunzip_free(raw: bytes) -> bytes:
    """An uncompressed `.nii` stored under a `.nii.gz` name, compressed so the staged name tells the truth."""
    import gzip

    return gzip.compress(raw, compresslevel=1)
