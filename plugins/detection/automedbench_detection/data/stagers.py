"""Stagers: the official download layouts of the four datasets -> the shared staged layout (staged.py).

- VinDr-CXR (PhysioNet 1.0.0): `annotations/annotations_<split>.csv` (image_id, rad_id, class_name,
  x_min, y_min, x_max, y_max) and `<split>/<image_id>.dicom`; or Kaggle VinBigData's `train.csv` with
  the DICOMs or PNG/JPG conversions at the original resolution. Several radiologists per image are
  fused (see `fuse_radiologists`).
- BCCD (Shenggan/BCCD_Dataset): `BCCD/Annotations/*.xml` (Pascal VOC), `BCCD/JPEGImages/*.jpg`,
  `BCCD/ImageSets/Main/<split>.txt`.
- GRAZPEDWRI-DX: PNG images, YOLO label files `<stem>.txt` (class cx cy w h, normalised) and the YAML that
  names the classes (`names:`), found anywhere under the folder.
- DENTEX: one COCO JSON with the diagnosis level (`categories_3` + `category_id_3`, or plain
  `categories` + `category_id` with the diagnosis names) and the panoramic X-rays it names.

Every hidden choice comes from the staging's secret (`area.secret`): which images are drawn and their case
ids (drawn at random: their sorted order says nothing about the split file, the table or the file names);
the dataset's ids go to the private side only. Images are decoded and re-encoded as PNG (the same pixels,
never the source's bytes or metadata). A wrong layout is refused with one line naming what it looked for.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import (
    StagedData,
    StagingArea,
    StagingSecret,
    TaskSpec,
    UserError,
    check_image,
    check_pixels,
    loads_json,
    one_colour_mode,
    parse_xml,
    read_download_text,
    staging_area,
)
from PIL import Image

from .staged import GTBox, clip_box, png_bytes, write_case

MAX_TEXT_BYTES = 256 * 1024 * 1024  # an annotation file larger than this is not one of these datasets
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".dicom", ".dcm")
COLOUR_MODES = ("RGB", "RGBA", "P", "CMYK")  # PIL modes read as RGB; every other mode is read as grey


# ---------------------------------------------------------------- shared helpers


def _read_text(path: Path) -> str:
    """A downloaded annotation file: bounded, never through a symlink, decoded or refused with one line."""
    return read_download_text(path, MAX_TEXT_BYTES)


def _index_images(source: Path, suffixes: tuple[str, ...] = IMAGE_SUFFIXES) -> dict[str, Path]:
    """Image files by stem and by file name (first in sorted order wins)."""
    found: dict[str, Path] = {}
    for path in sorted(p for p in source.rglob("*") if p.suffix.lower() in suffixes and p.is_file()):
        found.setdefault(path.stem, path)
        found.setdefault(path.name, path)
    return found


def to_uint8(pixels: np.ndarray) -> np.ndarray:
    """Min–max scale to 8 bits (grey or RGB kept); 8-bit input is returned unchanged."""
    if pixels.dtype == np.uint8:
        return pixels
    data = pixels.astype(np.float64)
    lo, hi = float(data.min()), float(data.max())
    scaled = (data - lo) / (hi - lo) * 255.0 if hi > lo else np.zeros_like(data)
    return scaled.round().astype(np.uint8)


def read_image(path: Path) -> np.ndarray:
    """An image file as uint8 pixels at its original size; DICOM needs pydicom (MONOCHROME1 inverted).
    The header is checked first: an image declaring more pixels than memory allows is refused undecoded."""
    check_image(path)
    if path.suffix.lower() in (".dicom", ".dcm"):
        try:
            import pydicom
        except ImportError:
            raise UserError("reading DICOM needs pydicom: pip install 'automedbench-detection[dicom]'") from None
        ds = pydicom.dcmread(str(path))
        pixels = to_uint8(np.asarray(ds.pixel_array))
        if str(getattr(ds, "PhotometricInterpretation", "")) == "MONOCHROME1":
            pixels = 255 - pixels
        return pixels
    with Image.open(path) as image:
        if image.mode in ("I;16", "I;16B", "I", "F"):
            return to_uint8(np.asarray(image))
        return np.asarray(image.convert("RGB" if image.mode in COLOUR_MODES else "L"))


def stored_in_colour(path: Path) -> bool:
    """Whether a source image's header declares colour (read_image then gives RGB); a DICOM is grey unless it
    declares more than one sample a pixel. Only the header is read, after `check_image` (no symlink, one line for
    a file that is no image)."""
    check_image(path)
    if path.suffix.lower() in (".dicom", ".dcm"):
        try:
            import pydicom
        except ImportError:
            return False  # read_image says what to install
        return int(getattr(pydicom.dcmread(str(path), stop_before_pixels=True), "SamplesPerPixel", 1)) > 1
    with Image.open(path) as image:
        return image.mode in COLOUR_MODES


def _sample(items: list[str], count: int, secret: StagingSecret, what: str) -> list[str]:
    """`count` of the items, chosen from the staging's secret (never the split file's or the table's order)."""
    items = sorted(set(items))
    if len(items) < count:
        raise UserError(f"found {len(items)} {what}, the task needs {count}")
    return secret.sample(items, count, f"sample {what}")


def _write_all(area: StagingArea, task: TaskSpec, chosen: list[tuple[str, Path, list[GTBox]]],
               classes: list[str]) -> StagedData:
    """Write the chosen (source id, image path, boxes) as cases whose ids are drawn from the staging's secret, all
    in one colour mode (RGB when any source image is stored in colour, grey otherwise; a grey image's three
    channels equal): a finding whose images the download stores in another mode than the rest would otherwise be
    told by the PNG header, or by the level of noise an RGB export leaves between a grey image's channels. Each
    image keeps its size: the boxes are in its pixel frame (meta.json's width and height), as the original
    publishes them."""
    params = task.params
    case_ids = area.secret.case_ids(len(chosen), str(params.get("case_prefix", "case")))
    colour = any(stored_in_colour(path) for _, path, _ in chosen)
    for case_id, (source_id, path, boxes) in zip(case_ids, chosen, strict=True):
        pixels = one_colour_mode(read_image(path), colour)
        height, width = pixels.shape[:2]
        kept = []
        for cls, *corners in boxes:
            box = clip_box(tuple(corners), width, height)  # type: ignore[arg-type]
            if box is not None:
                kept.append((cls, *box))
        outside = [b for b in boxes if b[3] > width * 1.02 or b[4] > height * 1.02]
        if outside and len(outside) == len(boxes):
            raise UserError(f"{path.name}: every box lies beyond the image ({width}x{height}); use images at the "
                            "original resolution, not resized conversions")
        write_case(area.root, case_id, png_bytes(pixels, path), width, height, classes, kept,
                   {"id": source_id, "file": path.name, "dropped_boxes": len(boxes) - len(kept)})
    return area.commit(case_ids)


def _count(task: TaskSpec) -> int:
    return int(task.case_count)


# ---------------------------------------------------------------- VinDr-CXR


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def fuse_radiologists(rows: list[tuple[str, tuple[float, float, float, float]]], iou: float = 0.5
                      ) -> list[tuple[float, float, float, float]]:
    """One class of one image: (rad_id, box) rows -> fused boxes.

    Boxes are taken in (rad_id, corners) order; each joins the first cluster that has no box from the
    same radiologist yet and whose mean box overlaps it with IoU >= `iou`, else starts a cluster. A
    cluster becomes the mean of its boxes. A finding drawn by one radiologist only is kept (any finding
    counts, as in the original abnormality task); exact duplicates collapse."""
    clusters: list[list[tuple[str, tuple[float, ...]]]] = []
    for rad, box in sorted(rows):
        for members in clusters:
            if (rad, box) in members:  # the same radiologist's exact duplicate collapses
                break
            if all(r != rad for r, _ in members) and _iou(_mean([b for _, b in members]), box) >= iou:
                members.append((rad, box))
                break
        else:
            clusters.append([(rad, box)])
    return [_mean([b for _, b in members]) for members in clusters]


def _mean(boxes: list[tuple[float, ...]]) -> tuple[float, float, float, float]:
    x1, y1, x2, y2 = (float(np.mean([b[k] for b in boxes])) for k in range(4))
    return x1, y1, x2, y2


def _vindr_csv(source: Path, split: str) -> Path:
    for candidate in (source / "annotations" / f"annotations_{split}.csv", source / f"annotations_{split}.csv",
                      source / "train.csv"):
        if candidate.is_file():
            return candidate
    raise UserError(f"{source}: no annotations/annotations_{split}.csv (PhysioNet VinDr-CXR) or train.csv "
                    "(Kaggle VinBigData) found")


def _float(value: str) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if np.isfinite(number) else None


def stage_vindr(task: TaskSpec, area: StagingArea, source: Path) -> StagedData:
    params = task.params
    table = _vindr_csv(source, str(params.get("split", "test")))
    reader = csv.DictReader(io.StringIO(_read_text(table)))
    need = {"image_id", "class_name", "x_min", "y_min", "x_max", "y_max"}
    if not need <= set(reader.fieldnames or []):
        raise UserError(f"{table}: columns {sorted(need - set(reader.fieldnames or []))} missing "
                        "(expected image_id, rad_id, class_name, x_min, y_min, x_max, y_max)")
    boxes: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    seen: set[str] = set()
    for row in reader:
        image_id = row["image_id"].strip()
        seen.add(image_id)
        coords = [_float(row[k]) for k in ("x_min", "y_min", "x_max", "y_max")]
        if row["class_name"].strip().lower() == "no finding" or any(c is None for c in coords):
            continue
        boxes[image_id][row["class_name"].strip()].append((row.get("rad_id", "") or "", tuple(coords)))
    positive = [i for i in seen if boxes.get(i)]
    negative = [i for i in seen if not boxes.get(i)]
    chosen_ids = (_sample(positive, int(params.get("positives", 8)), area.secret, "images with findings")
                  + _sample(negative, int(params.get("negatives", 2)), area.secret, '"No finding" images'))
    images = _index_images(source, (".dicom", ".dcm", ".png", ".jpg", ".jpeg"))
    merge_iou = float(params.get("merge_iou", 0.5))
    chosen = []
    for image_id in chosen_ids:
        path = images.get(image_id)
        if path is None:
            raise UserError(f"{source}: image {image_id} (.dicom/.dcm/.png/.jpg) not found")
        fused = [(cls, *box) for cls, rows in sorted(boxes.get(image_id, {}).items())
                 for box in fuse_radiologists(rows, merge_iou)]
        chosen.append((image_id, path, fused))
    return _write_all(area, task, chosen, [str(c) for c in params["classes"]])


# ---------------------------------------------------------------- BCCD (Pascal VOC)


def _find_dir(source: Path, name: str) -> Path | None:
    if (source / name).is_dir():
        return source / name
    return next((p for p in sorted(source.rglob(name)) if p.is_dir()), None)


def _voc_boxes(path: Path, names: dict[str, str]) -> list[GTBox]:
    root = parse_xml(_read_text(path), str(path))  # no DOCTYPE: no entity expansion
    out: list[GTBox] = []
    for obj in root.iter("object"):
        cls = names.get((obj.findtext("name") or "").strip().lower())
        box = obj.find("bndbox")
        if cls is None or box is None:
            continue
        coords = [_float(box.findtext(k) or "") for k in ("xmin", "ymin", "xmax", "ymax")]
        if any(c is None for c in coords):
            continue
        x1, y1, x2, y2 = coords  # VOC: 1-based pixel indices, inclusive -> continuous corners
        out.append((cls, min(x1, x2) - 1.0, min(y1, y2) - 1.0, max(x1, x2), max(y1, y2)))  # type: ignore[type-var]
    return out


def stage_voc(task: TaskSpec, area: StagingArea, source: Path) -> StagedData:
    params = task.params
    classes = [str(c) for c in params["classes"]]
    names = {c.lower(): c for c in classes}
    annotations, jpegs = _find_dir(source, "Annotations"), _find_dir(source, "JPEGImages")
    if annotations is None or jpegs is None:
        raise UserError(f"{source}: no Annotations/ and JPEGImages/ folders (Pascal VOC layout of BCCD)")
    split = str(params.get("split", "test"))
    split_file = annotations.parent / "ImageSets" / "Main" / f"{split}.txt"
    if split_file.is_file():
        stems = [s.strip() for s in _read_text(split_file).split() if s.strip()]
    else:
        stems = sorted(p.stem for p in annotations.glob("*.xml"))
    stems = _sample(stems, _count(task), area.secret, f"images in the {split} split")
    chosen = []
    for stem in stems:
        xml, jpg = annotations / f"{stem}.xml", jpegs / f"{stem}.jpg"
        if not xml.is_file() or not jpg.is_file():
            raise UserError(f"{source}: {stem}.xml or {stem}.jpg missing")
        chosen.append((stem, jpg, _voc_boxes(xml, names)))
    return _write_all(area, task, chosen, classes)


# ---------------------------------------------------------------- GRAZPEDWRI-DX (YOLO)


def _yolo_names(source: Path) -> list[str]:
    import yaml

    for path in sorted(source.rglob("*.yaml")) + sorted(source.rglob("*.yml")):
        try:
            doc = yaml.safe_load(_read_text(path))
        except yaml.YAMLError:
            continue
        names = doc.get("names") if isinstance(doc, dict) else None
        if isinstance(names, dict):
            names = [names[k] for k in sorted(names)]
        if isinstance(names, list) and names:
            return [str(n) for n in names]
    raise UserError(f"{source}: no YAML with the class names (names: [...]) found")


def _yolo_boxes(path: Path, names: list[str], keep: dict[str, str], image: Path) -> list[GTBox]:
    lines = [ln.split() for ln in _read_text(path).splitlines() if ln.strip()]
    if not lines:
        return []
    with Image.open(image) as img:
        width, height = img.size
    check_pixels([width, height], 1, str(image))
    out: list[GTBox] = []
    for parts in lines:
        values = [_float(v) for v in parts[:5]]
        if len(parts) < 5 or any(v is None for v in values):
            raise UserError(f"{path}: not a YOLO label line ({' '.join(parts)[:60]})")
        k, cx, cy, w, h = values
        if not 0 <= int(k) < len(names):  # type: ignore[arg-type]
            raise UserError(f"{path}: class {int(k)} not among the {len(names)} names")  # type: ignore[arg-type]
        cls = keep.get(names[int(k)])  # type: ignore[arg-type]
        if cls is None:
            continue
        out.append((cls, (cx - w / 2) * width, (cy - h / 2) * height,  # type: ignore[operator]
                    (cx + w / 2) * width, (cy + h / 2) * height))  # type: ignore[operator]
    return out


def stage_yolo(task: TaskSpec, area: StagingArea, source: Path) -> StagedData:
    params = task.params
    classes = [str(c) for c in params["classes"]]
    names = _yolo_names(source)
    keep = {n: n for n in names if n in classes}
    missing = [c for c in classes if c not in keep]
    if missing:
        raise UserError(f"{source}: the dataset's class names lack {missing} (found {names})")
    labels = {p.stem: p for p in sorted(source.rglob("*.txt")) if p.parent.name == "labels" or "labels" in p.parts}
    if not labels:
        raise UserError(f"{source}: no YOLO label files (labels/<image>.txt) found")
    images = _index_images(source, (".png", ".jpg", ".jpeg"))
    stems = [s for s in labels if s in images]
    if not stems:
        raise UserError(f"{source}: no image matches a label file by name")
    stems = _sample(stems, _count(task), area.secret, "labelled images")
    chosen = [(s, images[s], _yolo_boxes(labels[s], names, keep, images[s])) for s in stems]
    return _write_all(area, task, chosen, classes)


# ---------------------------------------------------------------- DENTEX (COCO)


def _coco_document(source: Path, classes: list[str]) -> tuple[Path, dict[str, Any], str, dict[int, str]]:
    wanted = {c.lower(): c for c in classes}
    found = []
    for path in sorted(source.rglob("*.json")):
        try:
            doc = loads_json(_read_text(path), str(path))
        except UserError:
            continue
        if not isinstance(doc, dict) or "images" not in doc or "annotations" not in doc:
            continue
        for cat_key, ann_key in (("categories_3", "category_id_3"), ("categories", "category_id")):
            cats = {int(c["id"]): wanted[str(c["name"]).strip().lower()] for c in doc.get(cat_key, [])
                    if str(c.get("name", "")).strip().lower() in wanted}
            if cats:
                found.append((path, doc, ann_key, cats))
                break
    if not found:
        raise UserError(f"{source}: no COCO JSON with the diagnosis categories {classes} found")
    if len(found) > 1:
        names = ", ".join(f[0].name for f in found)
        raise UserError(f"{source}: several COCO JSON files with diagnoses ({names}); point --from at the folder "
                        "of the one to stage")
    return found[0]


def stage_coco(task: TaskSpec, area: StagingArea, source: Path) -> StagedData:
    params = task.params
    classes = [str(c) for c in params["classes"]]
    path, doc, ann_key, cats = _coco_document(source, classes)
    by_image: dict[int, list[GTBox]] = defaultdict(list)
    for ann in doc["annotations"]:
        cls = cats.get(int(ann.get(ann_key, -1)))
        bbox = ann.get("bbox") or []
        if cls is None or len(bbox) != 4:
            continue
        x, y, w, h = (float(v) for v in bbox)
        by_image[int(ann["image_id"])].append((cls, x, y, x + w, y + h))
    names = {int(img["id"]): str(img["file_name"]) for img in doc["images"]}
    ids = _sample([str(i) for i in names], _count(task), area.secret, f"images in {path.name}")
    files = _index_images(source, (".png", ".jpg", ".jpeg"))
    chosen = []
    for image_id in ids:
        name = Path(names[int(image_id)]).name
        image = files.get(name)
        if image is None:
            raise UserError(f"{source}: image {name} named in {path.name} not found")
        chosen.append((name, image, by_image.get(int(image_id), [])))
    return _write_all(area, task, chosen, classes)


STAGERS: dict[str, Callable[[TaskSpec, StagingArea, Path], StagedData]] = {
    "vindr": stage_vindr, "voc": stage_voc, "yolo": stage_yolo, "coco": stage_coco,
}


def stage_dataset(task: TaskSpec, dest: Path, source: Path) -> StagedData:
    kind = str(task.params.get("stager", ""))
    if kind not in STAGERS:
        raise UserError(f"{task.id}: unknown stager {kind!r} in the task file")
    with staging_area(dest) as area:
        return STAGERS[kind](task, area, source)
