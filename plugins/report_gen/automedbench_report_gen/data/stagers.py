"""Stagers for the official layouts. Each finds the test studies, picks a sample when the task asks for one
(`params.sample`; from Open-i's IU X-ray, which has no split, its `case_count`), writes every image of a study
into `public/<case>/images/` and the reference (FINDINGS, or the full report / caption) to `private/`. Every
hidden choice comes from the staging's secret (`area.secret`): which studies are sampled and the case ids
(CXR_<8 hex digits>..., drawn at random, so their sorted order is not the split file's, the table's or the
folders'); the source id is kept in `private/<case>/facts.json` only. Each image is decoded and written again
as PNG (the same pixels, none of the source's bytes or metadata: no published file matches the download's by
hash).

A download holding fewer usable studies than the task stages (its `params.sample`, else `case_count`: R2Gen's
IU X-ray test split is 590) is refused in one line naming what the download lacks (a truncated or partial
extraction), as every release stager refuses one; nothing is staged.

What each stager reads (one line if it is not there):
- MIMIC-CXR-JPG: `files/pXX/pXXXXXXXX/sXXXXXXXX/*.jpg`, `mimic-cxr-2.0.0-split.csv[.gz]`, and the report
  text files `files/pXX/pXXXXXXXX/sXXXXXXXX.txt` (from mimic-cxr-reports.zip, under the same root or `reports/`).
- IU X-ray: R2Gen's `annotation.json` + `images/` (test split), or Open-i's extracted `ecgen-radiology/*.xml`
  with the PNGs (`CXR<n>_IM-<a>-<b>.png`) anywhere under the folder.
- CheXpert Plus: `df_chexpert_plus_*.csv` (path_to_image, split, report, section_findings...) and the images
  at `path_to_image` (or the PNG release's `PNG/<path>.png`); split `valid`, one study = one folder.
- PathCap: `captions.json` / `PathCap.json` (a list of {"image", "caption"} or {image: caption}) or
  `captions.csv` (image, caption), images relative to that file.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
from automedbench.api import (
    StagedData,
    TaskSpec,
    UserError,
    check_image,
    gunzip,
    inside,
    loads_json,
    parse_xml,
    read_download_bytes,
    reencode_image,
    staging_area,
)

from ..contract import check_report_bytes, minimums
from ..text import sections
from .layout import finish, write_study

MAX_IMAGE_BYTES = 64 << 20
MAX_TABLE_BYTES = 2 << 30
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
SHOWN_MISSING = 3  # missing files named in the refusal of a short download

Study = tuple[str, list[Path], str]


@attrs.define
class Found:
    """What a reader tells besides its studies: the files its lists name that are not there (a short download's
    refusal names them), and whether the download has no split to follow (Open-i's), so that the task's count
    is drawn from all it holds."""

    missing: list[str] = attrs.Factory(list)
    unsplit: bool = False


# a reader: (download, task params, what it found besides) -> (source id, images, reference)
Reader = Callable[[Path, dict[str, Any], Found], Iterator[Study]]


def stage_dataset(task: TaskSpec, dest: Path, source: Path) -> StagedData:
    kind = str(task.params.get("source_kind", ""))
    readers: dict[str, Reader] = {"mimic_cxr": mimic_cxr, "iu_xray": iu_xray, "chexpert_plus": chexpert_plus,
                                  "pathcap": pathcap}
    if kind not in readers:
        raise UserError(f"{task.id}: unknown source_kind {kind!r} in the task file")
    if not source.is_dir():
        raise UserError(f"{source} is not a folder")
    # the reference always passes its own task's checker (PathCap states a shorter minimum than chest X-ray)
    found = Found()
    studies = [s for s in readers[kind](source, task.params, found)
               if not check_report_bytes(s[2].encode("utf-8"), *minimums(task))]
    if not studies:
        raise UserError(f"{task.id}: no usable study with a reference report under {source}")
    sample = task.params.get("sample")
    if sample is None and found.unsplit:  # no split to stage whole: the task's count, drawn from the secret
        sample = task.case_count
    _refuse_short(task, source, len(studies), int(sample) if sample is not None else task.case_count, found.missing)
    with staging_area(dest) as area:
        if sample is not None and int(sample) < len(studies):
            studies = area.secret.sample(studies, int(sample), "sample")
        ids = area.secret.case_ids(len(studies), str(task.params.get("prefix", "CXR")))
        for case, (source_id, images, reference) in zip(ids, studies, strict=True):
            files = [(f"{v + 1:02d}.png", _read_image(p)) for v, p in enumerate(images)]
            write_study(area.root, case, files, reference, {"source_id": source_id})
        return finish(area, ids, task.params)


def _refuse_short(task: TaskSpec, source: Path, usable: int, needed: int, missing: list[str]) -> None:
    """One line when the download holds fewer usable studies than the task stages, naming the files its lists
    point to that are not there (a truncated or partial download): staging fewer silently changes the task."""
    if usable >= needed:
        return
    lacks = (f"; {len(missing)} file(s) its lists name are missing ({', '.join(missing[:SHOWN_MISSING])}"
             f"{', ...' if len(missing) > SHOWN_MISSING else ''}): a truncated or partial download?" if missing else "")
    raise UserError(f"{source}: only {usable} usable stud{'y' if usable == 1 else 'ies'} with images and a reference "
                    f"report, {task.id} needs {needed}{lacks}")


def _present(paths: list[Path], source: Path, missing: list[str]) -> bool:
    """Whether every file is there; those that are not are listed (relative to the download) in `missing`."""
    gone = [p for p in paths if not p.is_file()]
    missing += [str(p.relative_to(source)) if p.is_relative_to(source) else str(p) for p in gone]
    return not gone


def _read_image(path: Path) -> bytes:
    """An image decoded and written again as PNG, published only if its header declares a size this machine
    can decode (`check_image` before `reencode_image`)."""
    return reencode_image(read_download_bytes(check_image(path), MAX_IMAGE_BYTES), str(path))


def _text(path: Path) -> str:
    """A downloaded table or JSON file: bounded before and after gunzip, never through a symlink."""
    data = read_download_bytes(path, MAX_TABLE_BYTES)
    if path.suffix == ".gz":
        data = gunzip(data, str(path), MAX_TABLE_BYTES)
    return data.decode("utf-8", "replace")


def _rows(path: Path) -> Iterator[dict[str, str]]:
    yield from csv.DictReader(io.StringIO(_text(path)))


def _first(source: Path, patterns: list[str], what: str) -> Path:
    for pattern in patterns:
        found = sorted(source.glob(pattern))
        if found:
            return found[0]
    raise UserError(f"{source}: no {what} (looked for {', '.join(patterns)})")


def _inside(relative: str) -> bool:
    """A table's image path that stays inside the source folder (no absolute paths, no '..')."""
    path = Path(relative)
    return bool(relative) and not path.is_absolute() and ".." not in path.parts


def findings_reference(text: str) -> str | None:
    """`FINDINGS: ...` from a full report, or None when the report has no findings section."""
    body = sections(text).get("FINDINGS", "")
    body = " ".join(body.split())
    return f"FINDINGS: {body}" if body else None


# ------------------------------------------------------------------ MIMIC-CXR-JPG


def mimic_cxr(source: Path, params: dict[str, Any], found: Found) -> Iterator[Study]:
    names = ["mimic-cxr-2.0.0-split.csv.gz", "mimic-cxr-2.0.0-split.csv", "**/mimic-cxr-2.0.0-split.csv*"]
    split = _first(source, names, "mimic-cxr-2.0.0-split.csv[.gz] (MIMIC-CXR-JPG)")
    wanted = str(params.get("split", "test"))
    studies: dict[tuple[str, str], list[str]] = {}
    for row in _rows(split):
        if row.get("split") == wanted:
            studies.setdefault((row["subject_id"], row["study_id"]), []).append(row["dicom_id"])
    for (subject, study), dicoms in sorted(studies.items()):
        folder = f"files/p{subject[:2]}/p{subject}/s{study}"
        listed = [inside(source, f"{folder}/{d}.jpg", str(split)) for d in sorted(dicoms)]
        images = [p for p in listed if p.is_file()]
        texts = (inside(source, f"{folder}.txt", str(split)), inside(source, f"reports/{folder}.txt", str(split)))
        report = next((p for p in texts if p.is_file()), None)
        if not images or report is None:
            _present([*listed, *([] if report else texts[:1])], source, found.missing)
            continue
        reference = findings_reference(_text(report))
        if reference:
            yield f"p{subject}/s{study}", images, reference


# ------------------------------------------------------------------ IU X-ray (Open-i / R2Gen)


def iu_xray(source: Path, params: dict[str, Any], found: Found) -> Iterator[Study]:
    annotation = next(iter(sorted(source.glob("**/annotation.json"))), None)
    if annotation is not None:
        data = loads_json(_text(annotation), str(annotation))
        for entry in data.get(str(params.get("split", "test")), []):
            folder = annotation.parent / "images"
            images = [inside(folder, str(p), str(annotation)) for p in entry.get("image_path", [])]
            text = " ".join(str(entry.get("report", "")).split())
            if text and images and _present(images, source, found.missing):
                yield str(entry.get("id", "")), images, f"FINDINGS: {text}"
        return
    xmls = sorted(source.glob("**/ecgen-radiology/*.xml"))
    if not xmls:
        raise UserError(f"{source}: neither R2Gen's annotation.json nor Open-i's ecgen-radiology/*.xml "
                        "(extract NLMCXR_reports.tgz and NLMCXR_png.tgz here)")
    found.unsplit = True  # Open-i has no split: the task's count (R2Gen's test split's size) is drawn
    pngs = {p.stem: p for p in source.glob("**/CXR*.png")}
    for xml in xmls:
        root = parse_xml(_text(xml), str(xml))  # no DOCTYPE: no entity expansion
        parts = {el.get("Label", "").upper(): (el.text or "") for el in root.iter("AbstractText")}
        findings = " ".join(parts.get("FINDINGS", "").split())
        listed = [i.get("id", "") for i in root.iter("parentImage")]
        images = [pngs[i] for i in listed if i in pngs]
        if findings and not images:
            found.missing += [f"{i}.png" for i in listed]
        if findings and images:
            yield xml.stem, images, f"FINDINGS: {findings}"


# ------------------------------------------------------------------ CheXpert Plus


def chexpert_plus(source: Path, params: dict[str, Any], found: Found) -> Iterator[Study]:
    table = _first(source, ["df_chexpert_plus_*.csv", "**/df_chexpert_plus_*.csv"], "df_chexpert_plus_*.csv")
    wanted = str(params.get("split", "valid"))
    studies: dict[str, tuple[list[Path], str]] = {}
    for row in _rows(table):
        if row.get("split") != wanted:
            continue
        relative = row.get("path_to_image", "")
        image = _chexpert_image(source, relative)
        report = " ".join((row.get("report") or "").split())
        if image is None and report and _inside(relative):
            found.missing.append(relative)
        if image is None or not report:
            continue
        images, _ = studies.setdefault(str(Path(relative).parent), ([], report))
        images.append(image)
    for study, (images, report) in sorted(studies.items()):
        yield study, sorted(images), report


def _chexpert_image(source: Path, relative: str) -> Path | None:
    if not _inside(relative):
        return None
    for candidate in (inside(source, relative), inside(source, str(Path("PNG") / Path(relative).with_suffix(".png"))),
                      inside(source, str(Path(relative).with_suffix(".png")))):
        if candidate.is_file():
            return candidate
    return None


# ------------------------------------------------------------------ PathCap

CAPTION_FILES = ["captions.json", "PathCap.json", "captions.csv"]


def pathcap(source: Path, params: dict[str, Any], found: Found) -> Iterator[Study]:
    tables = [source / n for n in CAPTION_FILES if (source / n).is_file()]
    if not tables:
        raise UserError(f"{source}: PathCap needs one of {', '.join(CAPTION_FILES)} beside its images "
                        "(the caption JSON ships apart from the images on the hub)")
    path = tables[0]
    if path.suffix == ".csv":
        pairs = [(r.get("image", ""), r.get("caption", "")) for r in _rows(path)]
    else:
        data = loads_json(_text(path), str(path))
        pairs = list(data.items()) if isinstance(data, dict) else [
            (str(e.get("image", "")), str(e.get("caption", ""))) for e in data if isinstance(e, dict)]
    for image, caption in pairs:
        file = inside(source, str(image), str(path)) if _inside(str(image)) else source / "-"
        text = " ".join(str(caption).split())
        if _inside(str(image)) and file.suffix.lower() in IMAGE_SUFFIXES and len(text) >= 3 and not file.is_file():
            found.missing.append(str(image))
        if _inside(str(image)) and file.suffix.lower() in IMAGE_SUFFIXES and file.is_file() and len(text) >= 3:
            yield image, [file], text
