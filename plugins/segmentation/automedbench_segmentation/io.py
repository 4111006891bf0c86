"""NIfTI reading and writing for staged cases (public input, private references)."""

from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np

CASES_FILE = "cases.json"


def save(path: Path, data: np.ndarray, affine: np.ndarray, header=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = nib.Nifti1Image(data, affine, header)
    image.set_data_dtype(data.dtype)
    tmp = path.with_name("." + path.name + ".tmp.nii.gz")
    nib.save(image, str(tmp))
    tmp.replace(path)


def load_array(path: Path, dtype=None) -> np.ndarray:
    """The stored voxel values (no float conversion unless asked)."""
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
            image = nib.load(str(path))
            self._items[key] = (image, np.asanyarray(image.dataobj))
        return self._items[key]


def write_case_facts(private: Path, facts: dict[str, dict]) -> None:
    (private / CASES_FILE).write_text(json.dumps(facts, indent=2, sort_keys=True) + "\n")


def read_case_facts(private: Path) -> dict[str, dict]:
    path = private / CASES_FILE
    return json.loads(path.read_text()) if path.exists() else {}
