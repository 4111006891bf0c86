"""Reading downloaded volumes as untrusted input: NIfTI (.nii / .nii.gz) and MetaImage (.mha), bounded.

Files are read through the API's no-follow, size-limited reader. The header is read first (from the first
bytes of the gzip stream for a .nii.gz): its dimensions are checked against the voxel budget and against
memory (the raw voxels plus the float32 copy a stager makes) before any voxel is decompressed, and the
stream is then decompressed to exactly the size the header declares, no further. A geometry that is not
finite (NaN or infinite spacing, offset or direction, a spacing not above 0) is refused. Each refusal is
one line (a `UserError`) naming the file.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from automedbench.api import UserError, check_pixels, finite_numbers, inflate, read_download_bytes

MAX_FILE_BYTES = 2 << 30  # one CT volume of a public dataset, compressed
MAX_VOXELS = 1 << 28  # 512 x 512 x 1024
MAX_MHA_HEADER = 1 << 16
FLOAT_COPY = 4  # bytes per voxel of the float32 copy every reader returns, beside the stored voxels
NIFTI_SLACK = 1 << 20  # header extensions before the voxels
MHA_TYPES = {"MET_UCHAR": "u1", "MET_CHAR": "i1", "MET_USHORT": "u2", "MET_SHORT": "i2", "MET_UINT": "u4",
             "MET_INT": "i4", "MET_FLOAT": "f4", "MET_DOUBLE": "f8"}


def read_nifti(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(float32 voxels, affine) of a downloaded NIfTI volume, its header checked before the voxels are
    decompressed."""
    from ..contract import header_shape, parse_nifti

    data = read_download_bytes(path, MAX_FILE_BYTES)
    gz = data[:2] == b"\x1f\x8b"
    head = inflate(data, str(path), 540, "gzip", head=True) if gz else data[:540]
    try:
        dims, dtype, _ = header_shape(head)
    except ValueError as exc:
        raise UserError(f"{path}: {exc}") from None
    if any(d < 0 for d in dims):
        raise UserError(f"{path}: header declares a negative size {list(dims)}")
    check_pixels(list(dims), dtype.itemsize + FLOAT_COPY, str(path), MAX_VOXELS)  # voxels and memory, undecoded
    need = math.prod(dims) * dtype.itemsize + NIFTI_SLACK
    if gz:
        data = inflate(data, str(path), need, "gzip")  # no further than the header declares
    try:
        volume, affine = parse_nifti(data, None, path.name)
    except ValueError as exc:
        raise UserError(f"{path}: {exc}") from None
    if not np.isfinite(affine).all() or abs(np.linalg.det(affine[:3, :3])) < 1e-12:
        raise UserError(f"{path}: the header's geometry (voxel sizes, affine) is not finite or is singular")
    return volume, affine


def read_mha(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(float32 voxels on axes x, y, z, RAS affine) of a single-file MetaImage (ElementDataFile = LOCAL)."""
    data = read_download_bytes(path, MAX_FILE_BYTES)
    end = data.find(b"ElementDataFile", 0, MAX_MHA_HEADER)
    line_end = data.find(b"\n", end) if end >= 0 else -1
    if end < 0 or line_end < 0:
        raise UserError(f"{path}: not a MetaImage file (no ElementDataFile line in its first {MAX_MHA_HEADER} bytes)")
    fields: dict[str, str] = {}
    for line in data[:line_end].decode("latin-1").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip()
    payload = data[line_end + 1:]
    try:
        if fields.get("ElementDataFile") != "LOCAL":
            raise ValueError("only ElementDataFile = LOCAL (a single .mha) is read")
        dims = [int(v) for v in fields["DimSize"].split()]
        if len(dims) != 3 or int(fields.get("NDims", "3")) != 3 or min(dims) < 1:
            raise ValueError(f"DimSize {fields['DimSize']!r} is not a 3-D volume")
        if math.prod(dims) > MAX_VOXELS:
            raise ValueError(f"declares {math.prod(dims)} voxels, more than {MAX_VOXELS}")
        if int(fields.get("ElementNumberOfChannels", "1")) != 1:
            raise ValueError("more than one channel")
        dtype = np.dtype(MHA_TYPES[fields["ElementType"]])
        msb = fields.get("BinaryDataByteOrderMSB", fields.get("ElementByteOrderMSB", "False")).lower() == "true"
        dtype = dtype.newbyteorder(">" if msb else "<")
        spacing = finite_numbers(fields.get("ElementSpacing", fields.get("ElementSize", "1 1 1")), "ElementSpacing",
                                 3, positive=True)
        offset = finite_numbers(fields.get("Offset", fields.get("Position", "0 0 0")), "Offset", 3)
        matrix = finite_numbers(fields.get("TransformMatrix", "1 0 0 0 1 0 0 0 1"), "TransformMatrix", 9)
        if abs(np.linalg.det(np.array(matrix).reshape(3, 3))) < 1e-6:
            raise ValueError("TransformMatrix is singular")
    except KeyError as exc:
        raise UserError(f"{path}: MetaImage header lacks {exc.args[0]}") from None
    except ValueError as exc:
        raise UserError(f"{path}: {exc}") from None
    need = math.prod(dims) * dtype.itemsize
    check_pixels(dims, dtype.itemsize + FLOAT_COPY, str(path), MAX_VOXELS)  # memory, before any voxel is inflated
    if fields.get("CompressedData", "False").lower() == "true":
        payload = inflate(payload, str(path), need)[:need]  # bounded by the header, checked against memory
    if len(payload) < need:
        raise UserError(f"{path}: {len(payload)} bytes of voxels, {need} declared (truncated)")
    # MetaImage stores x fastest: a C-order (z, y, x) array, transposed to nibabel's (x, y, z)
    volume = np.frombuffer(payload[:need], dtype=dtype).reshape(dims[::-1]).transpose(2, 1, 0).astype(np.float32)
    direction = np.array(matrix).reshape(3, 3).T  # columns: the direction of each array axis (ITK, LPS)
    affine = np.eye(4)
    affine[:3, :3] = direction * np.array(spacing)[None, :]
    affine[:3, 3] = offset
    affine[:2, :] *= -1  # LPS -> RAS
    return volume, affine


def read_volume(path: Path) -> tuple[np.ndarray, np.ndarray]:
    return read_mha(path) if path.suffix.lower() == ".mha" else read_nifti(path)
