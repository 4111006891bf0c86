"""Writing a staging: NIfTI cases into an `automedbench.api.staging_area`, swapped in only when complete.

Per case, public/<id>/ holds what the agent reads (the degraded `ct.nii.gz`, or `mr.nii.gz` and
`mask.nii.gz`); private/<id>/ holds the target CT (`target.nii.gz`, int16 HU) and, for MRI -> CT, the mask
the scorer uses. private/cases.json stores each case's facts, among them the SSIM the unchanged input
scores (`ssim_identity`): the number "gain over input" and the rating's input floor are measured against.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import StagedData, StagingArea, TaskSpec, staging_area

TARGET = "target.nii.gz"


class Unscorable(ValueError):
    """A case no submission could score: the target against itself does not score exactly 1.0."""

MASK = "scoring_mask.nii.gz"
FACTS = "cases.json"


def save_nifti(path: Path, volume: np.ndarray, affine: np.ndarray) -> None:
    import nibabel as nib

    path.parent.mkdir(parents=True, exist_ok=True)
    image = nib.Nifti1Image(volume, affine)
    image.set_data_dtype(volume.dtype)
    image.header.set_xyzt_units("mm")
    nib.save(image, str(path))


def to_int16_hu(volume: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(volume), -32768, 32767).astype(np.int16)


class Staging:
    """Collects cases in a staging area; `commit` swaps them in, so a failed staging leaves the old one."""

    def __init__(self, task: TaskSpec, area: StagingArea) -> None:
        self.task, self.area = task, area
        self.case_ids: list[str] = []
        self.facts: dict[str, dict[str, Any]] = {}

    def add(self, case_id: str, target: np.ndarray, affine: np.ndarray, source: dict[str, Any],
            mr: np.ndarray | None = None, mask: np.ndarray | None = None) -> None:
        """One case: the target CT in HU; CT-SR derives the input by the z degradation, MRI -> CT passes mr + mask."""
        from ..axialssim import WIN
        from ..metric import axial_ssim
        from .degrade import z_linear

        pub, priv = self.area.public / case_id, self.area.private / case_id
        target16 = to_int16_hu(target)
        mask8 = None if mask is None else (np.asarray(mask) > 0).astype(np.uint8)
        where = source.get("source", case_id)
        if min(target16.shape[:2]) < WIN:
            raise Unscorable(f"{where}: axial planes of {target16.shape[0]}x{target16.shape[1]} voxels, smaller "
                             f"than the SSIM window ({WIN}): no submission could score it")
        perfect = axial_ssim(target16, target16, mask8)["ssim"]
        if perfect != 1.0:  # an empty mask, a plane the metric cannot score: the perfect output would not score 1
            raise Unscorable(f"{where}: the target against itself scores {perfect}, not 1.0: no submission "
                             "could score it")
        save_nifti(priv / TARGET, target16, affine)
        if self.task.params["kind"] == "ctsr":
            low = z_linear(target16, int(self.task.params["scale"]))
            save_nifti(pub / self.task.input_files[0], low, affine)
            identity = axial_ssim(target16, low)["ssim"]
        else:
            assert mr is not None and mask8 is not None
            save_nifti(pub / "mr.nii.gz", np.asarray(mr, dtype=np.float32), affine)
            save_nifti(pub / "mask.nii.gz", mask8, affine)
            save_nifti(priv / MASK, mask8, affine)
            identity = axial_ssim(target16, mr, mask8)["ssim"]
        self.case_ids.append(case_id)
        self.facts[case_id] = {"ssim_identity": identity, "shape": list(target.shape), **source}

    def commit(self, **manifest: Any) -> StagedData:
        record = {"task": self.task.id, **manifest, "cases": self.facts}
        (self.area.private / FACTS).write_text(json.dumps(record, indent=2, default=str) + "\n")
        return self.area.commit(self.case_ids)


@contextmanager
def staging(task: TaskSpec, dest: Path) -> Iterator[Staging]:
    """A fresh staging area (`automedbench.api.staging_area`): a half-made staging never replaces the old one."""
    with staging_area(dest) as area:
        yield Staging(task, area)


def read_facts(private: Path) -> dict[str, dict[str, Any]]:
    path = private / FACTS
    return json.loads(path.read_text())["cases"] if path.exists() else {}


def load_private(private: Path, case_id: str) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """(target CT as float32 HU, mask or None, affine) of one staged case (harness-written files)."""
    import nibabel as nib

    image = nib.load(str(private / case_id / TARGET))
    target = np.asarray(image.dataobj, dtype=np.float32)
    mask_path = private / case_id / MASK
    mask = np.asarray(nib.load(str(mask_path)).dataobj) if mask_path.exists() else None
    return target, mask, np.asarray(image.affine, dtype=np.float64)


def load_public_input(public: Path, case_id: str, name: str = "ct.nii.gz") -> np.ndarray:
    import nibabel as nib

    return np.asarray(nib.load(str(public / case_id / name)).dataobj, dtype=np.float32)
