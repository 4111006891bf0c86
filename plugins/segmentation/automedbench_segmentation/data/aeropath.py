"""AeroPath (airway tree on thoracic CT): `<n>/<n>_CT_HR.nii.gz` + `<n>_CT_HR_label_airways.nii.gz`.

The Zenodo archive unpacks into `AeroPath/<n>/`, the Hugging Face copy keeps cases under `data/<n>/`;
both are found. The airway label is binarised at staging (any value > 0 is airway, label 1).
"""

from __future__ import annotations

from pathlib import Path

from automedbench.api import UserError

from .layouts import SourceCase, _natural, _visible


def _case_folders(root: Path) -> list[Path]:
    return [p for p in _visible(root.iterdir()) if p.is_dir() and p.name.isdigit()] if root.is_dir() else []


def find_aeropath(source: Path) -> list[SourceCase]:
    for root in (source, source / "AeroPath", source / "data", source / "AeroPath" / "data"):
        folders = _case_folders(root)
        if folders:
            break
    else:
        raise UserError(f"{source}: no AeroPath cases; expected <n>/<n>_CT_HR.nii.gz and "
                        "<n>/<n>_CT_HR_label_airways.nii.gz (in SOURCE, SOURCE/AeroPath or SOURCE/data)")
    cases = []
    for folder in sorted(folders, key=lambda p: _natural(p.name)):
        n = folder.name
        image, airway = folder / f"{n}_CT_HR.nii.gz", folder / f"{n}_CT_HR_label_airways.nii.gz"
        missing = [p.name for p in (image, airway) if not p.is_file()]
        cases.append(SourceCase(n, image, {"labels": airway}, f"missing {', '.join(missing)}" if missing else ""))
    return cases
