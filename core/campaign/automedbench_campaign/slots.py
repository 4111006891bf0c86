"""Per-worker copies of the staged data, so concurrent runs cannot trip each other's breach detector.

The tripwire watches the private folders with inotify and counts every open as the agent's. Two runs
that share one data root would see each other's evaluator and decoy set-up as breaches. Each worker
slot therefore gets its own data root: public files are hard links to the staged ones (no copy of the
data), private references are copies, so no two slots share an inode the tripwire watches.
Cross-device roots fall back to copies.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from automedbench.api import TaskSpec
from automedbench.engine import STAMP, task_dir

SLOTS = ".sweep-slots"


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _skip_private(top: Path):
    return lambda folder, names: ["private"] if Path(folder) == top else []


def slot_root(base: Path, slot: int, tasks: list[TaskSpec]) -> Path:
    """The data root of worker slot `slot`, refreshed from `base` when a task was re-staged."""
    root = base / SLOTS / f"slot-{slot:03d}"
    for task in tasks:
        src, dst = task_dir(base, task), task_dir(root, task)
        fresh = (dst / STAMP).is_file() and (dst / STAMP).read_bytes() == (src / STAMP).read_bytes()
        if fresh:
            continue
        if dst.exists():
            shutil.rmtree(dst)
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(dst.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, tmp, copy_function=_link_or_copy, symlinks=True,
                        ignore=_skip_private(src))
        # private files are copied, never linked: the tripwire watches inodes, and a linked reference
        # read by one slot's evaluator would trip every other slot's run (both zeroed)
        shutil.copytree(src / "private", tmp / "private", symlinks=True)
        tmp.rename(dst)
    return root
