"""A short download refused: fewer questions than the task stages (its `sample`, else its `case_count`).

A truncated or partial download (a shard not fetched, a table cut short) would otherwise stage fewer questions
silently, and the task scored would not be the one its card describes. Every VQA stager draws its questions
through `draw`, which refuses such a download in one line before anything is written, naming the shards the
download's own file names count that are not there (`shard_gaps`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from automedbench.api import StagingSecret, TaskSpec, UserError

from .records import subsample

SHOWN_MISSING = 3  # missing files named in the refusal
# Hugging Face's shard names: <split>-00001-of-00003[-<hash>].parquet
_SHARD = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<total>\d{5})(?P<tail>-[0-9a-f]+)?\.parquet$")


def shard_gaps(files: Sequence[Path], root: Path) -> list[str]:
    """The shards `files`' names count (`-of-NNNNN`) that are not among them, relative to `root`."""
    seen: dict[tuple[Path, str, int], set[int]] = {}
    for path in files:
        found = _SHARD.match(path.name)
        if found:
            seen.setdefault((path.parent, found["stem"], int(found["total"])), set()).add(int(found["index"]))
    gaps = []
    for (folder, stem, total), present in sorted(seen.items()):
        where = folder.relative_to(root) if folder.is_relative_to(root) else folder
        gaps += [str(where / f"{stem}-{i:05d}-of-{total:05d}.parquet") for i in range(total) if i not in present]
    return gaps


def draw(task: TaskSpec, count: int, secret: StagingSecret, where: str, lacks: Sequence[str] = ()) -> list[int]:
    """The indices of the questions staged (`subsample`: the task's sample, drawn from the staging's secret), once
    `count` (what `where` holds) is known to reach what the task stages; else one line naming what `lacks`."""
    limit = task.params.get("sample")
    needed = task.case_count if limit is None else int(limit)
    if count < needed:
        named = (f"; {len(lacks)} file(s) its names count are missing ({', '.join(lacks[:SHOWN_MISSING])}"
                 f"{', ...' if len(lacks) > SHOWN_MISSING else ''})" if lacks else "")
        raise UserError(f"{where}: only {count} question{'' if count == 1 else 's'}, {task.id} needs {needed}"
                        f"{named}: a truncated or partial download?")
    return subsample(count, limit, secret)
