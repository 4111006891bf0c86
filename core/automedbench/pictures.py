"""Per-case pictures for the run page: what a track draws for one case (input, output and reference side by side),
the helpers it draws with, and the one renderer that turns a picture into a small PNG.

Pictures are drawn after the agent phase by the evaluator (trusted code with the references at hand, under its
memory and time limits), from files read with bounded parsers, never by agent code and never in the sandbox; they
are written into the run folder only (`pictures/`), within a size budget. A track supplies its picture through
`Track.case_picture`; the default here draws any case whose files are images, arrays, NIfTI volumes or text.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from attrs import Factory, define

from .fsutil import atomic_write_bytes, atomic_write_text, open_dir, read_regular

THUMB = 256  # the long side of one panel, in pixels
MAX_PANELS = 4  # image panels per case; text panels are not drawn
MAX_LABELLED = 12  # boxes of a panel drawn with their labels (more: boxes only)
PALETTE = 96  # colours of a case's PNG
MAX_TEXT_CHARS = 4000  # one text shown under a picture (an answer, a report)
MAX_CASE_BYTES = 160_000  # one case's PNG; larger is drawn again at half size
MAX_RUN_BYTES = 8 << 20  # every picture of a run together; past it, cases get no picture and the index says so
MAX_PICTURES = 300  # cases drawn per run
MAX_FILE_BYTES = 256 << 20  # a file the default picture reads
MAX_FILE_PIXELS = 64 << 20  # values a file the default picture decodes may declare
PICTURES_DIR = "pictures"
INDEX = "index.json"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif", ".webp")
TEXT_SUFFIXES = (".json", ".txt", ".md", ".csv", ".tsv")
# box colours by the panel's role; label colours for masks (label 1 first)
ROLE_COLOURS = {"output": (255, 128, 0), "reference": (0, 170, 90), "input": (30, 136, 229)}
LABEL_COLOURS = [(230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48), (145, 30, 180),
                 (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 212)]
LABEL_COLOUR_NAMES = ["red", "green", "yellow", "blue", "orange", "purple", "cyan", "magenta", "lime", "pink"]


@define
class Box:
    """One rectangle in the image's pixel coordinates (detection boxes), with a short label."""

    x1: float
    y1: float
    x2: float
    y2: float
    label: str = ""


@define
class Panel:
    """One view of a case: an image (2-D grey of any dtype, or H x W x 3 RGB), with a label mask (2-D, the image's
    size, 0 = nothing) or boxes drawn over it, and/or a text shown under the picture on the page.

    `role` ("input", "output" or "reference") colours its boxes; `window` maps grey values to black..white
    (None: the 1st..99th percentile); `note` stands in for a missing image ("no valid output"); `extent` is the
    (width, height) the boxes' coordinates refer to when the image was read smaller (`read_image` shrinks)."""

    title: str
    image: Any = None
    mask: Any = None
    boxes: list[Box] = Factory(list)
    role: str = ""
    extent: tuple[float, float] | None = None
    aspect: float = 1.0  # a pixel's height over its width (a coronal slice of thick axial slices: > 1)
    window: tuple[float, float] | None = None
    text: str = ""
    note: str = ""


@define
class CasePicture:
    """What a track shows for one case: its panels, left to right, and a one-line caption."""

    panels: list[Panel]
    caption: str = ""
    labels: dict[int, str] = Factory(dict)  # what a mask's label values mean (1: "organ", 2: "lesion"), for the legend


# ---------------------------------------------------------------- helpers a track draws with


def focus_index(volume_shape: tuple[int, ...], *masks: Any, axis: int = 2) -> int:
    """The slice along `axis` with the most foreground in the first mask that has any (the reference, say), else
    the middle slice: the one slice of a volume worth showing."""
    import numpy as np

    for mask in masks:
        if mask is None or getattr(mask, "ndim", 0) != len(volume_shape):
            continue
        other = tuple(i for i in range(mask.ndim) if i != axis % mask.ndim)
        area = np.count_nonzero(np.asarray(mask), axis=other)
        if area.size and area.max() > 0:
            return int(area.argmax())
    return volume_shape[axis % len(volume_shape)] // 2


def volume_slice(volume: Any, index: int | None = None, axis: int = 2) -> Any:
    """One 2-D slice of a 3-D array (its middle one unless `index`), turned for display (rows top to bottom).
    A 2-D array is returned as it is."""
    import numpy as np

    array = np.asarray(volume)
    if array.ndim == 2:
        return array
    if array.ndim != 3:
        array = array.reshape(array.shape[:3]) if array.ndim > 3 and all(d == 1 for d in array.shape[3:]) else array
        if array.ndim != 3:
            raise ValueError(f"cannot take a slice of a {array.ndim}-D array")
    axis %= 3
    index = array.shape[axis] // 2 if index is None else max(0, min(int(index), array.shape[axis] - 1))
    return np.rot90(np.take(array, index, axis=axis))


def max_projection(volume: Any, axis: int = 2) -> Any:
    """The maximum intensity projection of a 3-D array along `axis`, turned for display (thin structures such
    as an airway tree show whole in it)."""
    import numpy as np

    return np.rot90(np.asarray(volume).max(axis=axis % 3))


def read_image(path: Path, max_pixels: int = MAX_FILE_PIXELS) -> Any:
    """An image file as an RGB array at most 4 x THUMB on its long side, its header checked against `max_pixels`
    before any decoding (boxes in the file's own pixels: give the panel its `extent`). A file with more than one
    name is read: pictures read the harness's own data root (a sweep slot hard-links the staged inputs) and the
    frozen outputs, where the freeze let no hard link in."""
    import numpy as np
    from PIL import Image

    from .untrusted import check_image

    _regular(path)
    check_image(path, max_pixels=max_pixels, max_bytes=4 * max_pixels, one_name=False)
    with Image.open(path) as image:
        image.draft("RGB", (THUMB * 2, THUMB * 2))  # JPEG: decode at a reduced scale, as far as it goes
        image.thumbnail((THUMB * 4, THUMB * 4))
        return np.asarray(image.convert("RGB"))


def read_text_head(path: Path, limit: int = MAX_TEXT_CHARS) -> str:
    """The head of a text file, decoded leniently (for a text panel)."""
    _regular(path)
    with open(path, "rb") as handle:
        return handle.read(limit * 4).decode("utf-8", "replace")[:limit]


def file_panel(path: Path, title: str, role: str = "") -> Panel:
    """A panel for one file by its kind: an image, a 2-D/3-D array (.npy, NIfTI with nibabel installed: the
    middle slice), or text; anything else is a note. Every read is bounded (size and declared pixels)."""
    name = path.name.lower()
    if not os.path.lexists(path):
        return Panel(title, note="missing", role=role)
    if name.endswith(IMAGE_SUFFIXES):
        return Panel(title, image=read_image(path), role=role)
    if name.endswith(TEXT_SUFFIXES):
        return Panel(title, text=read_text_head(path), role=role)
    if name.endswith(".npy"):
        return Panel(title, image=_slice_2d(_read_npy(path)), role=role)
    if name.endswith((".nii", ".nii.gz")):
        return Panel(title, image=_slice_2d(_read_nifti(path), nifti=True), role=role)
    return Panel(title, note=f"no picture for {path.suffix or 'this'} files", role=role)


def default_case_picture(input_files: list[str], output_files: list[str], inputs: Path, outputs: Path | None,
                         reference: Path, output_note: str = "no valid output") -> CasePicture:
    """The picture a track gets without drawing its own: each input file, each output file and each reference
    file of the case (the first two of each), as `file_panel` draws them."""
    panels = [_safe_panel(inputs / name, f"input {name}", "input") for name in input_files[:2]]
    for name in output_files[:2]:
        panels.append(_safe_panel(outputs / name, f"output {name}", "output") if outputs is not None
                      else Panel(f"output {name}", note=output_note, role="output"))
    for name in _regular_names(reference)[:2]:
        panels.append(_safe_panel(reference / name, f"reference {name}", "reference"))
    return CasePicture(panels)


def _safe_panel(path: Path, title: str, role: str) -> Panel:
    """`file_panel`, or a note saying why this one file is not drawn (the case's other panels still are)."""
    try:
        return file_panel(path, title, role)
    except Exception as exc:  # a refused header, an unreadable file: MemoryError under the evaluator's limit too
        message = str(exc).replace(str(path.parent) + os.sep, "")  # the file's name, not where the data lives
        return Panel(title, note=f"not drawn: {type(exc).__name__}: {message[:200]}", role=role)


def _regular(path: Path) -> None:
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path.name}: not a regular file")
    if info.st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path.name}: {info.st_size} bytes (more than {MAX_FILE_BYTES})")


def _regular_names(folder: Path, limit: int = 1000) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return sorted(e.name for _, e in zip(range(limit), entries, strict=False)
                          if e.is_file(follow_symlinks=False) and not e.name.startswith("."))
    except OSError:
        return []


def _read_npy(path: Path) -> Any:
    import numpy as np

    from .untrusted import check_image

    _regular(path)
    check_image(path, max_pixels=MAX_FILE_PIXELS, max_bytes=8 * MAX_FILE_PIXELS, one_name=False)
    return np.load(path, allow_pickle=False)


def _read_nifti(path: Path) -> Any:
    import numpy as np

    from .untrusted import check_image

    _regular(path)
    check_image(path, max_pixels=MAX_FILE_PIXELS, max_bytes=8 * MAX_FILE_PIXELS, one_name=False)
    import nibabel

    return np.asanyarray(nibabel.load(str(path)).dataobj)


def _slice_2d(array: Any, nifti: bool = False) -> Any:
    """A 2-D view of an array: an RGB image as it is, a volume's middle slice along its thinnest axis (turned for
    display when it is a NIfTI's x-y plane; a plain array's rows stay rows)."""
    import numpy as np

    array = np.squeeze(np.asarray(array))
    if array.ndim == 3 and array.shape[-1] in (3, 4) and array.dtype == np.uint8:
        return array[..., :3]
    if array.ndim == 3:
        axis = int(np.argmin(array.shape))
        if nifti:
            return volume_slice(array, axis=axis)
        return np.take(array, array.shape[axis] // 2, axis=axis)
    if array.ndim != 2:
        raise ValueError(f"a {array.ndim}-D array has no default picture")
    return array


# ---------------------------------------------------------------- rendering


def _grey8(image: Any, window: tuple[float, float] | None) -> Any:
    import numpy as np

    values = np.asarray(image, dtype=np.float32)
    finite = values[np.isfinite(values)]
    if window is None:
        low, high = (np.percentile(finite, [1, 99]) if finite.size else (0.0, 1.0))
    else:
        low, high = window
    if not high > low:
        high = low + 1.0
    scaled = (np.nan_to_num(values, nan=low, posinf=high, neginf=low) - low) / (high - low)
    return (np.clip(scaled, 0, 1) * 255).astype(np.uint8)


def _panel_image(panel: Panel, side: int, fitted: dict[tuple[Any, ...], Any]) -> Any:
    """The panel drawn: its image fitted to `side`, the mask's outlines and fill and the boxes over it. `fitted`
    keeps each fitted image by (image, window, aspect): panels that share their image fit it once."""
    import numpy as np
    from PIL import ImageDraw

    key = (id(panel.image), panel.window, panel.aspect, side)
    if key not in fitted:
        fitted[key] = _fit_image(panel, side)
    base, (width, height) = fitted[key]
    picture = base.copy()
    size = picture.size
    if panel.mask is not None:
        picture = _overlay(picture, np.asarray(panel.mask), size)
    if panel.boxes:
        draw = ImageDraw.Draw(picture)
        colour = ROLE_COLOURS.get(panel.role, ROLE_COLOURS["output"])
        extent_w, extent_h = panel.extent or (width, height)
        sx, sy = size[0] / max(float(extent_w), 1e-9), size[1] / max(float(extent_h), 1e-9)
        labelled = len(panel.boxes) <= MAX_LABELLED  # a crowded image keeps its boxes and loses their labels
        for box in panel.boxes[:200]:
            x1, x2 = sorted((float(box.x1) * sx, float(box.x2) * sx))
            y1, y2 = sorted((float(box.y1) * sy, float(box.y2) * sy))
            if not all(np.isfinite([x1, y1, x2, y2])):
                continue
            draw.rectangle([x1, y1, x2, y2], outline=colour, width=2)
            if box.label and labelled:
                draw.text((x1 + 2, max(0.0, y1 - 12)), str(box.label)[:12], fill=colour, font=_font(10))
    return picture


def _fit_image(panel: Panel, side: int) -> tuple[Any, tuple[int, int]]:
    """The panel's image as RGB fitted to `side` (aspect kept, pixels made square), and its size before fitting."""
    import numpy as np
    from PIL import Image

    array = np.asarray(panel.image)
    if array.ndim == 3 and array.shape[-1] in (3, 4):
        rgb = array[..., :3] if array.dtype == np.uint8 else _grey8(array[..., :3], panel.window)
        base = Image.fromarray(np.ascontiguousarray(rgb), "RGB")
    elif array.ndim == 2:
        base = Image.fromarray(_grey8(array, panel.window), "L").convert("RGB")
    else:
        raise ValueError(f"a panel image must be 2-D or H x W x 3, not {array.shape}")
    width, height = base.size
    aspect = float(panel.aspect) if np.isfinite(panel.aspect) and 0.05 <= panel.aspect <= 20 else 1.0
    if aspect != 1.0:  # stretch to square pixels first (nearest: voxels stay crisp)
        base = base.resize((width, max(1, round(height * aspect))), Image.Resampling.NEAREST)
        width, height = base.size
    # a large image is shrunk to `side`; a small one enlarged by a whole factor (crisp voxels), up to `side`
    scale = side / max(width, height) if max(width, height) > side else max(1, side // max(width, height))
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    if scale > 1:
        return base.resize(size, Image.Resampling.NEAREST), base.size
    return base.resize(size, Image.Resampling.LANCZOS, reducing_gap=2.0), base.size


def _overlay(picture: Any, mask: Any, size: tuple[int, int]) -> Any:
    import numpy as np
    from PIL import Image

    if mask.ndim != 2:
        raise ValueError(f"a mask must be 2-D, not {mask.shape}")
    labels = np.asarray(mask).astype(np.int64, copy=False)
    small = np.asarray(Image.fromarray(np.clip(labels, 0, 255).astype(np.uint8), "L").resize(
        size, Image.Resampling.NEAREST))
    rgb = np.asarray(picture).astype(np.float32)
    edge = np.zeros(small.shape, bool)
    edge[1:, :] |= small[1:, :] != small[:-1, :]
    edge[:, 1:] |= small[:, 1:] != small[:, :-1]
    for label in [v for v in np.unique(small) if v != 0][:len(LABEL_COLOURS)]:
        colour = np.array(LABEL_COLOURS[(int(label) - 1) % len(LABEL_COLOURS)], np.float32)
        inside = small == label
        rgb[inside] = 0.6 * rgb[inside] + 0.4 * colour
        rgb[inside & edge] = colour
    return Image.fromarray(rgb.astype(np.uint8), "RGB")


def render(picture: CasePicture, side: int = THUMB) -> bytes | None:
    """The picture's image panels side by side under their titles, as a palette PNG, or a grey one when nothing
    in it has colour (None: no image panel)."""
    import numpy as np
    from PIL import Image, ImageDraw

    cells = []
    fitted: dict[tuple[Any, ...], Any] = {}
    for panel in picture.panels:
        if panel.image is not None:
            cells.append((panel.title, _panel_image(panel, side, fitted)))
        elif panel.note and not panel.text:
            cells.append((panel.title, _note_cell(panel.note, side)))
        if len(cells) >= MAX_PANELS:
            break
    if not cells:
        return None
    title_h, gap = 16, 6
    width = sum(image.width for _, image in cells) + gap * (len(cells) - 1)
    height = title_h + max(image.height for _, image in cells)
    canvas = Image.new("RGB", (width, height), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    x = 0
    for title, image in cells:
        draw.text((x + 1, 1), _fit(title, image.width), fill=(45, 45, 45), font=_font())
        canvas.paste(image, (x, title_h))
        x += image.width + gap
    buffer = io.BytesIO()
    pixels = np.asarray(canvas)
    if (pixels[..., 0] == pixels[..., 1]).all() and (pixels[..., 1] == pixels[..., 2]).all():
        # all grey (CT, MR, X-ray without overlays): 64 grey levels keep every gradient smooth and compress well
        canvas.convert("L").point(lambda v: v & 0xFC).save(buffer, format="PNG")
    else:
        canvas.quantize(colors=PALETTE, method=Image.Quantize.FASTOCTREE).save(buffer, format="PNG")
    return buffer.getvalue()


@functools.lru_cache(maxsize=4)
def _font(size: int = 12) -> Any:
    """Pillow's bundled font at `size` (scalable where Pillow has FreeType; its bitmap font otherwise)."""
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except (TypeError, OSError, ImportError):
        return ImageFont.load_default()


def _note_cell(note: str, side: int) -> Any:
    from PIL import Image, ImageDraw

    size = side // 2
    cell = Image.new("RGB", (size, size), (240, 242, 245))
    draw = ImageDraw.Draw(cell)
    words, lines, line = note.split(), [], ""
    for word in words:
        if len(line) + len(word) + 1 > size // 7:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    for row, text in enumerate(lines[:8]):
        draw.text((6, 6 + 14 * row), text, fill=(120, 40, 30), font=_font())
    return cell


def _fit(title: str, width: int) -> str:
    limit = max(4, width // 7)
    return title if len(title) <= limit else title[:limit - 1] + "…"


# ---------------------------------------------------------------- the run's pictures folder


MAX_LEGEND_LABELS = 40  # label names a case's index entry keeps (the colours repeat from label 11 on)


def label_legend(labels: dict[Any, Any]) -> list[str]:
    """A mask's label names with the colour each is drawn in ("organ red"), label by label. Every label up to
    MAX_LEGEND_LABELS, not the first ten: from label 11 on the colours repeat (`_overlay`), so a 14-organ map's
    aorta is drawn red like its spleen, and a legend naming only the spleen red named it wrongly."""
    named = []
    for value, name in list(labels.items())[:MAX_LEGEND_LABELS]:
        try:
            index = (int(value) - 1) % len(LABEL_COLOURS)
        except (TypeError, ValueError):
            continue
        named.append(f"{str(name)[:60]} {LABEL_COLOUR_NAMES[index]}")
    return named


def picture_marks(picture: CasePicture) -> list[str]:
    """What the drawn panels carry over their images ("mask", "boxes-<role>"), for the run page's legend: a VQA
    image, a denoised slice and a detection's boxes each need their own words, not one caption for all."""
    marks: set[str] = set()
    drawn = [panel for panel in picture.panels if panel.image is not None][:MAX_PANELS]
    for panel in drawn:
        if panel.mask is not None:
            marks.add("mask")
        if panel.boxes:  # coloured as `_panel_image` colours them: an unknown role draws as an output
            marks.add(f"boxes-{panel.role if panel.role in ROLE_COLOURS else 'output'}")
    return sorted(marks)


class PictureWriter:
    """Writes each case's PNG and text panels into `<run>/pictures/` within the run's budget, then the index the
    run page reads (`index.json`: per case its file, texts and any note)."""

    def __init__(self, folder: Path, max_bytes: int = MAX_RUN_BYTES, max_pictures: int = MAX_PICTURES) -> None:
        self.folder = folder
        self.max_bytes, self.max_pictures = max_bytes, max_pictures
        self.spent = 0
        self.cpu_s = 0.0  # what drawing cost the evaluator (its caller adds it up), recorded in the index
        self.entries: list[dict[str, Any]] = []

    def room(self) -> bool:
        return len([e for e in self.entries if e.get("file")]) < self.max_pictures and self.spent < self.max_bytes

    def add(self, case_id: str, picture: CasePicture | None, error: str = "") -> None:
        entry: dict[str, Any] = {"case_id": case_id, "file": None, "texts": [], "caption": "", "note": error}
        if picture is not None:
            entry["caption"] = str(picture.caption)[:300]
            entry["texts"] = [{"title": str(p.title)[:120], "text": str(p.text)[:MAX_TEXT_CHARS], "role": p.role}
                              for p in picture.panels if p.text][:6]
            entry["marks"] = picture_marks(picture)
            if "mask" in entry["marks"] and isinstance(picture.labels, dict):
                entry["labels"] = label_legend(picture.labels)
            if not self.room():
                entry["note"] = "not drawn: the run's picture budget is spent"
            else:
                data = render(picture)
                if data is not None and len(data) > MAX_CASE_BYTES:
                    data = render(picture, THUMB // 2)
                if data is not None and len(data) <= MAX_CASE_BYTES and self.spent + len(data) <= self.max_bytes:
                    name = f"case-{len(self.entries):04d}.png"
                    atomic_write_bytes(self.folder / name, data, shared=True)
                    self.spent += len(data)
                    entry["file"] = name
                elif data is not None:
                    entry["note"] = "not drawn: over the picture size budget"
        self.entries.append(entry)

    def close(self) -> None:
        atomic_write_text(self.folder / INDEX, json.dumps({"version": 1, "bytes": self.spent,
                                                          "cpu_s": round(self.cpu_s, 3), "cases": self.entries}),
                          shared=True)


def copy_pictures(source: Path, dest: Path) -> None:
    """The case pictures an evaluator drew elsewhere (a container's output folder) into the run folder: regular
    files with the names the picture writer gives, each within the writer's own bounds (nothing else is taken)."""
    fd = open_dir(source)
    if fd is None:
        return
    try:
        names = sorted(n for n in os.listdir(fd) if n == INDEX or re.fullmatch(r"case-\d{4}\.png", n))
        for name in names[:MAX_PICTURES + 1]:
            data = read_regular(fd, name, 4 << 20 if name == INDEX else MAX_CASE_BYTES)
            if data is not None:
                atomic_write_bytes(dest / name, data, shared=True)
    finally:
        os.close(fd)
