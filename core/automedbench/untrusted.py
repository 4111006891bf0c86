"""Reading downloaded datasets as untrusted input: every parser a stager uses, with size and shape limits.

A download may be truncated, corrupt or crafted. Stagers read it through these helpers, which refuse
with one line (a `UserError`) before the work grows: files by declared size, never through a symlink;
gzip and zip members by the bytes they decompress to; tar and zip members that are links, devices or
paths leaving the archive; XML with a DOCTYPE (entity expansion, external entities); JSON nested deeper
than any dataset's.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import stat
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any
from xml.etree import ElementTree

from .errors import UserError

MAX_TEXT_BYTES = 1 << 30  # an annotation table or JSON document larger than 1 GiB is no dataset's
MAX_JSON_DEPTH = 64
MAX_MEMBER_BYTES = 1 << 30  # one archive member, decompressed
MAX_MEMBERS = 2_000_000
_DOCTYPE = re.compile(rb"<!\s*(DOCTYPE|ENTITY)", re.I)


def read_bytes(path: Path, max_bytes: int = MAX_TEXT_BYTES) -> bytes:
    """A regular file's bytes, refused when larger than `max_bytes` or when it is a symlink (checked on the fd)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)  # a FIFO must not block
    except OSError as exc:
        raise UserError(f"{path}: cannot be read as a regular file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{path}: not a regular file")
        if info.st_size > max_bytes:
            raise UserError(f"{path}: {info.st_size} bytes, larger than {max_bytes} (not a file of this dataset?)")
        data = fh.read(max_bytes + 1)
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
    """One member's bytes, read no further than `max_bytes` whatever its header declares."""
    with archive.open(name) as fh:
        data = fh.read(max_bytes + 1)
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
    """Decoded bytes one image may take: a quarter of the memory available now (and never more than 8 GiB)."""
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        available = 8 << 30
    return max(64 << 20, min(8 << 30, available // 4))


def _mha_header(path: Path) -> tuple[list[int], int]:
    """DimSize and bytes per element from a MetaImage header (the text before the pixel data)."""
    sizes = {"MET_UCHAR": 1, "MET_CHAR": 1, "MET_USHORT": 2, "MET_SHORT": 2, "MET_UINT": 4, "MET_INT": 4,
             "MET_FLOAT": 4, "MET_ULONG": 8, "MET_LONG": 8, "MET_DOUBLE": 8}
    with open(path, "rb", buffering=0) as fh:
        head = fh.read(1 << 16)
    fields: dict[str, str] = {}
    for line in head.split(b"\n"):
        key, _, value = line.decode("latin-1").partition("=")
        fields[key.strip()] = value.strip()
        if key.strip() == "ElementDataFile":
            break
    dims = [int(v) for v in fields.get("DimSize", "").split()]
    channels = int(fields.get("ElementNumberOfChannels", "1") or 1)
    return [*dims, channels], sizes.get(fields.get("ElementType", ""), 8)


def image_shape(path: Path, kind: str = "") -> tuple[list[int], int]:
    """(dimensions, bytes per element) of an image file read from its header only; ([], 0) for a format
    this layer does not know (the caller's own reader then bounds it). `kind` ("dicom", "mha", ...) names
    the format of a file whose name does not."""
    name = f"x.{kind}" if kind else path.name.lower()
    if name.endswith((".nii", ".nii.gz", ".img", ".hdr")):
        import nibabel

        header = nibabel.load(str(path)).header  # the header only: the data stays on disk
        return [int(d) for d in header.get_data_shape()], int(header.get_data_dtype().itemsize)
    if name.endswith((".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".gif", ".webp")):
        from PIL import Image

        with Image.open(path) as image:  # lazy: the header is read, no pixel yet
            return [image.width, image.height, len(image.getbands())], 2 if image.mode.startswith("I;16") else (
                4 if image.mode in ("I", "F") else 1)
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


def check_image(path: Path, max_pixels: int = MAX_IMAGE_PIXELS, max_bytes: int | None = None,
                kind: str = "") -> Path:
    """`path` if its header declares an image small enough to decode (pixels and memory), else one line.

    Checked before any decoding: a crafted header (a 100000 x 100000 PNG, a NIfTI declaring 10^12 voxels)
    is refused here instead of exhausting memory while the stager decodes it."""
    if path.is_symlink():
        raise UserError(f"{path}: a symlink in the download; refused")
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
