"""A track's staging area: the new copy is written beside the old one and swapped in only when complete.

A track's stager writes into `StagingArea.public` / `.private` (under `<dest>/.incoming`) and ends with
`commit(case_ids)`. Leaving the `with staging_area(dest)` block without committing (an exception, Ctrl-C)
drops the new copy; the previous staging stays as it was. The commit checks what is published, lays it out
again in a secret order (`relay`), saves the staging's secret and swaps the parts in with `staging.swap_in`
(journaled: a crash never leaves a mix of old and new), together with what the engine's seal writes beside
them (the stamp: digests, case ids). The lock, the journal and its recovery are `staging`'s.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from .errors import UserError
from .stagesecret import SECRET_FILE, StagingSecret
from .staging import (
    INCOMING,
    PARTS,
    check_published,
    recover,
    remove_entry,
    seal_of,
    secret_of,
    staging_lock,
    swap_in,
)
from .track import StagedData


class StagingArea:
    """A fresh scratch copy of a staging (`root` = `<dest>/.incoming`, one folder per part already made).

    `secret` is this staging's `StagingSecret`: draw every hidden choice from it (which items, their order,
    their case ids, every random degradation). The engine makes one per staging; an area opened outside
    the engine (a stager called directly) makes its own. Either way `commit` writes it to
    `private/staging.secret` and the next staging draws a new one."""

    def __init__(self, dest: Path, parts: tuple[str, ...] = PARTS, durable: bool = True) -> None:
        self.dest = dest
        self.root = dest / INCOMING
        self.parts = parts
        self.durable = durable
        self.staged: StagedData | None = None
        self.secret = secret_of(dest) or StagingSecret()

    @property
    def public(self) -> Path:
        return self.root / "public"

    @property
    def private(self) -> Path:
        return self.root / "private"

    def commit(self, case_ids: list[str], what: str = "cases") -> StagedData:
        """Swap the new parts in for the old ones (all or none) and return the staging they make up."""
        if self.staged is not None:
            raise RuntimeError(f"{self.dest}: this staging area was already committed")
        if not case_ids:
            # the next step: a stager passes over every item when the download's layout is not the one it reads
            raise UserError(f"staging produced no {what} in {self.dest}: the stager committed none (from a download: "
                            "check it has the layout the task's `dataset` names, and which items the stager passes "
                            "over); any previous staging is kept")
        if "public" in self.parts:
            check_published(self.public)
            relay(self.public, self.secret)
        if "private" in self.parts:
            self.secret.save(self.private / SECRET_FILE)
        # listed sorted: the order a stager met its items in (the source's) never reaches the brief or the stamp
        case_ids = sorted(case_ids)
        seal = seal_of(self.dest)
        extra = tuple(seal(self, list(case_ids))) if seal is not None else ()
        swap_in(self.root, self.dest, self.parts + extra, durable=self.durable)
        self.staged = StagedData(self.dest, self.dest / "public", self.dest / "private", list(case_ids))
        return self.staged


@contextlib.contextmanager
def staging_area(dest: Path, parts: tuple[str, ...] = PARTS, durable: bool = True) -> Iterator[StagingArea]:
    """Hold the task's staging lock, recover an interrupted swap, and yield a fresh, empty `StagingArea`.

    Whatever happens, the scratch folder is gone afterwards; only `commit` changes `dest`'s parts.
    `durable=False` skips the fsyncs (tests, throwaway data)."""
    dest.mkdir(parents=True, exist_ok=True)
    with staging_lock(dest):
        recover(dest)
        area = StagingArea(dest, tuple(parts), durable)
        remove_entry(area.root)
        area.root.mkdir()
        try:
            for part in area.parts:
                (area.root / part).mkdir()
            yield area
        finally:
            remove_entry(area.root)


PUBLISHED_TIME_NS = 946_684_800 * 10**9  # every published file's and folder's mtime (2000-01-01)
# their atime (2038-01-01: after any change time, within a 32-bit inode time), so that no read changes it (`relay`)
PUBLISHED_ATIME_NS = 2_145_916_800 * 10**9


def relay(public: Path, secret: StagingSecret) -> None:
    """Write `public` again in an order drawn from the staging's secret, every mtime and every atime one value.

    A stager writes its cases in some order (one class after another, the source's order), and a folder
    shows that order to anyone who can stat it: modification times, inode numbers (allocated in creation
    order), the listing order of filesystems that list by creation. An agent sorting the case folders by
    mtime or inode got every label of a balanced draw. So the engine copies every file to a fresh inode in a
    secret order (folders first, also in a secret order), then sets every file's and folder's mtime to
    `PUBLISHED_TIME_NS`: what remains is the content and the (randomly drawn) names.

    The access time is set after every change time (`PUBLISHED_ATIME_NS`): under relatime (Linux's default) the
    kernel then never updates it, as under noatime, and reads through the sandbox's read-only mounts update none.
    At 2000-01-01 the staging's own digest set each file's atime as it read it, and a day later the first
    harness-side reader (the evaluator, its pictures) stamped every file it read, case by case: a later run's
    sandbox saw which inputs were read and the evaluator's time per case, which follows the reference."""
    folders, files = [], []
    for folder, subdirs, names in os.walk(public):
        rel = os.path.relpath(folder, public)
        folders += [os.path.normpath(os.path.join(rel, d)) for d in subdirs]
        files += [os.path.normpath(os.path.join(rel, n)) for n in names]
    fresh = public.with_name(public.name + ".relaid")
    remove_entry(fresh)
    fresh.mkdir()
    shutil.copymode(public, fresh)
    made = {"."}
    for rel in secret.shuffled(sorted(folders), "published layout: folders"):
        for part in reversed([rel, *(str(p) for p in Path(rel).parents)]):  # a parent before its children
            if part not in made:
                (fresh / part).mkdir()
                shutil.copymode(public / part, fresh / part)
                made.add(part)
    for rel in secret.shuffled(sorted(files), "published layout: files"):
        shutil.copyfile(public / rel, fresh / rel, follow_symlinks=False)
        shutil.copymode(public / rel, fresh / rel, follow_symlinks=False)
    times = (PUBLISHED_ATIME_NS, PUBLISHED_TIME_NS)
    for rel in secret.shuffled(sorted(files) + sorted(folders) + ["."], "published layout: times"):
        os.utime(fresh / rel, ns=times, follow_symlinks=False)
    remove_entry(public)
    os.rename(fresh, public)
    os.utime(public, ns=times)
