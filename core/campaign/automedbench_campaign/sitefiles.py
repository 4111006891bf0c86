"""Which pages a site folder holds from its last build, so a rebuild leaves none behind.

A site is rebuilt into the same folder as runs are added, re-graded or found not genuine. Pages are only ever
written, so a run left out since (its evidence edited, its result forged, a copy) kept its page under runs/, and a
task or track with no counted run left kept its ranking: a published folder still showed them. The build records
the pages it wrote in `PAGES_FILE`; the next one removes those it did not write again (and nothing else).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from automedbench.api import atomic_write_text

PAGES_FILE = ".site-pages.json"
MAX_PAGES_BYTES = 16 << 20
# what a build writes: a top-level page, or a page in one of its own sub-folders (names made safe by the site)
OWNED = re.compile(r"(?:[a-z]+|(?:runs|track|task)/[A-Za-z0-9_.-]+)\.html")


def previous_pages(out: Path) -> set[str]:
    """The pages (relative paths) the last build recorded in `out`; none when it recorded none or the list is
    not one a build writes (a name outside the site's own is never taken)."""
    try:
        fd = os.open(out / PAGES_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return set()
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_PAGES_BYTES + 1)
    try:
        names = json.loads(data) if len(data) <= MAX_PAGES_BYTES else None
    except ValueError:
        return set()
    if not isinstance(names, list):
        return set()
    return {name for name in names if isinstance(name, str) and OWNED.fullmatch(name)}


def record_pages(out: Path, written: Iterable[Path], previous: set[str]) -> None:
    """Remove the pages of the last build that this one did not write, then record this build's pages."""
    now = sorted(str(path.relative_to(out)) for path in written)
    for name in sorted(previous - set(now)):
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            os.unlink(out / name)  # a link is removed itself, never followed
    atomic_write_text(out / PAGES_FILE, json.dumps(now, indent=0) + "\n", shared=True)
