"""The output checker and the pre-submit gate: header first, no symlinks followed, one reason per problem."""

from __future__ import annotations

import os

import numpy as np
import pytest
from automedbench.api import RatingThresholds, TaskSpec, TierInfo
from automedbench_enhancement import contract

SHAPE = (12, 10)


@pytest.fixture
def task():
    return TaskSpec("enhancement/t", "enhancement", "t", "d", "m", ["input.npy"], ["enhanced.npy"], 4, 1, 1, 1,
                    False, True, RatingThresholds(0.9, 0.8, 0.5, 0.7), {"lite": TierInfo()}, "ssim",
                    {"output_shape": list(SHAPE), "input_shape": list(SHAPE), "clip": [0, 1]})


def write(root, case, array):
    (root / case).mkdir(parents=True, exist_ok=True)
    np.save(root / case / "enhanced.npy", array)
    return root / case


def reason(task, folder):
    verdict = contract.check_case(task, folder.name, folder)
    return verdict.present, verdict.valid, " ".join(verdict.reasons)


def test_valid_float_outputs(task, tmp_path):
    for dtype in (np.float16, np.float32, np.float64):
        folder = write(tmp_path, f"c_{np.dtype(dtype).name}", np.zeros(SHAPE, dtype))
        assert reason(task, folder) == (True, True, "")
    fortran = write(tmp_path, "f", np.asfortranarray(np.ones(SHAPE, np.float32)))
    assert reason(task, fortran)[1]


@pytest.mark.parametrize(("array", "expected"), [
    (np.zeros((12, 11), np.float32), "shape (12, 11) != expected (12, 10)"),
    (np.zeros((1, 12, 10), np.float32), "3-D array, expected 2-D"),
    (np.zeros(SHAPE, np.int16), "dtype int16 is not floating point"),
    (np.zeros(SHAPE, np.complex64), "dtype complex64 is not floating point"),
    (np.full(SHAPE, np.nan, np.float32), "120 NaN/Inf value(s)"),
])
def test_invalid_arrays_get_one_reason(task, tmp_path, array, expected):
    present, valid, why = reason(task, write(tmp_path, "c", array))
    assert present and not valid and expected in why


def test_missing_file_is_not_present(task, tmp_path):
    (tmp_path / "c").mkdir()
    assert reason(task, tmp_path / "c") == (False, False, "enhanced.npy missing")


def test_pickled_object_array_refused_before_loading(task, tmp_path):
    folder = tmp_path / "c"
    folder.mkdir()
    np.save(folder / "enhanced.npy", np.empty(SHAPE, dtype=object), allow_pickle=True)
    present, valid, why = reason(task, folder)
    assert present and not valid and "object arrays are refused" in why


def test_truncated_padded_and_garbage_files(task, tmp_path):
    folder = write(tmp_path, "c", np.zeros(SHAPE, np.float32))
    data = (folder / "enhanced.npy").read_bytes()
    (folder / "enhanced.npy").write_bytes(data[:-8])
    assert "truncated or padded" in reason(task, folder)[2]
    (folder / "enhanced.npy").write_bytes(data + b"\0" * 8)
    assert "truncated or padded" in reason(task, folder)[2]
    (folder / "enhanced.npy").write_bytes(b"not numpy at all")
    assert "not a valid .npy file" in reason(task, folder)[2]
    (folder / "enhanced.npy").write_bytes(b"\0" * 10_000_000)
    assert "larger than" in reason(task, folder)[2]


def test_header_checked_before_data(task, tmp_path):
    """A header that declares a huge array is refused from the header alone (no giant allocation)."""
    folder = tmp_path / "c"
    folder.mkdir()
    with open(folder / "enhanced.npy", "wb") as handle:
        np.lib.format.write_array_header_1_0(handle, {"descr": "<f4", "fortran_order": False,
                                                      "shape": (100000, 100000)})
    assert "shape (100000, 100000) != expected" in reason(task, folder)[2]


def test_symlinks_and_hard_links_are_not_followed(task, tmp_path):
    secret = tmp_path / "secret.npy"
    np.save(secret, np.zeros(SHAPE, np.float32))
    (tmp_path / "out" / "c").mkdir(parents=True)
    os.symlink(secret, tmp_path / "out" / "c" / "enhanced.npy")
    assert "symlink" in reason(task, tmp_path / "out" / "c")[2]
    os.symlink(tmp_path / "out" / "c", tmp_path / "out" / "d")  # a symlinked case folder
    assert "symlink" in reason(task, tmp_path / "out" / "d")[2]
    (tmp_path / "out" / "e").mkdir()
    os.link(secret, tmp_path / "out" / "e" / "enhanced.npy")
    assert "hard link" in reason(task, tmp_path / "out" / "e")[2]
    (tmp_path / "out" / "f").mkdir()
    os.mkfifo(tmp_path / "out" / "f" / "enhanced.npy")  # would block a plain open
    assert "not a regular file" in reason(task, tmp_path / "out" / "f")[2]


def test_gate_refuses_below_half_and_accepts_at_half(task, tmp_path):
    ids = ["a", "b", "c", "d"]
    out = tmp_path / "outputs"
    out.mkdir()
    assert "0 of the 4 cases" in contract.gate(task, ids, out)
    write(out, "a", np.zeros(SHAPE, np.float32))
    write(out, "b", np.zeros(SHAPE, np.int32))  # present but invalid: does not count
    refusal = contract.gate(task, ids, out)
    assert "1 of the 4 cases" in refusal and "2 needed" in refusal and "b: enhanced.npy: dtype int32" in refusal
    write(out, "c", np.ones(SHAPE, np.float32))
    assert contract.gate(task, ids, out) is None


def test_gate_does_not_follow_a_symlinked_outputs_folder(task, tmp_path):
    real = tmp_path / "elsewhere"
    for case in "abcd":
        write(real, case, np.zeros(SHAPE, np.float32))
    os.symlink(real, tmp_path / "outputs")
    assert contract.gate(task, list("abcd"), tmp_path / "outputs") is not None
