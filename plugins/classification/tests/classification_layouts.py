"""Small files written in each dataset's official layout, for the stager tests (nothing downloaded)."""

from __future__ import annotations

import csv
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

HAM_DX = ["akiec", "bcc", "bkl", "df", "mel", "nv", "vasc"]
ISIC_COLUMNS = ["MEL", "NV", "BCC", "AKIEC", "BKL", "DF", "VASC"]
HAM_PRIOR = {"nv": 40, "mel": 12, "bkl": 12, "bcc": 8, "akiec": 8, "vasc": 7, "df": 7}
HAM_FULL = {"nv": 80, "mel": 20, "bkl": 20, "bcc": 12, "akiec": 10, "vasc": 7, "df": 7}


def _image(path: Path, seed: int, size: tuple[int, int] = (60, 45), mode: str = "RGB") -> None:
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    shape = (size[1], size[0], 3) if mode == "RGB" else (size[1], size[0])
    Image.fromarray(rng.integers(0, 255, shape).astype(np.uint8)).save(path)


def _jpeg_bytes(seed: int) -> bytes:
    import io

    rng = np.random.default_rng(seed)
    buffer = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (45, 60, 3)).astype(np.uint8)).save(buffer, format="JPEG")
    return buffer.getvalue()


def ham_rows(prior: dict[str, int] = HAM_PRIOR, repeats: int = 2) -> list[dict[str, str]]:
    """Metadata rows: `repeats` images per lesion, `prior[dx]` lesions per class."""
    rows, n = [], 0
    for dx, lesions in prior.items():
        for k in range(lesions):
            for _ in range(repeats):
                n += 1
                rows.append({"lesion_id": f"HAM_{dx}{k:05d}", "image_id": f"ISIC_{24000 + n:07d}", "dx": dx,
                             "dx_type": "histo", "age": "50.0", "sex": "male", "localization": "back"})
    return rows


def ham10000(root: Path, zipped: bool = True, prior: dict[str, int] = HAM_PRIOR, tab: bool = False) -> Path:
    """HAM10000 as the Dataverse gives it: metadata CSV (or its ingested `.tab`, tab-separated and quoted)
    and two image zips (or the JPEGs loose)."""
    root.mkdir(parents=True, exist_ok=True)
    rows = ham_rows(prior)
    name = "HAM10000_metadata.tab" if tab else "HAM10000_metadata.csv"
    with open(root / name, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter="\t" if tab else ",",
                                quoting=csv.QUOTE_NONNUMERIC if tab else csv.QUOTE_MINIMAL)
        writer.writeheader()
        writer.writerows(rows)
    half = len(rows) // 2
    for part, chunk in ((1, rows[:half]), (2, rows[half:])):
        if zipped:
            with zipfile.ZipFile(root / f"HAM10000_images_part{part}.zip", "w") as archive:
                for k, row in enumerate(chunk):
                    archive.writestr(f"{row['image_id']}.jpg", _jpeg_bytes(part * 10_000 + k))
        else:
            for k, row in enumerate(chunk):
                _image(root / f"HAM10000_images_part_{part}" / f"{row['image_id']}.jpg", part * 10_000 + k)
    return root


def isic2018(root: Path, multi_hot: bool = False) -> Path:
    """ISIC 2018 Task 3 training set: the one-hot ground-truth CSV, lesion groupings and loose JPEGs."""
    rows = ham_rows()
    gt = root / "ISIC2018_Task3_Training_GroundTruth"
    gt.mkdir(parents=True, exist_ok=True)
    with open(gt / "ISIC2018_Task3_Training_GroundTruth.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", *ISIC_COLUMNS])
        for k, row in enumerate(rows):
            hot = ["1.0" if c.lower() == row["dx"] else "0.0" for c in ISIC_COLUMNS]
            if multi_hot and k == 3:
                hot = ["1.0"] * 2 + ["0.0"] * 5
            writer.writerow([row["image_id"], *hot])
    with open(root / "ISIC2018_Task3_Training_LesionGroupings.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image", "lesion_id", "diagnosis_confirm_type"])
        for row in rows:
            writer.writerow([row["image_id"], row["lesion_id"], "histopathology"])
    for k, row in enumerate(rows):
        _image(root / "ISIC2018_Task3_Training_Input" / f"{row['image_id']}.jpg", 500 + k)
    return root


def class_folders(root: Path, split: str, folders: list[str], per_class: int, suffix: str = ".jpg",
                  mode: str = "RGB", size: tuple[int, int] = (40, 40)) -> Path:
    """`<root>/<split>/<class folder>/<n><suffix>` plus a decoy training split and macOS debris."""
    for k, folder in enumerate(folders):
        for n in range(per_class):
            _image(root / split / folder / f"{folder.lower()}-{n:04d}{suffix}", 1000 * k + n, size, mode)
        _image(root / "train" / folder / f"train-{folder}{suffix}", 99_000 + k, size, mode)
    (root / "__MACOSX" / split / folders[0]).mkdir(parents=True, exist_ok=True)
    (root / "__MACOSX" / split / folders[0] / "._x.jpg").write_bytes(b"\x00\x05\x16\x07junk")
    return root


def brain_tumour(root: Path, per_class: int = 30) -> Path:
    return class_folders(root / "brain-tumor-mri-dataset", "Testing", ["glioma", "meningioma", "notumor", "pituitary"],
                         per_class, mode="L")


def crc(root: Path, per_class: int = 22) -> Path:
    return class_folders(root, "CRC-VAL-HE-7K", ["ADI", "BACK", "DEB", "LYM", "MUC", "MUS", "NORM", "STR", "TUM"],
                         per_class, suffix=".tif", size=(32, 32))


def kermany(root: Path, per_class: int = 60) -> Path:
    return class_folders(root / "chest_xray", "test", ["NORMAL", "PNEUMONIA"], per_class, suffix=".jpeg", mode="L")


def pcam(root: Path, count: int = 240, split: str = "test") -> Path:
    import h5py

    rng = np.random.default_rng(5)
    root.mkdir(parents=True, exist_ok=True)
    stem = root / f"camelyonpatch_level_2_split_{split}"
    labels = (np.arange(count) % 3 == 0).astype(np.uint8)  # one positive in three: a balanced draw must correct it
    with h5py.File(f"{stem}_x.h5", "w") as handle:
        patches = rng.integers(0, 255, (count, 96, 96, 3)).astype(np.uint8)
        handle.create_dataset("x", data=patches, chunks=(1, 96, 96, 3))
    with h5py.File(f"{stem}_y.h5", "w") as handle:
        handle.create_dataset("y", data=labels.reshape(count, 1, 1, 1))
    return root
