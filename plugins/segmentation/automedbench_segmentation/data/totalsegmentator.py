"""TotalSegmentator v2 CT: `sXXXX/ct.nii.gz` + `sXXXX/segmentations/<class>.nii.gz`, split in `meta.csv`.

`meta.csv` is semicolon-separated with `image_id` and `split` among its columns. Only `split == test`
subjects are offered: the public TotalSegmentator model was trained on the others, so a Lite run on
them would score the model on its own training data.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from automedbench.api import UserError, read_download_bytes

from .layouts import SourceCase, _natural

META = "meta.csv"
META_MAX_BYTES = 8 << 20  # v2.0.1's meta.csv is ~100 kB for 1,228 subjects


def _root(source: Path) -> Path:
    if (source / META).is_file():
        return source
    nested = sorted(p for p in source.glob("*/" + META) if p.is_file()) if source.is_dir() else []
    if len(nested) == 1:
        return nested[0].parent
    raise UserError(f"{source}: no TotalSegmentator meta.csv; expected meta.csv beside sXXXX/ct.nii.gz and "
                    "sXXXX/segmentations/<class>.nii.gz (in SOURCE or one folder below it)")


def read_split(meta: Path, split: str = "test") -> list[str]:
    """Image ids of one split, from the semicolon-separated meta.csv (size-limited, one line on any problem)."""
    text = read_download_bytes(meta, META_MAX_BYTES).decode("utf-8-sig", errors="replace")  # bounded, no symlink
    rows = csv.DictReader(io.StringIO(text), delimiter=";")
    columns = [c.strip() for c in rows.fieldnames or []]
    if "image_id" not in columns or "split" not in columns:
        seen = ", ".join(columns[:6]) or "none"
        comma = " (it looks comma-separated; the release's file uses semicolons)" if len(columns) == 1 and \
            "," in columns[0] else ""
        raise UserError(f"{meta}: needs columns image_id and split; found {seen}{comma}")
    ids = []
    for row in rows:
        clean = {(k or "").strip(): v.strip() for k, v in row.items() if isinstance(v, str)}
        if clean.get("split") == split and clean.get("image_id"):
            ids.append(clean["image_id"])
    return sorted(set(ids), key=_natural)


def find_totalsegmentator(source: Path, structures: list[str]) -> list[SourceCase]:
    """The test-split subjects in sorted order, each with one binary file per requested class."""
    root = _root(source)
    ids = read_split(root / META)
    if not ids:
        raise UserError(f"{root / META}: no subject has split 'test'")
    cases = []
    for image_id in ids:
        if "/" in image_id or image_id in ("", ".", ".."):
            raise UserError(f"{root / META}: image_id {image_id!r} is not a folder name")
        folder = root / image_id
        image = folder / "ct.nii.gz"
        refs = {name: folder / "segmentations" / f"{name}.nii.gz" for name in structures}
        missing = ([] if image.is_file() else ["ct.nii.gz"]) + [
            f"segmentations/{p.name}" for p in refs.values() if not p.is_file()]
        cases.append(SourceCase(image_id, image, refs, f"missing {', '.join(missing)}" if missing else ""))
    return cases
