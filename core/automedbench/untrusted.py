"""Reading downloaded datasets as untrusted input: every parser a stager uses, with size and shape limits.

A download may be truncated, corrupt or crafted. Stagers read it through these helpers, which refuse
with one line (a `UserError`) before the work grows: files by declared size, never through a symlink or a
hard link (a second name of a file that may live outside the download); gzip and zip members by the
bytes they decompress to; tar and zip members that are links, devices or paths leaving the archive; XML
with a DOCTYPE (entity expansion, external entities); JSON nested deeper than any dataset's; image
headers declaring more values than memory holds, a negative size, or a geometry that is not finite.

While the engine stages from a download, `hostile_download_guard` also refuses every Python-level open
of a file below it that is a symlink (or reached through one), a hard link, a device or a FIFO: a
stager's own `open`, `shutil.copyfile`, PIL, nibabel or pydicom included. Readers in C (h5py, pyarrow,
SimpleITK) are not seen by it: call `check_download_file` on a path before handing it to one.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import os
import re
import stat
import sys
import threading
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any
from xml.etree import ElementTree

from .errors import UserError

MAX_TEXT_BYTES = 1 << 30  # an annotation table or JSON document larger than 1 GiB is no dataset's
MAX_JSON_DEPTH = 64
MAX_MEMBER_BYTES = 1 << 30  # one archive member, decompressed
MAX_MEMBERS = 2_000_000
_DOCTYPE = re.compile(rb"<!\s*(DOCTYPE|ENTITY)", re.I)


def _link_problem(info: os.stat_result, one_name: bool = True) -> str:
    """Why a file of a download must not be read ('' when it may): not regular, or more than one name (unless
    `one_name` is False: a file of the harness's own data root, see `check_image`)."""
    if stat.S_ISLNK(info.st_mode):
        return "a symlink"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file (a device, FIFO or socket)"
    if one_name and info.st_nlink > 1:
        return (f"a hard link ({info.st_nlink} names for one file: it may be a file from outside the download; "
                "copy the download without hard links, e.g. cp -r)")
    return ""


def check_download_file(path: Path, one_name: bool = True) -> Path:
    """`path` if it is a regular file of the download with one name (any number with `one_name=False`) and no
    symlink in its last component, else one line. For readers that open files themselves in C (h5py, pyarrow,
    SimpleITK)."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror})") from None
    problem = _link_problem(info, one_name)
    if problem:
        raise UserError(f"{path}: {problem}; refused")
    return Path(path)


def read_bytes(path: Path, max_bytes: int = MAX_TEXT_BYTES) -> bytes:
    """A regular file's bytes, refused when larger than `max_bytes`, when it is a symlink or when it has more
    than one name (a hard link), all checked on the opened descriptor."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)  # a FIFO must not block
    except OSError as exc:
        raise UserError(f"{path}: cannot be read as a regular file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        problem = _link_problem(info)
        if problem:
            raise UserError(f"{path}: {problem}; refused")
        if info.st_size > max_bytes:
            raise UserError(f"{path}: {info.st_size} bytes, larger than {max_bytes} (not a file of this dataset?)")
        data = fh.read(min(info.st_size, max_bytes) + 1)  # a buffer the file's size, not the limit's
    if len(data) > max_bytes:
        raise UserError(f"{path}: grew past {max_bytes} bytes while being read")
    return data


def _gzip_module() -> tuple[Any, tuple[type[BaseException], ...]]:
    """The gzip reader to use and the errors it raises on damaged data: python-isal's `igzip` where installed
    (the same bytes out, decoded about twice as fast: a track that decodes every submission depends on it), else
    the standard library's."""
    try:
        from isal import igzip, igzip_lib
    except ImportError:
        return gzip, (OSError, EOFError, zlib.error)
    return igzip, (OSError, EOFError, zlib.error, igzip_lib.IsalError)


def gunzip(data: bytes, origin: str, max_bytes: int = MAX_TEXT_BYTES) -> bytes:
    """Decompress gzip data, refusing output past `max_bytes` (a decompression bomb) before it is all in memory."""
    module, damaged = _gzip_module()
    stream = module.GzipFile(fileobj=io.BytesIO(data))
    try:
        out = stream.read(max_bytes + 1)
    except damaged as exc:
        raise UserError(f"{origin}: not readable gzip data ({exc})") from None
    if len(out) > max_bytes:
        raise UserError(f"{origin}: decompresses past {max_bytes} bytes (a decompression bomb?)")
    return out


def read_text(path: Path, max_bytes: int = MAX_TEXT_BYTES, encoding: str = "utf-8-sig") -> str:
    """A text file (`.gz` decompressed, bounded), decoded; undecodable bytes refused with one line."""
    data = read_bytes(path, max_bytes)
    if path.suffix == ".gz":
        data = gunzip(data, str(path), max_bytes)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not {encoding} text ({exc.reason} at byte {exc.start})") from None


def json_depth_ok(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether brackets outside strings nest at most `max_depth` deep (checked before json.loads recurses)."""
    depth, in_string, escaped = 0, False, False
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > max_depth:
                return False
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return True


def loads_json(text: str | bytes, origin: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """json.loads with a nesting limit; malformed or too deep documents refused with one line."""
    if not json_depth_ok(text, max_depth):
        raise UserError(f"{origin}: JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{origin}: not valid JSON ({str(exc)[:120]})") from None


def parse_xml(data: str | bytes, origin: str) -> ElementTree.Element:
    """An XML document without DOCTYPE or entity declarations (no entity expansion, no external entities)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if _DOCTYPE.search(raw):
        raise UserError(f"{origin}: XML with a DOCTYPE or entity declaration refused (entity expansion)")
    try:
        return ElementTree.fromstring(raw)
    except ElementTree.ParseError as exc:
        raise UserError(f"{origin}: not readable XML ({exc})") from None


def member_name_ok(name: str) -> bool:
    """An archive member path that stays inside the archive: relative, no `..`, no NUL, no drive letter."""
    if not name or "\0" in name or "\\" in name or name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        return False
    return ".." not in PurePosixPath(name).parts


def tar_member_ok(member: Any, max_bytes: int = MAX_MEMBER_BYTES) -> str | None:
    """Why a tar member must not be read (link, device, path leaving the archive, too large), or None."""
    if not member_name_ok(member.name):
        return f"member {member.name!r} leaves the archive"
    if member.issym() or member.islnk():
        return f"member {member.name!r} is a link"
    if not (member.isfile() or member.isdir()):
        return f"member {member.name!r} is neither a file nor a folder"
    if member.size > max_bytes:
        return f"member {member.name!r} declares {member.size} bytes (more than {max_bytes})"
    return None


def open_zip(path: Path, max_member_bytes: int = MAX_MEMBER_BYTES, max_ratio: int = 200,
             max_members: int = MAX_MEMBERS) -> zipfile.ZipFile:
    """A zip archive whose every member has a safe name, is no symlink, and declares a bounded size and ratio."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"{path}: not a readable zip archive ({exc})") from None
    infos = archive.infolist()
    problem = f"{len(infos)} members (more than {max_members})" if len(infos) > max_members else None
    for info in infos if problem is None else []:
        kind = (info.external_attr >> 16) & 0o170000
        if not member_name_ok(info.filename):
            problem = f"member {info.filename!r} leaves the archive"
        elif kind == stat.S_IFLNK:
            problem = f"member {info.filename!r} is a symlink"
        elif info.file_size > max_member_bytes:
            problem = f"member {info.filename!r} declares {info.file_size} bytes (more than {max_member_bytes})"
        elif info.file_size > max(info.compress_size, 1) * max_ratio and info.file_size > 1 << 20:
            problem = f"member {info.filename!r} expands {info.file_size // max(info.compress_size, 1)}-fold"
        if problem:
            break
    if problem:
        archive.close()
        raise UserError(f"{path}: {problem}; refused (a crafted or corrupt archive?)")
    return archive


def read_zip_member(archive: zipfile.ZipFile, name: str, max_bytes: int = MAX_MEMBER_BYTES) -> bytes:
    """One member's bytes, read no further than `max_bytes` whatever its header declares; a damaged member
    (bad CRC, truncated or corrupt deflate data, an unsupported method or encryption) is one line."""
    try:
        with archive.open(name) as fh:
            data = fh.read(max_bytes + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError, ValueError) as exc:
        raise UserError(f"{archive.filename}: member {name!r} cannot be read ({type(exc).__name__}: "
                        f"{' '.join(str(exc).split())[:120]}); a damaged or crafted archive?") from None
    if len(data) > max_bytes:
        raise UserError(f"{archive.filename}: member {name!r} decompresses past {max_bytes} bytes")
    return data


# ---------------------------------------------------------------- paths a list file or table names


def inside(root: Path, relative: str | os.PathLike[str], origin: str = "") -> Path:
    """`root / relative` for a path a download's list file or table names, refused with one line when it is
    absolute, climbs out with `..`, or passes through a symlink (any component, the file itself included)."""
    name = os.fspath(relative)
    if not isinstance(name, str) or not member_name_ok(name.replace("\\", "/") if os.sep == "\\" else name):
        raise UserError(f"{origin or root}: path {str(name)[:200]!r} leaves the download folder; refused")
    path = root
    for part in PurePosixPath(name).parts:
        if part in ("", "."):
            continue
        path = path / part
        if path.is_symlink():
            raise UserError(f"{origin or root}: {str(name)[:200]!r} passes through a symlink ({path}); refused")
    return path


# ---------------------------------------------------------------- image headers, before any pixel is decoded

MAX_IMAGE_PIXELS = 1 << 30  # voxels of one image: no dataset of these tracks comes near


def max_image_bytes() -> int:
    """Decoded bytes one image may take: a quarter of the memory available now, never more than 8 GiB, and
    while the engine stages a download never more than a quarter of the free disk where it writes (a
    decoded image is written out again: memory as well as disk bounds it)."""
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        available = 8 << 30
    limit = min(8 << 30, available // 4)
    for _, own in list(_guarded.values()):
        if own:
            try:
                info = os.statvfs(os.path.dirname(own) or ".")
                limit = min(limit, info.f_bavail * info.f_frsize // 4)
            except OSError:
                pass
    return max(64 << 20, limit)


MHA_SIZES = {"MET_UCHAR": 1, "MET_CHAR": 1, "MET_USHORT": 2, "MET_SHORT": 2, "MET_UINT": 4, "MET_INT": 4,
             "MET_FLOAT": 4, "MET_ULONG": 8, "MET_LONG": 8, "MET_DOUBLE": 8}


def mha_fields(head: bytes) -> dict[str, str]:
    """The `key = value` lines of a MetaImage header, up to ElementDataFile."""
    fields: dict[str, str] = {}
    for line in head.split(b"\n"):
        key, _, value = line.decode("latin-1").partition("=")
        fields[key.strip()] = value.strip()
        if key.strip() == "ElementDataFile":
            break
    return fields


def finite_numbers(text: str, what: str, count: int | None = None, positive: bool = False) -> list[float]:
    """The numbers of a header field, refused (ValueError) when one is NaN or infinite, when there are not
    `count` of them, or (`positive`) when one is not above 0: a geometry no grid can be built from."""
    values = [float(v) for v in text.split()]
    if count is not None and len(values) != count:
        raise ValueError(f"{what} has {len(values)} values, expected {count}")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"{what} holds a value that is not finite ({text[:60]!r})")
    if positive and not all(v > 0 for v in values):
        raise ValueError(f"{what} holds a value that is not above 0 ({text[:60]!r})")
    return values


def _mha_header(path: Path) -> tuple[list[int], int]:
    """DimSize and bytes per element from a MetaImage header (the text before the pixel data); ValueError
    for sizes that are not whole numbers or a geometry that is not finite."""
    with open(path, "rb", buffering=0) as fh:
        head = fh.read(1 << 16)
    fields = mha_fields(head)
    dims = [int(v) for v in fields.get("DimSize", "").split()]
    if not dims:
        raise ValueError("no DimSize")
    channels = int(fields.get("ElementNumberOfChannels", "1") or 1)
    n = len(dims)
    if "ElementSpacing" in fields or "ElementSize" in fields:
        finite_numbers(fields.get("ElementSpacing", fields.get("ElementSize", "")), "ElementSpacing", n, positive=True)
    for key in ("Offset", "Position", "Origin"):
        if key in fields:
            finite_numbers(fields[key], key, n)
    for key in ("TransformMatrix", "Orientation", "Rotation"):
        if key in fields:
            finite_numbers(fields[key], key, n * n)
    return [*dims, channels], MHA_SIZES.get(fields.get("ElementType", ""), 8)


def _nifti_geometry(header: Any) -> None:
    """ValueError when a NIfTI header's voxel sizes or affine are not finite, or the affine is singular."""
    import numpy as np

    zooms = [float(z) for z in header.get_zooms()[:3]]
    affine = np.asarray(header.get_best_affine(), dtype=float)
    if not all(math.isfinite(z) for z in zooms) or not np.isfinite(affine).all():
        raise ValueError("voxel sizes or affine not finite")
    if abs(float(np.linalg.det(affine[:3, :3]))) < 1e-12:
        raise ValueError("affine is singular (a zero voxel size?)")


def image_shape(path: Path, kind: str = "") -> tuple[list[int], int]:
    """(dimensions, bytes per element) of an image file read from its header only; ([], 0) for a format
    this layer does not know (the caller's own reader then bounds it). `kind` ("dicom", "mha", ...) names
    the format of a file whose name does not."""
    name = f"x.{kind}" if kind else path.name.lower()
    if name.endswith((".nii", ".nii.gz", ".img", ".hdr")):
        import nibabel

        header = nibabel.load(str(path)).header  # the header only: the data stays on disk
        _nifti_geometry(header)
        return [int(d) for d in header.get_data_shape()], int(header.get_data_dtype().itemsize)
    if name.endswith((".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif", ".webp")):
        from PIL import Image

        with Image.open(path) as image:  # lazy: the header is read, no pixel yet
            return [image.width, image.height, len(image.getbands())], _pil_itemsize(image.mode)
    if name.endswith((".dcm", ".dicom", ".ima")):
        import pydicom

        ds = pydicom.dcmread(str(path), stop_before_pixels=True)
        dims = [int(ds.get("Rows", 0) or 0), int(ds.get("Columns", 0) or 0), int(ds.get("NumberOfFrames", 1) or 1),
                int(ds.get("SamplesPerPixel", 1) or 1)]
        return dims, max(1, int(ds.get("BitsAllocated", 16) or 16) // 8)
    if name.endswith((".mha", ".mhd")):
        return _mha_header(path)
    if name.endswith(".npy"):
        import numpy as np

        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = reader(fh)  # the header only
        return [int(d) for d in shape], int(dtype.itemsize)
    return [], 0


def _pil_itemsize(mode: str) -> int:
    """Bytes one value of a PIL image of `mode` takes decoded (a 32-bit grey or float one, four)."""
    return 2 if mode.startswith("I;16") else 4 if mode in ("I", "F") else 1


def check_image(path: Path, max_pixels: int = MAX_IMAGE_PIXELS, max_bytes: int | None = None,
                kind: str = "", one_name: bool = True) -> Path:
    """`path` if its header declares an image small enough to decode (pixels and memory), else one line.

    Checked before any decoding: a crafted header (a 100000 x 100000 PNG, a NIfTI declaring 10^12 voxels, a
    NaN voxel size) is refused here instead of exhausting memory while the stager decodes it. The file must
    be a regular file with one name (no symlink, no hard link); `one_name=False` for a file of the harness's own
    data root, which a sweep's worker slot hard-links to the staged one (a run's pictures: every image input of a
    `sweep --workers 2` was refused as a hard link and drawn as a note)."""
    if path.is_symlink():
        raise UserError(f"{path}: a symlink in the download; refused")
    check_download_file(path, one_name)
    try:
        dims, itemsize = image_shape(path, kind)
    except UserError:
        raise
    except Exception as exc:  # a header the library cannot read: the file is corrupt or not an image
        raise UserError(f"{path}: unreadable image header ({type(exc).__name__}: {str(exc)[:160]})") from None
    check_pixels(dims, itemsize, str(path), max_pixels, max_bytes)
    return path


def check_pixels(dims: list[int], itemsize: int, origin: str, max_pixels: int = MAX_IMAGE_PIXELS,
                 max_bytes: int | None = None) -> None:
    """Refuse with one line an image whose declared dimensions exceed the pixel or memory bound."""
    if any(d < 0 for d in dims):
        raise UserError(f"{origin}: image header declares a negative size {dims}")
    pixels = 1
    for d in dims:
        pixels *= d
    limit = max_image_bytes() if max_bytes is None else max_bytes
    if pixels > max_pixels or pixels * itemsize > limit:
        raise UserError(f"{origin}: image header declares {'x'.join(map(str, dims))} ({pixels} values, "
                        f"{pixels * itemsize} bytes decoded; limits {max_pixels} values, {limit} bytes); refused, "
                        "not published")


# ---------------------------------------------------------------- images written again, never the source's bytes

PNG_MODES = frozenset({"1", "L", "LA", "I;16", "RGB", "RGBA", "P"})  # PNG holds these as they are


# the mean of |R-G| and |G-B| below which three channels hold a grey image: what storage leaves (JPEG's chroma
# noise, a dithered or colour-managed export: a level or two), not colour anyone sees in the picture (H&E,
# dermoscopy and smears differ by tens of levels)
GREY_CHROMA = 3.0


def grey_content(pixels: Any) -> bool:
    """Whether uint8 pixels hold a grey image: one channel, or three less than GREY_CHROMA levels apart on average."""
    import numpy as np

    pixels = np.asarray(pixels)
    return pixels.ndim == 2 or float(np.abs(np.diff(pixels.astype(np.int16), axis=2)).mean()) < GREY_CHROMA


def one_colour_mode(pixels: Any, colour: bool) -> Any:
    """uint8 pixels in a staging's one colour mode: one channel, or three (`colour`). A grey image gets three equal
    channels whatever its storage: a download's RGB export of a grey radiograph keeps a level of noise between
    them that a grey-stored one lacks, so `R == G == B` would tell how (and, when a class was stored apart, which
    class) the download stored each case."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(pixels)
    grey = pixels if pixels.ndim == 2 else None
    if grey is None and (not colour or grey_content(pixels)):
        grey = np.asarray(Image.fromarray(np.ascontiguousarray(pixels)).convert("L"))
    if grey is None:
        return pixels
    return np.repeat(grey[..., None], 3, axis=2) if colour else grey


# A private ancillary chunk every published PNG carries (decoders skip it; it holds this constant, nothing of the
# image or its source). Without it the encoding was PIL's at level 9, so a source PIL had written at level 9 was
# byte for byte what the stager would publish: it went out at level 1 instead, and re-encoding a published image
# with this public function told those sources from the rest (answered every question of a download that stored
# one answer's images so: Task 1.0 against the prior's 0.58, tests/test_redteam_round30.py). With the chunk, only a
# file this function wrote can match, so the fallback no longer singles out how a download stored its images.
PNG_MARK = (b"amBp", b"automedbench published image")


def _png_mode(image: Any) -> Any:
    """`image` as it is when PNG holds its mode (`PNG_MODES`), else as RGB (RGBA when it has alpha)."""
    return image if image.mode in PNG_MODES else image.convert("RGBA" if "A" in image.mode else "RGB")


def png_bytes(image: Any, avoid: bytes = b"") -> bytes:
    """A PIL image (or a uint8/uint16 array) as PNG with no metadata (no text chunk, ICC profile or EXIF; only
    `PNG_MARK`), never byte for byte `avoid` (the source file: one this function wrote is written at another
    compression level), so no file a sandbox gets matches the download's by hash. The pixels are unchanged."""
    from PIL import Image, PngImagePlugin

    if not isinstance(image, Image.Image):
        import numpy as np

        image = Image.fromarray(np.ascontiguousarray(image))
    frame = _png_mode(image)
    mark = PngImagePlugin.PngInfo()
    mark.add(*PNG_MARK)
    for level in (9, 1):
        buffer = io.BytesIO()
        # icc_profile=None: PIL copies a decoded source's profile (its bytes, in `info`) into the PNG otherwise
        frame.save(buffer, format="PNG", compress_level=level, pnginfo=mark, icc_profile=None)
        if buffer.getvalue() != avoid:
            break
    return buffer.getvalue()


def content_mode(image: Any) -> Any:
    """The image in the mode its pixels need, not the one its source was stored in: a palette becomes grey or
    RGB (with alpha when it has transparency), 1-bit becomes grey, an alpha channel that is opaque everywhere is
    dropped and three equal channels become one. Published as stored, the PNG header (colour type, palette, bit
    depth) said how the download stored each image: a download storing one answer's images as a palette had
    every such question answered from the header alone (tests/test_redteam_round30.py). A mode PNG cannot hold
    (CMYK, YCbCr, 32-bit) and a grey or RGB image's transparent colour (tRNS) go the same way: grey content stored
    as CMYK went out as RGB where stored as RGB it went out grey, and a tRNS chunk went out as stored
    (tests/test_review26.py). Lossless against what `png_bytes` wrote before.

    Channels that differ at all are colour: grey content stored as RGB with +-1 chroma noise goes out RGB. Making
    near-grey RGB grey (channels within 2) hid the colour type (it told such sources 1.00 -> the prior) but is
    lossy and the grey level keeps the noise: its high-frequency energy still told them apart 0.90-1.00 on
    X-ray-like pictures (polish round 4). Those differences are the download's pixels, published as they are."""
    from PIL import ImageChops

    if image.mode in ("P", "PA"):
        image = image.convert("RGBA" if "transparency" in image.info or image.mode == "PA" else "RGB")
    elif image.mode == "1":
        image = image.convert("L")
    image = _png_mode(image)  # CMYK, YCbCr, 32-bit grey...: as PNG holds them, then read as any other
    if image.mode in ("L", "RGB") and "transparency" in image.info:  # a tRNS colour: an alpha channel
        image = image.convert("LA" if image.mode == "L" else "RGBA")
    if image.mode in ("RGBA", "LA") and image.getchannel("A").getextrema() == (255, 255):
        image = image.convert("RGB" if image.mode == "RGBA" else "L")
    if image.mode in ("RGB", "RGBA"):
        red, green, blue = image.getchannel("R"), image.getchannel("G"), image.getchannel("B")
        if ImageChops.difference(red, green).getbbox() is None and ImageChops.difference(green, blue).getbbox() is None:
            image = image.convert("LA" if image.mode == "RGBA" else "L")
    return image


def reencode_image(data: bytes, origin: str, max_pixels: int = MAX_IMAGE_PIXELS) -> bytes:
    """Downloaded image bytes (PNG, JPEG, TIFF, BMP, GIF, WebP) decoded, after their header was checked against
    `max_pixels` and memory, and written again as PNG (`png_bytes`) in the mode its pixels need (`content_mode`):
    the decoded pixels, none of the source's bytes, metadata or storage mode; a multi-frame file keeps its first
    frame. A file PIL cannot decode is one line."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            check_pixels([image.width, image.height, len(image.getbands())], _pil_itemsize(image.mode), origin,
                         max_pixels)
            image.seek(0)
            image.load()
            return png_bytes(content_mode(image), avoid=data)
    except UserError:
        raise
    except Exception as exc:  # PIL raises many types on a damaged or crafted file
        raise UserError(f"{origin}: not a readable image ({type(exc).__name__})") from None


# ---------------------------------------------------------------- decompression bounded before decoding


def inflate(data: bytes, origin: str, max_bytes: int, kind: str = "zlib", head: bool = False) -> bytes:
    """zlib (`kind` "zlib") or gzip data decompressed to at most `max_bytes` (a size the caller derived from a
    header and checked against memory before calling); a damaged stream or more output is one line.
    `head=True`: only the first `max_bytes` (a header to read the sizes from), whatever follows."""
    wbits = {"zlib": zlib.MAX_WBITS, "gzip": 16 + zlib.MAX_WBITS}[kind]
    stream = zlib.decompressobj(wbits)
    try:
        out = stream.decompress(data, max_bytes if head else max_bytes + 1)
    except zlib.error as exc:
        raise UserError(f"{origin}: compressed data unreadable ({exc}); a damaged or crafted file?") from None
    if head:
        return out
    if len(out) > max_bytes:
        raise UserError(f"{origin}: decompresses past the {max_bytes} bytes its header declares; refused")
    return out


# ---------------------------------------------------------------- the engine's guard while staging a download

_guard_lock = threading.Lock()
_guarded: dict[int, tuple[tuple[str, ...], str]] = {}  # token -> (download roots, the staging's own folder)
_hook_installed = False


def _guard_open(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _guarded or not args:
        return
    target = args[0]
    if target is None or isinstance(target, int):
        return
    try:
        name = os.path.abspath(os.fsdecode(os.fspath(target)))
    except (TypeError, ValueError):
        return
    for roots, own in list(_guarded.values()):
        if own and (name == own or name.startswith(own + os.sep)):
            continue  # the staging's own output (the data root may lie inside a download)
        for root in roots:
            if name.startswith(root + os.sep):
                problem = _path_problem(root, name)
                if problem:
                    raise UserError(f"{name}: {problem} in the download; refused (nothing is read through a link)")
                return


def _path_problem(root: str, name: str) -> str:
    """Why opening `name` (below `root`) must be refused: a symlinked component, or a file that is not a
    regular file with one name. Nothing when it does not exist (the open then fails by itself)."""
    current = root
    info = None
    for part in name[len(root) + 1:].split(os.sep):
        if part in ("", "."):
            continue
        current = os.path.join(current, part)
        try:
            info = os.lstat(current)
        except OSError:
            return ""
        if stat.S_ISLNK(info.st_mode):
            return "a symlink" if current == name else f"reached through a symlink ({current})"
    if info is None or stat.S_ISDIR(info.st_mode):
        return ""
    return _link_problem(info)


@contextlib.contextmanager
def hostile_download_guard(source: Path | None, own: Path | None = None) -> Iterator[None]:
    """While in this block, a Python-level open of a file below `source` that is a symlink (or reached
    through one), a hard link, a device or a FIFO raises a one-line `UserError` (an audit hook, installed
    once per process; paths below `own`, the staging's output, are not checked). Nothing when `source` is None."""
    global _hook_installed
    if source is None:
        yield
        return
    given = os.path.abspath(source)
    roots = tuple(dict.fromkeys([given.rstrip(os.sep), os.path.realpath(given).rstrip(os.sep)]))
    token = object()
    with _guard_lock:
        if not _hook_installed:
            sys.addaudithook(_guard_open)
            _hook_installed = True
        _guarded[id(token)] = (roots, os.path.abspath(own) if own is not None else "")
    try:
        yield
    finally:
        with _guard_lock:
            _guarded.pop(id(token), None)
