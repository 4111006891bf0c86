"""PANTHER 2025 (pancreatic tumour on MRI): `.mha` download layout and the MetaImage → NIfTI conversion.

nibabel cannot read `.mha`, so the stager converts each image and label with SimpleITK (an optional
extra: `pip install "automedbench-segmentation[panther]"`) into NIfTI on the same voxel grid. ITK keeps
geometry in LPS physical coordinates, NIfTI's affine maps voxels to RAS: the affine is
diag(-1, -1, 1) · (direction · diag(spacing) | origin), so spacing, origin and direction survive.
Label values are checked here: anything but {0 background, 1 tumour, 2 pancreas} stops staging.
"""

from __future__ import annotations

import re
from pathlib import Path

import nibabel as nib
import numpy as np
from automedbench.api import UserError, check_image

from .layouts import SourceCase, _natural, _visible

LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0])
PANTHER_LABELS = {0: "background", 1: "tumour", 2: "pancreas"}
INSTALL_HINT = 'pip install "automedbench-segmentation[panther]" (SimpleITK)'


def _sitk():
    try:
        import SimpleITK as sitk
    except ImportError as exc:
        raise UserError(f"reading PANTHER .mha files needs SimpleITK: {INSTALL_HINT}") from exc
    return sitk


def itk_affine(spacing, origin, direction) -> np.ndarray:
    """The NIfTI (RAS) voxel-to-world affine of an ITK image's (LPS) spacing, origin and direction."""
    dim = len(spacing)
    rotation = np.asarray(direction, dtype=float).reshape(dim, dim)
    affine = np.eye(4)
    affine[:3, :3] = LPS_TO_RAS @ rotation @ np.diag(np.asarray(spacing, dtype=float))
    affine[:3, 3] = LPS_TO_RAS @ np.asarray(origin, dtype=float)
    return affine


def read_mha(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(voxels in NIfTI i, j, k order, RAS affine) of a 3-D scalar MetaImage."""
    sitk = _sitk()
    check_image(path, kind="mha")  # DimSize from the header before SimpleITK allocates the voxels
    try:
        image = sitk.ReadImage(str(path))
    except RuntimeError as exc:
        raise ValueError(f"{path.name}: unreadable MetaImage ({str(exc).strip().splitlines()[-1][:120]})") from exc
    if image.GetDimension() != 3 or image.GetNumberOfComponentsPerPixel() != 1:
        raise ValueError(f"{path.name}: {image.GetDimension()}-D image with "
                         f"{image.GetNumberOfComponentsPerPixel()} component(s), expected 3-D scalar")
    data = sitk.GetArrayFromImage(image).transpose(2, 1, 0)  # ITK arrays are (z, y, x)
    return np.ascontiguousarray(data), itk_affine(image.GetSpacing(), image.GetOrigin(), image.GetDirection())


def mha_to_nifti(src: Path, dest: Path, label: bool = False) -> np.ndarray:
    """Write `src` as NIfTI at `dest`; a label's values must be a subset of {0, 1, 2}. Returns the voxels."""
    data, affine = read_mha(src)
    if label:
        check_label_values(src, data)
        data = data.astype(np.uint8)
    dest.parent.mkdir(parents=True, exist_ok=True)
    image = nib.Nifti1Image(data, affine)
    image.set_data_dtype(data.dtype)
    image.set_qform(affine, code=1)
    image.set_sform(affine, code=1)
    nib.save(image, str(dest))
    return data


def check_label_values(path: Path, data: np.ndarray) -> None:
    """PANTHER labels are 0 background, 1 tumour, 2 pancreas; any other value means another label scheme."""
    values = np.unique(data)
    extra = [v for v in values.tolist() if v not in PANTHER_LABELS]
    if extra:
        shown = ", ".join(f"{v:g}" for v in extra[:5])
        raise UserError(f"{path}: label values {shown} are not PANTHER's 0 background, 1 tumour, 2 pancreas; "
                        "refusing to stage a different label scheme")


def _root(source: Path) -> Path:
    """The folder holding ImagesTr/ and LabelsTr/: SOURCE itself or the one folder below it that does."""
    if (source / "ImagesTr").is_dir():
        return source
    below = sorted(p for p in _visible(source.iterdir()) if (p / "ImagesTr").is_dir()) if source.is_dir() else []
    if len(below) == 1:
        return below[0]
    where = f" (several: {', '.join(p.name for p in below)}; pass one)" if below else ""
    raise UserError(f"{source}: not a PANTHER folder; expected ImagesTr/<id>_0000.mha and LabelsTr/<id>.mha"
                    f"{where}")


IMAGE = re.compile(r"^(?P<stem>.+)_0000\.mha$")


def find_panther(source: Path) -> list[SourceCase]:
    """PANTHER task 1 (`<pid>_0001_0000.mha` → `<pid>_0001.mha`) and task 2 (`<pid>_0000.mha` → `<pid>.mha`)."""
    root = _root(source)
    labels = root / "LabelsTr"
    if not labels.is_dir():
        raise UserError(f"{root}: LabelsTr/ missing (PANTHER keeps the annotations in LabelsTr/<id>.mha)")
    images = sorted((p for p in _visible((root / "ImagesTr").iterdir()) if IMAGE.match(p.name)),
                    key=lambda p: _natural(p.name))
    if not images:
        raise UserError(f"{root / 'ImagesTr'}: no <id>_0000.mha images")
    cases = []
    for image in images:
        stem = IMAGE.match(image.name)["stem"]
        label = labels / f"{stem}.mha"
        problem = "" if label.is_file() else f"missing LabelsTr/{label.name} (unannotated)"
        cases.append(SourceCase(stem, image, {"labels": label}, problem))
    return cases


def convert_case(case: SourceCase, scratch: Path) -> SourceCase:
    """The same case with its image and label converted to NIfTI under `scratch` (deleted after staging)."""
    folder = scratch / case.source_id
    image = folder / "image.nii.gz"
    mha_to_nifti(case.image, image)
    refs = {}
    for role, path in case.references.items():
        refs[role] = folder / f"{role}.nii.gz"
        mha_to_nifti(path, refs[role], label=True)
    return SourceCase(case.source_id, image, refs, case.problem)
