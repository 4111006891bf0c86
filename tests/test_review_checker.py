"""Adversarial review of the segmentation checker: a header must be refused before its voxels are read."""

from __future__ import annotations

from pathlib import Path


def _nifti_claiming(path: Path, shape: tuple[int, ...], dtype: str = "uint8") -> None:
    """A .nii.gz whose header claims `shape` but which holds almost no data (what a bomb's header says)."""
    import gzip

    import nibabel as nib
    import numpy as np

    header = nib.Nifti1Header()
    header.set_data_dtype(np.dtype(dtype))
    header.set_data_shape(shape)
    header.set_qform(np.eye(4), code=1)
    header.set_sform(np.eye(4), code=1)
    header["vox_offset"] = 352
    raw = header.binaryblock + b"\0" * 4 + b"\1" * 1024
    path.write_bytes(gzip.compress(raw))


def test_checker_rejects_a_wrong_header_before_loading_the_voxels(tmp_path):
    """A header claiming 600 MB of voxels must be refused on its shape, without allocating them."""
    import tracemalloc

    from automedbench_segmentation.contract import check_file

    bomb = tmp_path / "organ.nii.gz"
    _nifti_claiming(bomb, (1000, 1000, 600))
    tracemalloc.start()
    try:
        problems = check_file(bomb, (64, 64, 32), __import__("numpy").eye(4), {0, 1})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert problems and "shape" in problems[0], problems
    assert peak < 50 << 20, f"allocated {peak >> 20} MB for a file it rejects"


def test_checker_rejects_an_unsupported_dtype_before_loading(tmp_path):
    """complex128 voxels cost 16 bytes each and are never valid; the header says so before any is read."""
    import tracemalloc

    import numpy as np
    from automedbench_segmentation.contract import check_file

    path = tmp_path / "organ.nii.gz"
    shape = (256, 256, 128)
    _nifti_claiming(path, shape, "complex128")
    tracemalloc.start()
    try:
        problems = check_file(path, shape, np.eye(4), {0, 1})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert problems and "dtype" in problems[0], problems
    assert peak < 50 << 20, f"allocated {peak >> 20} MB for a file it rejects"
