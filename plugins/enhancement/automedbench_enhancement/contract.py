"""The output contract: `<case>/enhanced.npy`, a 2-D finite float array of the task's output shape.

Every file is opened through folders opened with O_NOFOLLOW (no symlink is followed at any level below
the root), must be a regular file with one link, and its .npy header is read and checked (shape, dtype,
size) before a byte of data is; then `np.load(allow_pickle=False)` reads it. The same reader serves the
evaluator (frozen copies) and the pre-submit gate (the agent's live outputs folder).
"""

from __future__ import annotations

import errno
import math
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import CaseVerdict, TaskSpec, open_below, valid_output_gate

OUTPUT = "enhanced.npy"
INPUT = "input.npy"
REFERENCE = "reference.npy"
META = "meta.json"
MAX_HEADER_BYTES = 4096


def output_shape(task: TaskSpec) -> tuple[int, int]:
    h, w = task.params["output_shape"]
    return int(h), int(w)


def input_shape(task: TaskSpec) -> tuple[int, int]:
    h, w = task.params["input_shape"]
    return int(h), int(w)


def read_output(root: Path, case_id: str, name: str, shape: tuple[int, int]) -> tuple[np.ndarray | None, list[str],
                                                                                       bool]:
    """(array or None, reasons it is invalid, present) for root/case_id/name."""
    try:
        fd = open_below(root, [case_id, name])
    except FileNotFoundError:
        return None, [f"{name} missing"], False
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return None, [f"{name}: a symlink or a non-folder on the path (not followed)"], True
        return None, [f"{name}: cannot open ({exc.strerror})"], True
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None, [f"{name}: not a regular file"], True
        if info.st_nlink > 1:
            return None, [f"{name}: a hard link (shares its inode with another file)"], True
        problem = _header(handle, info.st_size, shape)
        if problem:
            return None, [f"{name}: {problem}"], True
        handle.seek(0)
        try:
            array = np.load(handle, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            return None, [f"{name}: unreadable ({exc})"], True
    bad = int(array.size - np.count_nonzero(np.isfinite(array)))
    if bad:
        return None, [f"{name}: {bad} NaN/Inf value(s)"], True
    return array, [], True


def _header(handle: Any, size: int, shape: tuple[int, int]) -> str:
    """Why the .npy header is refused ('' if fine): checked before any data is read."""
    fmt = np.lib.format
    if size > MAX_HEADER_BYTES + math.prod(shape) * 16:
        return f"{size} bytes is larger than a {shape} float array can be"
    try:
        version = fmt.read_magic(handle)
        reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        if version not in ((1, 0), (2, 0), (3, 0)):
            return f"unsupported .npy version {version}"
        got_shape, _, dtype = reader(handle, max_header_size=MAX_HEADER_BYTES)
    except (ValueError, OSError, EOFError, SyntaxError) as exc:
        return f"not a valid .npy file ({str(exc)[:200]})"
    if dtype.hasobject:
        return "object arrays are refused (allow_pickle=False)"
    if len(got_shape) != 2:
        return f"{len(got_shape)}-D array, expected 2-D {shape}"
    if tuple(got_shape) != tuple(shape):
        return f"shape {tuple(got_shape)} != expected {shape}"
    if dtype.kind != "f":
        return f"dtype {dtype} is not floating point (use float32)"
    expected = handle.tell() + math.prod(got_shape) * dtype.itemsize
    if size != expected:
        return f"{size} bytes, expected {expected} for the header's shape and dtype (truncated or padded)"
    return ""


def check_case(task: TaskSpec, case_id: str, submitted: Path) -> CaseVerdict:
    """The checker's verdict for one case folder (the evaluator's frozen copy)."""
    _, reasons, present = read_output(submitted.parent, case_id, OUTPUT, output_shape(task))
    return CaseVerdict(case_id, present, present and not reasons, reasons)


GATE_SHARE = 0.5  # the original's submit_results refuses until half the cases have a valid output


def gate_need(n: int) -> int:
    """Valid outputs the gate asks of N cases: the original's `max(1, int(0.5 * N))`, half rounded down (2 of 5;
    ceil asked 3 before round 19)."""
    return max(1, int(GATE_SHARE * n))


def gate(task: TaskSpec, case_ids: list[str], outputs: Path) -> str | None:
    """The pre-submit refusal: fewer than `gate_need(N)` valid outputs (the original's gate). The rating asks more
    (`rating.min_valid` 1.0: the original rates F unless every file is valid)."""
    shape = output_shape(task)

    def problem(case_id: str) -> str | None:
        _, reasons, _ = read_output(outputs, case_id, OUTPUT, shape)
        return reasons[0] if reasons else None

    return valid_output_gate(case_ids, GATE_SHARE, problem, OUTPUT,
                             f"a 2-D finite float array of shape {shape}", need=gate_need(len(case_ids)))
