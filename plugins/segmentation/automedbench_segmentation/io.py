"""NIfTI reading and writing for staged cases (public input, private references)."""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import nibabel as nib
import numpy as np

CASES_FILE = "cases.json"
# What a NIfTI may declare before any of it is parsed by nibabel: header extensions and the gap before the
# voxels fit in MAX_HEADER_GAP bytes, the volume in MAX_VOXELS voxels (the files are agent-made).
MAX_HEADER_GAP = 1 << 20
MAX_VOXELS = 1 << 30


def precheck(path: Path) -> None:
    """Refuse a NIfTI whose header declares sizes beyond the contract, reading at most ~1 MB of it.

    nibabel trusts the header: an extension that claims gigabytes is read into memory, and a large
    `vox_offset` is decompressed and skipped byte by byte. Raises ValueError with the reason.
    """
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        head = handle.read(544)
        if len(head) < 348:
            raise ValueError("not a NIfTI file (header shorter than 348 bytes)")
        for endian in "<>":
            size = struct.unpack_from(endian + "i", head, 0)[0]
            if size in (348, 540):
                break
        else:
            raise ValueError("not a NIfTI file (bad sizeof_hdr)")
        if size == 348:
            dims = struct.unpack_from(endian + "8h", head, 40)
            offset = struct.unpack_from(endian + "f", head, 108)[0]
        else:
            dims = struct.unpack_from(endian + "8q", head, 16)
            offset = struct.unpack_from(endian + "q", head, 168)[0]
        if not 1 <= dims[0] <= 7 or any(d < 0 for d in dims[1:dims[0] + 1]):
            raise ValueError(f"invalid dimensions {dims[:dims[0] + 1] if 0 <= dims[0] <= 7 else dims}")
        voxels = 1
        for d in dims[1:dims[0] + 1]:
            voxels *= max(int(d), 1)
        if voxels > MAX_VOXELS:
            raise ValueError(f"declares {voxels} voxels (more than {MAX_VOXELS})")
        if not offset == offset or offset > size + 4 + MAX_HEADER_GAP:  # NaN or a huge gap
            raise ValueError(f"vox_offset {offset} leaves a gap larger than {MAX_HEADER_GAP} bytes")
        if len(head) > size and head[size] != 0:  # extensions: each declared size must fit before the voxels
            end = int(offset) if offset >= size + 4 else None
            if end is None:
                raise ValueError("header extensions without a vox_offset bounding them")
            blob = head[size + 4:] + handle.read(max(0, end - len(head)))
            position = 0
            while position + 8 <= end - size - 4:
                esize = struct.unpack_from(endian + "i", blob, position)[0]
                if esize == 0:  # zero padding after the last extension
                    break
                if esize < 16 or esize % 16 or position + esize > end - size - 4:
                    raise ValueError(f"header extension of {esize} bytes does not fit before the voxels")
                position += esize


def save(path: Path, data: np.ndarray, affine: np.ndarray, header=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = nib.Nifti1Image(data, affine, header)
    image.set_data_dtype(data.dtype)
    tmp = path.with_name("." + path.name + ".tmp.nii.gz")
    nib.save(image, str(tmp))
    tmp.replace(path)


def load_array(path: Path, dtype=None) -> np.ndarray:
    """The stored voxel values (no float conversion unless asked)."""
    precheck(path)
    array = np.asanyarray(nib.load(str(path)).dataobj)
    return array.astype(dtype, copy=False) if dtype is not None else array


class CaseCache:
    """Volumes of the case being evaluated, so the checker's load is reused by scoring.

    The evaluator checks and then scores one case at a time; `begin(case_id)` drops the previous
    case's volumes, so memory stays bounded by one case's files.
    """

    def __init__(self) -> None:
        self.case_id: str | None = None
        self._items: dict[tuple[str, int, int], tuple[nib.Nifti1Image, np.ndarray]] = {}

    def begin(self, case_id: str) -> None:
        if case_id != self.case_id:
            self._items.clear()
            self.case_id = case_id

    def load(self, path: Path) -> tuple[nib.Nifti1Image, np.ndarray]:
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        if key not in self._items:
            precheck(path)
            image = nib.load(str(path))
            self._items[key] = (image, np.asanyarray(image.dataobj))
        return self._items[key]


def write_case_facts(private: Path, facts: dict[str, dict]) -> None:
    (private / CASES_FILE).write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")


def read_case_facts(private: Path) -> dict[str, dict]:
    path = private / CASES_FILE
    return json.loads(path.read_text()) if path.exists() else {}
