"""Downloads written in code in the published layouts of LIDC-IDRI, DeepLesion, BraTS 2023, IXI and ChestXray14,
from the real CT, MR and radiograph images that ship with pydicom / pydicom-data (varied by flips).

The tests stage them, and the task files' rating bands were measured on them:
    python plugins/enhancement/tests/release_layouts.py TASK
"""

from __future__ import annotations

import csv
import io
import sys
import warnings
from pathlib import Path

import numpy as np

CT_SOURCES = ("explicit_VR-UN.dcm", "693_UNCR.dcm", "J2K_pixelrep_mismatch.dcm")
MR_SOURCES = ("MR2_UNCR.dcm", "MR-SIEMENS-DICOM-WithOverlays.dcm")
CXR_SOURCE = "RG1_UNCR.dcm"
_CACHE: dict[str, np.ndarray] = {}


def bundled(name: str) -> np.ndarray:
    """A pydicom-data image's values (rescale applied)."""
    if name not in _CACHE:
        import pydicom
        from pydicom.data import get_testdata_file

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ds = pydicom.dcmread(get_testdata_file(name))
        _CACHE[name] = ds.pixel_array.astype(np.float64) * float(getattr(ds, "RescaleSlope", 1) or 1) + float(
            getattr(ds, "RescaleIntercept", 0) or 0)
    return _CACHE[name]


def variant(image: np.ndarray, i: int) -> np.ndarray:
    """The i-th of four flips: case i of a layout differs from its neighbours."""
    return image[:: (-1 if i & 2 else 1), :: (-1 if i & 1 else 1)]


def resize(image: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    from skimage.transform import resize as sk_resize

    return sk_resize(image, shape, order=1, anti_aliasing=True, preserve_range=True)


def ct_slice(i: int) -> np.ndarray:
    return variant(np.clip(bundled(CT_SOURCES[i % 3]), -1024, 3071), i // 3)


def mr_slice(i: int, size: int) -> np.ndarray:
    image = bundled(MR_SOURCES[i % 2])
    return variant(resize(image, (size, size)), i // 2)


def write_dicom(path: Path, hu: np.ndarray, modality: str = "CT", instance: int = 1) -> None:
    """A CT-storage DICOM file of `hu` (int16 pixels, rescale intercept -1024, 0.7 mm pixels)."""
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = CTImageStorage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = Dataset()
    ds.file_meta = meta
    ds.SOPClassUID, ds.SOPInstanceUID, ds.Modality = CTImageStorage, meta.MediaStorageSOPInstanceUID, modality
    ds.Rows, ds.Columns = hu.shape
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
    ds.RescaleSlope, ds.RescaleIntercept = 1, -1024
    ds.PixelSpacing = [0.7, 0.7]
    ds.InstanceNumber = instance
    ds.PixelData = np.rint(hu + 1024).astype(np.int16).tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.save_as(path, enforce_file_format=True)


def write_png(path: Path, values: np.ndarray, bits: int) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    dtype = np.uint16 if bits == 16 else np.uint8
    Image.fromarray(np.rint(values).astype(dtype)).save(path, format="PNG")


def write_nifti(path: Path, volume: np.ndarray) -> None:
    import nibabel as nib

    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(volume.astype(np.float32), np.eye(4)), str(path))


# ---------------------------------------------------------------- the five layouts


def write_lidc(src: Path, n: int) -> None:
    """Per patient: a 3-file CT series (the middle file is the real slice) and a 1-file radiograph series."""
    for i in range(n):
        patient = src / "LIDC-IDRI" / f"LIDC-IDRI-{i + 1:04d}" / "01-01-2000-NA-NA-30178"
        series = patient / "3000566.000000-NA-03192"
        series.mkdir(parents=True, exist_ok=True)
        (series / "1-001.dcm").write_bytes(b"never read")
        write_dicom(series / "1-002.dcm", ct_slice(i))
        (series / "1-003.dcm").write_bytes(b"never read")
        write_dicom(patient / "3000923.000000-NA-62357" / "1-1.dcm", np.zeros((64, 64)), modality="DX")


def write_deeplesion(src: Path, n: int) -> list[dict[str, str]]:
    rows = []
    for i in range(n):
        name = f"{i + 1:06d}_01_01"
        write_png(src / "Images_png" / name / "105.png", ct_slice(i) + 32768, 16)
        rows.append({"File_name": f"{name}_105.png", "Patient_index": str(i + 1), "Study_index": "1",
                     "Series_ID": "1", "Key_slice_index": "105", "Spacing_mm_px_": "0.7, 0.7, 5",
                     "Image_size": "512, 512", "Train_Val_Test": "3", "Possibly_noisy": "0"})
    rows.append({**rows[0], "File_name": "000001_01_02_010.png", "Train_Val_Test": "1"})  # train split: skipped
    rows.append({**rows[0], "File_name": "900000_01_01_010.png", "Patient_index": "900000", "Possibly_noisy": "1"})
    with (src / "DL_info.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows


def write_brats(src: Path, n: int) -> None:
    root = src / "ASNR-MICCAI-BraTS2023-GLI-Challenge-TrainingData"
    for i in range(n):
        case = f"BraTS-GLI-{i:05d}-000"
        volume = np.stack([mr_slice(i + 1, 240) * 0.5, mr_slice(i, 240), mr_slice(i + 1, 240)], axis=2)
        write_nifti(root / case / f"{case}-t1c.nii.gz", volume)
        (root / case / f"{case}-t2w.nii.gz").write_bytes(b"never read")


def write_ixi(src: Path, n: int) -> None:
    src.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        volume = np.stack([mr_slice(i + 1, 256) * 0.5, mr_slice(i, 256), mr_slice(i + 1, 256)], axis=2)
        write_nifti(src / f"IXI{i + 2:03d}-Guys-{828 + i:04d}-T1.nii.gz", volume)
    (src / "IXI002-Guys-0828-T2.nii.gz").write_bytes(b"never read")


def cxr_image(i: int) -> np.ndarray:
    """A 1024x1024 8-bit PA chest: a crop of the bundled CR chest (offsets vary), windowed to 0..255."""
    image = bundled(CXR_SOURCE)
    offsets = [(0, 0), (120, 60), (60, 120), (200, 0)]
    top, left = offsets[(i // 4) % 4]
    crop = image[top:top + 1700, left:left + 1700]
    lo, hi = np.percentile(crop, [0.5, 99.5])
    return variant(np.clip((resize(crop, (1024, 1024)) - lo) / (hi - lo), 0, 1) * 255, i)


def write_cxr(src: Path, n: int) -> None:
    names = [f"{i + 1:08d}_000.png" for i in range(n)]
    for i, name in enumerate(names):
        write_png(src / "images" / name, cxr_image(i), 8)
    write_png(src / "images" / "99999999_000.png", cxr_image(0), 8)  # not in test_list.txt
    write_png(src / "images" / "99999998_000.png", cxr_image(1), 8)  # an AP view
    (src / "test_list.txt").write_text("\n".join([*names, "99999998_000.png"]) + "\n")
    with (src / "Data_Entry_2017.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["Image Index", "Finding Labels", "Follow-up #", "Patient ID", "Patient Age",
                         "Patient Gender", "View Position"])
        for i, name in enumerate(names):
            writer.writerow([name, "No Finding", 0, i + 1, 50, "M", "PA"])
        writer.writerow(["99999998_000.png", "No Finding", 0, 99, 50, "F", "AP"])


WRITERS = {"enhancement/lidc-idri-denoising": write_lidc, "enhancement/deeplesion-denoising": write_deeplesion,
           "enhancement/brats-t1c-sr": write_brats, "enhancement/ixi-t1-sr": write_ixi,
           "enhancement/nih-cxr-sr": write_cxr}


def main(argv: list[str]) -> int:
    """Write TASK's layout (full size), stage it, print the classical baselines and the bands."""
    import tempfile

    from automedbench.testing import load_task, stage_from_folder
    from automedbench_enhancement.baselines import bands, measure

    task_id = argv[0]
    track, task = load_task(task_id)
    with tempfile.TemporaryDirectory() as tmp:
        WRITERS[task_id](Path(tmp) / "download", task.case_count)
        staged = stage_from_folder(track, task, Path(tmp) / "root", Path(tmp) / "download")
        table = measure(task, staged)
    out = io.StringIO()
    for name, row in sorted(table.items(), key=lambda kv: kv[1]["ssim"]):
        out.write(f"{name:12s} SSIM {row['ssim']:.4f}  PSNR {row['psnr']:.2f} dB\n")
    b = bands(table)
    out.write(f"rating: {{good: {b['good']}, okay: {b['okay']}, floor: {b['floor']}, min_valid: {b['min_valid']}}}\n")
    print(out.getvalue(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
