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
from automedbench.api import CaseVerdict, TaskSpec

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


def _open_below(root: Path, parts: list[str]) -> int:
    """An fd for root/parts[0]/.../parts[-1], every component opened with O_NOFOLLOW relative to its parent."""
    flags_dir = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(root, flags_dir)
    try:
        for part in parts[:-1]:
            if part in ("", ".", "..") or "/" in part:
                raise OSError(errno.EINVAL, f"bad path component {part!r}")
            nxt = os.open(part, flags_dir, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)


def read_output(root: Path, case_id: str, name: str, shape: tuple[int, int]) -> tuple[np.ndarray | None, list[str],
                                                                                       bool]:
    """(array or None, reasons it is invalid, present) for root/case_id/name."""
    try:
        fd = _open_below(root, [case_id, name])
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


def gate(task: TaskSpec, case_ids: list[str], outputs: Path) -> str | None:
    """The pre-submit refusal: fewer than ceil(min_valid x N) valid outputs (upstream: half the cases)."""
    need = max(1, math.ceil(round(task.rating.min_valid * len(case_ids), 9)))
    shape = output_shape(task)
    valid, problems = 0, []
    for case_id in case_ids:
        if valid >= need:
            break
        _, reasons, _ = read_output(outputs, case_id, OUTPUT, shape)
        if reasons:
            problems.append(f"{case_id}: {reasons[0]}")
        else:
            valid += 1
    if valid >= need:
        return None
    shown = "; ".join(problems[:3]) + (" ..." if len(problems) > 3 else "")
    return (f"submission refused: {valid} of the {len(case_ids)} cases have a valid {OUTPUT} "
            f"({need} needed before you may submit; a valid output is a 2-D finite float array of shape "
            f"{shape}). Problems: {shown}")
