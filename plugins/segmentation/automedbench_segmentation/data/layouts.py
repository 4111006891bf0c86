"""Where each dataset's official download keeps its images and references.

Each `find_*` turns a download folder into a sorted list of `SourceCase`s and says in one line what
is missing when the folder does not look like the dataset. Reading and converting the references is
`stagers.py`'s job; nothing here opens a volume.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from attrs import Factory, define
from automedbench.api import UserError


@define
class SourceCase:
    """One case of a download: its image and the reference file(s) by role."""

    source_id: str
    image: Path
    references: dict[str, Path] = Factory(dict)
    problem: str = ""  # why the case cannot be used (missing file ...), empty when usable
    inputs: dict[str, Path] = Factory(dict)  # further public input files by staged name (MSD Prostate's ADC)


def _visible(paths) -> list[Path]:
    """Drop macOS resource forks (`._liver_0.nii.gz`, shipped inside the MSD tarballs) and hidden files."""
    return [p for p in paths if not p.name.startswith(".")]


def _natural(name: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def find_kits19(source: Path) -> list[SourceCase]:
    """KiTS19: `[data/]case_XXXXX/imaging.nii.gz` + `segmentation.nii.gz` (1 kidney, 2 tumour)."""
    root = source / "data" if (source / "data").is_dir() and not any(source.glob("case_*")) else source
    folders = sorted(p for p in _visible(root.glob("case_*")) if p.is_dir())
    if not folders:
        raise UserError(f"{source}: no KiTS19 case folders; expected case_XXXXX/imaging.nii.gz and "
                        "case_XXXXX/segmentation.nii.gz (in SOURCE or SOURCE/data)")
    cases = []
    for folder in folders:
        image, seg = folder / "imaging.nii.gz", folder / "segmentation.nii.gz"
        missing = [p.name for p in (image, seg) if not p.is_file()]
        problem = f"missing {', '.join(missing)}" if missing else ""
        cases.append(SourceCase(folder.name, image, {"labels": seg}, problem))
    return cases


def _pants_pairs(root: Path) -> list[tuple[str, Path, Path]]:
    """(case id, image folder, label folder) for the split layout and for per-case folders."""
    pairs = []
    for split in ("Tr", "Te"):
        images, labels = root / f"Image{split}", root / f"Label{split}"
        if images.is_dir():
            pairs += [(p.name, p, labels / p.name) for p in _visible(images.iterdir()) if p.is_dir()]
    if not pairs:  # PanTSMini / AbdomenAtlas style: CASE/ct.nii.gz beside CASE/segmentations/
        pairs = [(p.name, p, p) for p in _visible(root.iterdir()) if p.is_dir() and (p / "ct.nii.gz").exists()]
    return sorted(pairs, key=lambda t: _natural(t[0]))


def find_pants(source: Path, structures: list[str]) -> list[SourceCase]:
    """PanTS: `ImageTr/PanTS_X/ct.nii.gz` + `LabelTr/PanTS_X/segmentations/<structure>.nii.gz`."""
    root = source / "data" if (source / "data").is_dir() and not (source / "ImageTr").is_dir() else source
    pairs = _pants_pairs(root)
    if not pairs:
        raise UserError(f"{source}: no PanTS cases; expected ImageTr/PanTS_XXXXXXXX/ct.nii.gz with "
                        "LabelTr/PanTS_XXXXXXXX/segmentations/*.nii.gz (or CASE/ct.nii.gz + CASE/segmentations/)")
    cases = []
    for case_id, image_dir, label_dir in pairs:
        image = image_dir / "ct.nii.gz"
        refs = {name: label_dir / "segmentations" / f"{name}.nii.gz" for name in structures}
        missing = ([] if image.is_file() else ["ct.nii.gz"]) + [
            f"segmentations/{p.name}" for p in refs.values() if not p.is_file()]
        if not image.is_file() and (image_dir / "ct.npz").exists():
            missing = ["ct.nii.gz (this copy has ct.npz: convert the NumPy release to NIfTI first)"]
        cases.append(SourceCase(case_id, image, refs, f"missing {', '.join(missing)}" if missing else ""))
    return cases


def find_feta(source: Path) -> list[SourceCase]:
    """FeTA (BIDS): `sub-XXX/anat/sub-XXX_*_T2w.nii.gz` + `sub-XXX_*_dseg.nii.gz` (labels 1-7)."""
    subjects = [p for p in _visible(source.glob("sub-*")) if p.is_dir()]
    if not subjects:  # the release unpacks into one folder (feta_2.x/) holding the subjects
        subjects = [p for p in _visible(source.glob("*/sub-*")) if p.is_dir()]
    if not subjects:
        raise UserError(f"{source}: no FeTA subjects; expected sub-XXX/anat/sub-XXX_*_T2w.nii.gz and "
                        "sub-XXX_*_dseg.nii.gz (in SOURCE or one folder below it)")
    cases = []
    for subject in sorted(subjects, key=lambda p: _natural(p.name)):
        t2w = sorted(_visible((subject / "anat").glob("*_T2w.nii.gz")))
        dseg = sorted(_visible((subject / "anat").glob("*_dseg.nii.gz")))
        missing = [what for what, found in (("anat/*_T2w.nii.gz", t2w), ("anat/*_dseg.nii.gz", dseg)) if not found]
        problem = f"missing {', '.join(missing)}" if missing else ""
        image = t2w[0] if t2w else subject / "anat" / f"{subject.name}_T2w.nii.gz"
        label = dseg[0] if dseg else subject / "anat" / f"{subject.name}_dseg.nii.gz"
        cases.append(SourceCase(subject.name, image, {"labels": label}, problem))
    return cases


def finder(stager: str, params: dict) -> Callable[[Path], list[SourceCase]]:
    if stager == "kits19":
        return find_kits19
    if stager == "feta":
        return find_feta
    if stager == "msd":
        from .msd import find_msd

        return lambda source: find_msd(source, params)
    if stager == "pants":
        names = sorted({*params["organ_structures"], *params["lesion_structures"]})
        return lambda source: find_pants(source, names)
    if stager == "pants_multilabel":
        names = sorted({n for group in params["structures"].values() for n in group})
        return lambda source: find_pants(source, names)
    if stager == "totalsegmentator":
        from .totalsegmentator import find_totalsegmentator

        names = sorted({n for group in params["structures"].values() for n in group})
        return lambda source: find_totalsegmentator(source, names)
    if stager == "aeropath":
        from .aeropath import find_aeropath

        return find_aeropath
    if stager == "panther":
        from .panther import find_panther

        return find_panther
    raise UserError(f"unknown stager {stager!r} (known: kits19, msd, pants, pants_multilabel, feta, "
                    "totalsegmentator, aeropath, panther)")
