"""The seven enhancement release tasks' output check against the original checker (round 25).

The original (`eval_image_enhancement/format_checker.py::check_case`), restated as `original_valid`: one checker
for every task, `enhanced.npy` loaded without pickles, 2-D, the reference's shape, a floating dtype, no NaN or
Inf. What differs per task is the shape (the LDCT and CT denoising tasks 512 x 512, the SR tasks twice their
input: 320, 240, 256 and 512 square; mri-sr's grid is the README's documented departure from the original's
720 x 512). Checked for this round on 18 arrays per task (float16/32/64/longdouble, big-endian, Fortran order,
integer, bool and complex dtypes, the input's shape, one row short, a flattened or (H, W, 1) array, NaN, Inf,
values far outside any window): validity equal on every task. No change was needed: the test pins it.
"""

from __future__ import annotations

import numpy as np
import pytest
from automedbench.testing import load_task
from automedbench_enhancement import contract

RELEASE = {
    "ldct-denoising-task": "ldct", "lidc-idri-denoising-task": "lidc-idri-denoising",
    "deeplesion-denoising-task": "deeplesion-denoising", "mri-sr-task": "mri-sr", "brats-t1c-sr-task": "brats-t1c-sr",
    "ixi-t1-sr-task": "ixi-t1-sr", "nih-cxr-sr-task": "nih-cxr-sr",
}


def original_valid(array: np.ndarray, shape: tuple[int, int]) -> bool:
    if array.ndim != 2 or tuple(array.shape) != tuple(shape) or not np.issubdtype(array.dtype, np.floating):
        return False
    return not (np.isnan(array).any() or np.isinf(array).any())


def _arrays(task) -> dict[str, np.ndarray]:
    shape, small = contract.output_shape(task), contract.input_shape(task)
    zeros = np.zeros(shape, np.float32)
    return {
        "float32": zeros, "float64": np.ones(shape), "float16": zeros.astype(np.float16),
        "longdouble": zeros.astype(np.longdouble), "big-endian": zeros.astype(">f4"),
        "Fortran order": np.asfortranarray(zeros), "int16": zeros.astype(np.int16), "uint8": zeros.astype(np.uint8),
        "bool": zeros.astype(bool), "complex64": zeros.astype(np.complex64),
        "the input's shape": np.zeros(small, np.float32), "one row short": zeros[1:],
        "flattened": zeros.reshape(-1), "(H, W, 1)": zeros[..., None],
        "NaN": np.full(shape, np.nan, np.float32),
        "one Inf": np.where(np.eye(*shape) > 0, np.inf, 0).astype(np.float32),
        "3e38": np.full(shape, 3e38, np.float32), "-5000": np.full(shape, -5000.0),
    }


@pytest.mark.parametrize("release_id", sorted(RELEASE))
def test_outputs_are_valid_where_the_original_accepts_them(tmp_path, release_id):
    task = load_task(f"enhancement/{RELEASE[release_id]}")[1]
    shape = contract.output_shape(task)
    for k, (name, array) in enumerate(_arrays(task).items()):
        case = tmp_path / f"c{k}"
        case.mkdir()
        np.save(case / contract.OUTPUT, array)
        verdict = contract.check_case(task, case.name, case)
        assert verdict.valid == original_valid(array, shape), (name, verdict.reasons)
