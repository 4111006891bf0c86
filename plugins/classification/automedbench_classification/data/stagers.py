"""Stagers: the official download layouts of the five datasets -> the shared staged layout (staged.py).

- HAM10000 (Harvard Dataverse): `HAM10000_metadata(.csv|.tab)` (lesion_id, image_id, dx) and the JPEGs, loose
  or inside `HAM10000_images_part1.zip` / `part2.zip`; or the ISIC 2018 Task 3 training set:
  `ISIC2018_Task3_Training_GroundTruth.csv` (image + one-hot MEL, NV, BCC, AKIEC, BKL, DF, VASC), the
  optional `ISIC2018_Task3_Training_LesionGroupings.csv` and the JPEGs (loose or zipped).
- Class folders (Brain Tumor MRI `Testing/<class>/`, NCT-CRC-HE `CRC-VAL-HE-7K/<CLASS>/`, Kermany
  `chest_xray/test/{NORMAL,PNEUMONIA}/`): the split folder found anywhere under the download.
- PatchCamelyon: `camelyonpatch_level_2_split_<split>_x.h5` / `_y.h5`, decompressed (needs h5py).

Downloads are untrusted input: tables and archive members are read bounded and never through a link,
images are decoded with a pixel-count limit and re-encoded as JPEG (the source's bytes, EXIF and comments
never reach the sandbox), HDF5 datasets must be plain contiguous or chunked data in the file itself (no
external storage, no virtual datasets, no links). Every hidden choice comes from the staging's secret
(`area.secret`): which images are drawn, which image of a lesion, and the case ids (drawn at random, so their
sorted order says nothing about the class folders, the table's rows or the file names); the dataset's ids go
to the private side only. A wrong layout is refused with one line naming what it looked for.
"""

from __future__ import annotations

import csv
import io
import zipfile
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
    check_download_file,
    grey_content,
    one_colour_mode,
    open_zip,
    read_download_bytes,
    read_download_text,
    read_zip_member,
    staging_area,
)
from PIL import Image

from .staged import jpeg_bytes, write_case

MAX_TABLE_BYTES = 64 * 1024 * 1024  # a label table larger than this is not one of these datasets
MAX_IMAGE_BYTES = 64 * 1024 * 1024
MAX_PIXELS = 40_000_000  # decoded pixels per image (a decompression bomb stops here)
MAX_FILES = 500_000
SHRINK = 0.9  # a download of several sizes is published at this fraction of its small drawn heights and widths
SMALL_SHARE = 5  # "small": the 5th percentile, so a few tiny outliers do not shrink every image to their size
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".tif", ".tiff", ".bmp")
HAM_DX = {"akiec": "actinic_keratoses", "bcc": "basal_cell_carcinoma", "bkl": "benign_keratosis_like_lesions",
          "df": "dermatofibroma", "mel": "melanoma", "nv": "melanocytic_nevi", "vasc": "vascular_lesions"}
ISIC_COLUMNS = {"MEL": "mel", "NV": "nv", "BCC": "bcc", "AKIEC": "akiec", "BKL": "bkl", "DF": "df", "VASC": "vasc"}

# A source image: (source id, a function returning its bytes, the file name) and its canonical label.
Item = tuple[str, Callable[[], bytes], str, str]


# ---------------------------------------------------------------- shared helpers


def decode_image(data: bytes, name: str) -> np.ndarray:
    """Downloaded image bytes -> uint8 grey or RGB pixels, refusing oversized or undecodable files."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > MAX_PIXELS:
                raise UserError(f"{name}: {width}x{height} pixels, more than {MAX_PIXELS} "
                                "(not an image of this dataset)")
            image.load()
            if image.mode in ("I;16", "I;16B", "I", "F"):
                pixels = np.asarray(image).astype(np.float64)
                lo, hi = float(pixels.min()), float(pixels.max())
                return ((pixels - lo) / (hi - lo) * 255).round().astype(np.uint8) if hi > lo else \
                    np.zeros(pixels.shape, np.uint8)
            return np.asarray(image.convert("L" if image.mode in ("L", "1", "LA") else "RGB"))
    except UserError:
        raise
    except Exception as exc:  # PIL raises many kinds on a damaged file
        raise UserError(f"{name}: not a readable image ({type(exc).__name__})") from None


def _files(source: Path) -> list[Path]:
    """Regular files under `source` (symlinks skipped, macOS resource forks ignored), bounded in number."""
    found = []
    for path in sorted(source.rglob("*")):
        if "__MACOSX" in path.parts or path.name.startswith("._") or path.is_symlink() or not path.is_file():
            continue
        found.append(path)
        if len(found) > MAX_FILES:
            raise UserError(f"{source}: more than {MAX_FILES} files; point --from at the dataset's folder")
    return found


def _file_reader(path: Path) -> Callable[[], bytes]:
    return lambda: read_download_bytes(path, MAX_IMAGE_BYTES)


def _zip_reader(archive: zipfile.ZipFile, name: str) -> Callable[[], bytes]:
    return lambda: read_zip_member(archive, name, MAX_IMAGE_BYTES)


def one_size(sizes: list[tuple[int, int]]) -> tuple[int, int]:
    """The (height, width) every case of a staging is published at: the drawn images' own when they share one,
    else `SHRINK` of their 5th-percentile height and width (the smallest, under 21 images), so every image but
    a few outliers is shrunk (an enlarged image holds nothing above its source's Nyquist frequency, which tells
    the class a download stores smaller), and a few tiny images do not shrink the whole staging to their size
    (at most one in twenty is enlarged: a trace on that share of the cases, not on a class)."""
    if len(set(sizes)) == 1:
        return sizes[0]

    def small(values: list[int]) -> int:
        return max(1, int(float(np.percentile(values, SMALL_SHARE, method="lower")) * SHRINK))

    return small([h for h, _ in sizes]), small([w for _, w in sizes])


def at_size(pixels: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The pixels resampled (Lanczos) to `size` (height, width); unchanged when already that size."""
    if pixels.shape[:2] == size:
        return pixels
    return np.asarray(Image.fromarray(pixels).resize((size[1], size[0]), Image.Resampling.LANCZOS))


def _write_all(area: StagingArea, task: TaskSpec, chosen: list[Item]) -> StagedData:
    """Write the chosen items as cases whose ids are drawn from the staging's secret, all in one colour mode
    (grey when every image's content is grey, else RGB, a grey image's three channels equal) and one size
    (`one_size`: every image shrunk, none enlarged): a class the download stores in another mode (grey radiographs saved
    as RGB in one class folder) or at other sizes (Kermany's normal radiographs are larger than its pneumonia
    ones; the Brain Tumor MRI Dataset's no-tumour slices come from another source than its 512x512 tumour slices)
    would otherwise be told apart by the JPEG header alone, or by the noise an RGB export leaves between a grey
    image's channels. A download whose images share one size is published as it is."""
    params = task.params
    classes = [str(c) for c in params["classes"]]
    case_ids = area.secret.case_ids(len(chosen), str(params.get("case_prefix", "case")))
    grey, sizes = True, []
    for _, read, name, _ in chosen:
        pixels = decode_image(read(), name)
        grey = grey and grey_content(pixels)
        sizes.append(pixels.shape[:2])
    size = one_size(sizes)
    for case_id, (source_id, read, name, label) in zip(case_ids, chosen, strict=True):
        pixels = at_size(one_colour_mode(decode_image(read(), name), not grey), size)
        write_case(area.root, case_id, jpeg_bytes(pixels), classes, label, {"id": source_id, "file": name})
    return area.commit(case_ids)


def _pick(by_class: dict[str, list[Any]], task: TaskSpec, secret: StagingSecret) -> list[Any]:
    """A secret choice of `case_count` items: equal per class (`balanced`), a per-class floor
    (`min_per_class`) then a random draw from the rest, or a plain random draw."""
    params, count = task.params, int(task.case_count)
    classes = [str(c) for c in params["classes"]]
    rng = secret.rng("sample")
    pools = {c: sorted(by_class.get(c, []), key=lambda item: item[0]) for c in classes}
    total = sum(len(p) for p in pools.values())
    if total < count:
        raise UserError(f"found {total} labelled images, the task needs {count}")
    chosen: list[Any] = []
    if params.get("balanced"):
        share, extra = divmod(count, len(classes))
        for k, c in enumerate(classes):
            need = share + (1 if k < extra else 0)
            if len(pools[c]) < need:
                raise UserError(f"class {c!r}: found {len(pools[c])} images, a balanced draw needs {need}")
            chosen += rng.sample(pools[c], need)
        return chosen
    floor = int(params.get("min_per_class", 0))
    rest: list[Any] = []
    for c in classes:
        pool = list(pools[c])
        rng.shuffle(pool)
        chosen += pool[:floor]
        rest += pool[floor:]
    if len(chosen) > count:
        raise UserError(f"min_per_class {floor} x {len(classes)} classes is more than {count} cases")
    rest.sort(key=lambda item: item[0])
    return chosen + rng.sample(rest, count - len(chosen))


# ---------------------------------------------------------------- HAM10000 / ISIC 2018 Task 3


def _read_table(path: Path) -> list[dict[str, str]]:
    """A CSV, or the tab-separated `.tab` that Harvard Dataverse serves for ingested tables by default."""
    text = read_download_text(path, MAX_TABLE_BYTES)
    header = text.split("\n", 1)[0]
    delimiter = "\t" if "\t" in header and "," not in header else ","
    rows = csv.DictReader(io.StringIO(text), delimiter=delimiter)
    return [{(k or "").strip(): (v or "").strip() for k, v in row.items()} for row in rows]


def _ham_labels(files: list[Path]) -> dict[str, tuple[str, str]]:
    """image id -> (lesion id, dx abbreviation), from HAM10000's metadata or ISIC 2018's one-hot table."""
    meta = [p for p in files if p.name.lower().startswith("ham10000_metadata")]
    if meta:
        labels = {}
        for row in _read_table(meta[0]):
            dx = row.get("dx", "").lower()
            if row.get("image_id") and dx:
                if dx not in HAM_DX:
                    raise UserError(f"{meta[0].name}: unknown dx {dx[:20]!r} (HAM10000 has {', '.join(HAM_DX)})")
                labels[row["image_id"]] = (row.get("lesion_id") or row["image_id"], dx)
        return labels
    truth = [p for p in files if p.name.lower().endswith("task3_training_groundtruth.csv")]
    if not truth:
        raise UserError("no HAM10000_metadata(.csv) and no ISIC2018_Task3_Training_GroundTruth.csv under the folder")
    groups: dict[str, str] = {}
    grouping = [p for p in files if p.name.lower().endswith("task3_training_lesiongroupings.csv")]
    if grouping:
        groups = {r.get("image", ""): r.get("lesion_id", "") for r in _read_table(grouping[0])}
    labels = {}
    for row in _read_table(truth[0]):
        hot = [abbr for column, abbr in ISIC_COLUMNS.items() if _one(row.get(column, ""))]
        if len(hot) != 1:
            raise UserError(f"{truth[0].name}: image {row.get('image', '?')[:40]} has {len(hot)} classes set "
                            "(ISIC 2018 Task 3 is one class per image; ISIC 2019/2020 tables do not fit)")
        labels[row["image"]] = (groups.get(row["image"]) or row["image"], hot[0])
    return labels


def _one(value: str) -> bool:
    try:
        return float(value) >= 0.5
    except ValueError:
        return False


def _image_readers(files: list[Path], wanted: set[str]) -> dict[str, tuple[Callable[[], bytes], str]]:
    """Stem -> (reader, file name) for JPEGs loose under the folder or inside its zips."""
    readers: dict[str, tuple[Callable[[], bytes], str]] = {}
    for path in files:
        if path.suffix.lower() in (".jpg", ".jpeg") and path.stem in wanted:
            readers.setdefault(path.stem, (_file_reader(path), path.name))
    for path in files:
        if path.suffix.lower() != ".zip":
            continue
        archive = open_zip(path, max_member_bytes=MAX_IMAGE_BYTES)
        for name in sorted(archive.namelist()):
            stem = Path(name).stem
            if name.lower().endswith((".jpg", ".jpeg")) and stem in wanted and "__MACOSX" not in name:
                readers.setdefault(stem, (_zip_reader(archive, name), Path(name).name))
    return readers


def stage_ham10000(task: TaskSpec, area: StagingArea, source: Path) -> StagedData:
    files = _files(source)
    labels = _ham_labels(files)
    readers = _image_readers(files, set(labels))
    if not readers:
        raise UserError("no JPEGs named by the label table under the folder (loose or in HAM10000_images_part*.zip)")
    per_lesion: dict[str, list[str]] = defaultdict(list)  # one image per lesion: no near-duplicates across cases
    for image_id in sorted(readers):
        per_lesion[labels[image_id][0]].append(image_id)
    rng = area.secret.rng("image of each lesion")
    by_class: dict[str, list[Item]] = defaultdict(list)
    for lesion in sorted(per_lesion):
        image_id = rng.choice(per_lesion[lesion])
        read, name = readers[image_id]
        by_class[HAM_DX[labels[image_id][1]]].append((image_id, read, name, HAM_DX[labels[image_id][1]]))
    return _write_all(area, task, _pick(by_class, task, area.secret))


# ---------------------------------------------------------------- class folders


def _split_folder(source: Path, names: list[str], folder_classes: dict[str, str]) -> Path:
    """The shallowest folder named like a split that holds at least one class folder."""
    below = sorted((p for p in source.rglob("*") if p.is_dir() and not p.is_symlink() and "__MACOSX" not in p.parts),
                   key=lambda p: (len(p.parts), str(p)))
    for folder in [source, *below]:
        if folder.name in names and any((folder / sub).is_dir() for sub in folder_classes):
            return folder
    raise UserError(f"no split folder ({' / '.join(names)}) with class folders "
                    f"({', '.join(sorted(folder_classes))}) under {source}")


def stage_class_folders(task: TaskSpec, area: StagingArea, source: Path) -> StagedData:
    params = task.params
    folder_classes = {str(k): str(v) for k, v in params["folder_classes"].items()}
    split = _split_folder(source, [str(n) for n in params["split_folders"]], folder_classes)
    by_class: dict[str, list[Item]] = defaultdict(list)
    for folder, label in folder_classes.items():
        if not (split / folder).is_dir() or (split / folder).is_symlink():
            continue
        for path in _files(split / folder):
            if path.suffix.lower() in IMAGE_SUFFIXES:
                source_id = f"{folder}/{path.relative_to(split / folder).as_posix()}"
                by_class[label].append((source_id, _file_reader(path), path.name, label))
    return _write_all(area, task, _pick(by_class, task, area.secret))


# ---------------------------------------------------------------- PatchCamelyon


def _plain_dataset(h5: Any, handle: Any, key: str, origin: str) -> Any:
    """A dataset stored in this file only: a hard link, no external raw storage, not virtual."""
    import h5py

    link = handle.get(key, getlink=True)
    if not isinstance(link, h5py.HardLink):
        raise UserError(f"{origin}: '{key}' is a link, not a dataset stored in the file")
    data = handle[key]
    if not isinstance(data, h5py.Dataset) or data.external or data.is_virtual:
        raise UserError(f"{origin}: '{key}' is not plain data in the file (external or virtual storage)")
    return data


def stage_pcam(task: TaskSpec, area: StagingArea, source: Path) -> StagedData:
    split = str(task.params.get("split", "test"))
    stem = f"camelyonpatch_level_2_split_{split}"
    files = _files(source)
    found = {p.name: p for p in files}
    if f"{stem}_x.h5" not in found or f"{stem}_y.h5" not in found:
        if f"{stem}_x.h5.gz" in found:
            raise UserError(f"{stem}_x.h5.gz is compressed: gunzip the PCam files first (gunzip {stem}_*.h5.gz)")
        raise UserError(f"no {stem}_x.h5 and {stem}_y.h5 under {source}")
    try:
        import h5py
    except ImportError:
        raise UserError("reading PatchCamelyon needs h5py: pip install 'automedbench-classification[hdf5]'") from None
    classes = [str(c) for c in task.params["classes"]]
    for name in (f"{stem}_y.h5", f"{stem}_x.h5"):  # HDF5 opens files in C: no link may stand in for them
        check_download_file(found[name])
    with h5py.File(found[f"{stem}_y.h5"], "r") as fy, h5py.File(found[f"{stem}_x.h5"], "r") as fx:
        y = _plain_dataset(h5py, fy, "y", f"{stem}_y.h5")
        x = _plain_dataset(h5py, fx, "x", f"{stem}_x.h5")
        if x.ndim != 4 or x.shape[1:] != (96, 96, 3) or x.dtype != np.uint8:
            raise UserError(f"{stem}_x.h5: 'x' is {x.shape} {x.dtype}, expected (N, 96, 96, 3) uint8")
        if y.shape[0] != x.shape[0] or y.size != y.shape[0] or y.shape[0] > 10_000_000:
            raise UserError(f"{stem}_y.h5: 'y' is {y.shape}, expected one label per patch ({x.shape[0]})")
        labels = np.asarray(y[...]).reshape(-1)
        if not np.isin(labels, (0, 1)).all():
            raise UserError(f"{stem}_y.h5: labels other than 0 and 1")
        by_class: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for index, value in enumerate(labels.tolist()):
            by_class[classes[int(value)]].append((f"{split}:{index:06d}", index))
        chosen = _pick(by_class, task, area.secret)
        items: list[Item] = []
        for source_id, index in chosen:
            buffer = io.BytesIO()  # lossless here: the one JPEG encoding happens in _write_all
            Image.fromarray(np.asarray(x[index])).save(buffer, format="PNG")
            patch = buffer.getvalue()
            items.append((source_id, (lambda data=patch: data), f"{stem}_x.h5[{index}]", classes[int(labels[index])]))
    return _write_all(area, task, items)


STAGERS: dict[str, Callable[[TaskSpec, StagingArea, Path], StagedData]] = {
    "ham10000": stage_ham10000, "class_folders": stage_class_folders, "pcam": stage_pcam,
}


def stage_dataset(task: TaskSpec, dest: Path, source: Path) -> StagedData:
    if not source.is_dir():
        raise UserError(f"{source} is not a folder: point --from at the unpacked download")
    with staging_area(dest) as area:
        return STAGERS[str(task.params["stager"])](task, area, source)
