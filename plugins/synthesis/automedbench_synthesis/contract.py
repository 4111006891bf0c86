"""The output contract: `<case>/sct.nii.gz`, a finite 3-D NIfTI in HU with the input's shape.

As the release's checker, the affine is not part of validity: the voxel array is scored as stored (SSIM along
array axis 2) whatever header it carries; an affine unlike the input's is reported (`affine_matches` per case,
`affine_mismatch_cases` in the components), never refused.

Every file is opened below the outputs folder with O_NOFOLLOW at each level (no symlink followed, no
hard link, regular files only), read with a size limit derived from the expected shape, decompressed
with a bound, and parsed from memory by nibabel only after the header's dimensions were checked. The
same reader serves the evaluator (frozen copies) and the pre-submit gate (the agent's live folder).
"""

from __future__ import annotations

import errno
import io
import math
import os
import stat
import struct
from pathlib import Path

import numpy as np
from automedbench.api import CaseVerdict, TaskSpec, UserError, gunzip, open_below, valid_output_gate

OUTPUT = "sct.nii.gz"
HEADER_SLACK = 1 << 20  # header, extensions and gzip overhead allowed beyond the voxels themselves
AFFINE_TOL = 1e-3
GZIP_MAGIC = b"\x1f\x8b"
NOT_GZIP = "not gzip-compressed"


def header_shape(raw: bytes) -> tuple[tuple[int, ...], np.dtype, type]:
    """(dimensions, voxel dtype, image class) a NIfTI-1/2 header declares, from its first bytes; ValueError."""
    import nibabel as nib

    if len(raw) < 348:
        raise ValueError("not a NIfTI file (shorter than a header)")
    for endian in "<>":
        size = struct.unpack_from(endian + "i", raw, 0)[0]
        if size in (348, 540):
            break
    else:
        raise ValueError("not a NIfTI file (bad sizeof_hdr)")
    klass = nib.Nifti1Header if size == 348 else nib.Nifti2Header
    try:  # nibabel's own refusals (a bad magic, an unknown data type) are HeaderDataError, not ValueError
        header = klass.from_fileobj(io.BytesIO(raw[:size]))
        dims, dtype = tuple(int(d) for d in header.get_data_shape()), np.dtype(header.get_data_dtype())
    except Exception as exc:
        raise ValueError(f"unreadable header ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None
    return dims, dtype, nib.Nifti1Image if size == 348 else nib.Nifti2Image


def parse_nifti(data: bytes, shape: tuple[int, ...] | None, origin: str) -> tuple[np.ndarray, np.ndarray]:
    """(voxels as float32, affine) of NIfTI bytes (gzip or not), bounded by `shape` when given; ValueError."""
    limit = (math.prod(shape) * 8 if shape else 1 << 31) + HEADER_SLACK
    if data[:2] == GZIP_MAGIC:
        try:
            data = gunzip(data, origin, limit)
        except UserError as exc:
            raise ValueError(str(exc).removeprefix(f"{origin}: ")) from None
    dims, dtype, image_class = header_shape(data)
    if shape is None and len(dims) > 3 and all(d == 1 for d in dims[3:]):
        dims = dims[:3]  # a download stored as (x, y, z, 1): the same volume
    if len(dims) != 3:
        raise ValueError(f"{len(dims)}-D image, expected a 3-D volume")
    if shape is not None and dims != tuple(shape):
        raise ValueError(f"shape {dims} != input {tuple(shape)}")
    if dtype.kind not in "iuf":
        raise ValueError(f"unsupported voxel type {dtype}")
    if len(data) > limit:
        raise ValueError(f"{len(data)} bytes, more than a {dims} volume needs")
    try:
        image = image_class.from_bytes(data)
        volume = np.asarray(image.get_fdata(dtype=np.float32)).reshape(dims)
    except Exception as exc:  # nibabel raises many kinds on a damaged file
        raise ValueError(f"unreadable ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None
    return volume, np.asarray(image.affine, dtype=np.float64)


# The last volume the evaluator's checker parsed, by its file's identity (device, inode, size, mtime and ctime in
# ns: any write changes the ctime): scoring the same case right after decodes it once, not twice (decoding a
# gzip-compressed volume costs more than scoring it).
_PARSED: tuple[tuple[int, ...], tuple[int, ...], str, np.ndarray, np.ndarray] | None = None


def _identity(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _remembered(info: os.stat_result, shape: tuple[int, ...], name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The remembered parse of this very file version (taken, not kept: at most one volume is held)."""
    global _PARSED
    found, _PARSED = _PARSED, None
    if found is not None and found[:3] == (_identity(info), tuple(shape), name):
        return found[3], found[4]
    return None


def read_volume(root: Path, case_id: str, name: str, shape: tuple[int, ...],
                affine: np.ndarray | None, remember: bool = False) -> tuple[np.ndarray | None, list[str]]:
    """(volume or None, reasons it is invalid) for root/case_id/name: present, readable, shape, finite, and the
    affine when one is given (the stagers' own reads; the output checker passes None, as the release).
    `remember`: keep the parsed volume for the next read of the same bytes (the checker, before the scorer)."""
    volume, got_affine, reasons = read_output(root, case_id, name, shape, remember)
    if volume is not None and affine is not None and not affine_matches(got_affine, affine):
        return None, [f"{name}: affine differs from the input's (keep the input's header: same grid, spacing "
                      "and orientation)"]
    return volume, reasons


def affine_matches(got: np.ndarray | None, expected: np.ndarray) -> bool:
    return got is not None and bool(np.allclose(got, expected, atol=AFFINE_TOL))


def read_output(root: Path, case_id: str, name: str, shape: tuple[int, ...],
                remember: bool = False) -> tuple[np.ndarray | None, np.ndarray | None, list[str]]:
    """(volume or None, its affine, reasons it is invalid): present, readable (gzip-compressed when named `.gz`, as
    nibabel reads it), the given shape, finite."""
    try:
        fd = open_below(root, [case_id, name])
    except FileNotFoundError:
        return None, None, [f"{name}: missing"]
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return None, None, [f"{name}: a symlink or a non-folder on the path (not followed)"]
        return None, None, [f"{name}: cannot open ({exc.strerror})"]
    limit = math.prod(shape) * 8 + HEADER_SLACK
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None, None, [f"{name}: not a regular file"]
        if info.st_nlink > 1:
            return None, None, [f"{name}: a hard link (shares its inode with another file)"]
        if info.st_size > limit:
            return None, None, [f"{name}: {info.st_size} bytes, more than a {tuple(shape)} volume can need"]
        parsed = _remembered(info, shape, name)
        data = handle.read(limit + 1) if parsed is None else b""
    if parsed is None:
        try:
            if name.endswith(".gz") and data[:2] != GZIP_MAGIC:
                # the release loads the output with nibabel, which takes a `.gz` name for gzip and fails on plain
                # bytes (round 23; this reader's leniency, kept for downloads, scored such a file as a volume)
                header_shape(data)  # bytes that are no NIfTI at all are told so, as before
                raise ValueError(f"{NOT_GZIP} (an uncompressed .nii under a .nii.gz name; save it with nibabel or "
                                 "SimpleITK under this name, which compresses it, or gzip the file)")
            parsed = parse_nifti(data, shape, name)
        except ValueError as exc:
            return None, None, [f"{name}: {exc}"]
        parsed[0].flags.writeable = False  # the scorer may get this very array: nothing may change it
        if remember:
            global _PARSED
            _PARSED = (_identity(info), tuple(shape), name, *parsed)
    volume, got_affine = parsed
    bad = int(volume.size - np.count_nonzero(np.isfinite(volume)))
    if bad:
        return None, None, [f"{name}: {bad} NaN/Inf voxel(s)"]
    return volume, got_affine, []


def input_geometry(task: TaskSpec, public_case: Path) -> tuple[tuple[int, ...], np.ndarray]:
    """The input's shape and affine (from the harness-written public file's header only)."""
    import nibabel as nib

    image = nib.load(str(public_case / task.input_files[0]))
    return tuple(int(n) for n in image.shape), np.asarray(image.affine, dtype=np.float64)


def check_case(task: TaskSpec, case_id: str, submitted: Path, public: Path) -> CaseVerdict:
    """The checker's verdict for one case folder (`submitted`: the frozen copy; `public`: the case's inputs)."""
    shape, _ = input_geometry(task, public)
    _, _, reasons = read_output(submitted.parent, case_id, OUTPUT, shape, remember=True)
    present = reasons[:1] != [f"{OUTPUT}: missing"]
    return CaseVerdict(case_id, present, not reasons, reasons)


def gate(task: TaskSpec, case_ids: list[str], public: Path, outputs: Path) -> str | None:
    """The pre-submit refusal: fewer than ceil(min_valid x N) valid outputs."""
    def problem(case_id: str) -> str | None:
        _, _, reasons = read_output(outputs, case_id, OUTPUT, input_geometry(task, public / case_id)[0])
        return reasons[0] if reasons else None

    return valid_output_gate(case_ids, task.rating.min_valid, problem, OUTPUT,
                             "a finite 3-D NIfTI in HU with the input's shape")
