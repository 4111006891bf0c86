"""What a task's sandbox needs (`TaskSpec.needs`, `Track.sandbox_needs`), checked before a run and by
`validate-task` and `automedbench tasks`: the modules its reference method imports inside the sandbox, the
read-only assets it loads, and what its local evaluator needs to score it (`Track.scoring_gap`). A gap is one
line naming what to install, never a run that scores F because the sandbox could not import the model's library
or the evaluator could not run the metric."""

from __future__ import annotations

import functools
import importlib.metadata as md
import importlib.util
import json
import re
import shlex
import urllib.parse
from pathlib import Path
from typing import Any

from .distheaders import header_fields
from .records import TaskSpec

# The first bytes of a Git LFS pointer: an asset checked out without `git lfs pull` is a text stub
LFS_POINTER = b"version https://git-lfs"


def missing_here(modules: list[str]) -> list[str]:
    """The top-level `modules` this interpreter cannot import (found without importing them)."""
    missing = []
    for name in modules:
        top = name.split(".")[0]
        try:
            found = importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(top)
    return missing


@functools.cache
def unmet_requirements(distribution: str) -> tuple[str, ...]:
    """The distributions `distribution` requires unconditionally (no extra, no marker) that are not installed, as
    `pip check` names them (a track installed with `--no-deps`); () for a name that is not installed (a track
    added in code)."""
    try:
        dist = md.distribution(distribution)
    except md.PackageNotFoundError:
        return ()
    # the Requires-Dist header lines, not `md.requires`: that parses the whole file (a README) with the e-mail
    # parser, whose import alone is ~5 ms of every one-off run; an egg-info install keeps them elsewhere: asked so
    fields = header_fields(dist, ("Requires-Dist",))
    requires = (fields or {}).get("Requires-Dist") or dist.requires or []
    missing = []
    for requirement in requires:
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
        if ";" in requirement or name is None:  # an extra's or a platform's: not every install has it
            continue
        try:
            md.distribution(name.group(0))
        except md.PackageNotFoundError:
            missing.append(name.group(0))
    return tuple(missing)


def dependency_gap(track: Any, distribution: str) -> str | None:
    """The one line refusing a task of a track whose distribution lacks what it requires, before staging or
    scoring meets it as a traceback (`No module named 'pydicom'`), else None."""
    missing = unmet_requirements(distribution) if distribution else ()
    if not missing:
        return None
    from .plugins import track_install_line

    line = track_install_line(track.name)
    install = line.split(": ", 1)[1] if line else f"pip install '{distribution}'"
    return (f"the {track.name} track ({distribution}) is installed without {', '.join(missing)}, which it "
            f"requires: {install}")


def assets_problem(track: Any, task: TaskSpec) -> str | None:
    """Why the task's declared assets cannot be mounted (missing folder, empty, an LFS stub), else None."""
    try:
        folder = track.assets(task)
    except ValueError as exc:
        return str(exc)
    if folder is None:
        return None
    files = [p for p in Path(folder).rglob("*") if p.is_file()]
    if not files:
        return f"the assets folder {folder} is empty"
    for path in files:
        with path.open("rb") as handle:
            if handle.read(len(LFS_POINTER)) == LFS_POINTER:
                return f"the asset {path} is a Git LFS pointer, not the file (run `git lfs pull`)"
    return None


# A distribution with extras, as a task's `needs.install` names one: `automedbench-classification[model]`
DISTRIBUTION_WITH_EXTRAS = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9_,. -]+\])?")


def editable_source(distribution: str) -> str | None:
    """The folder an installed `distribution` was installed from in editable mode (pip's `direct_url.json`), else
    None: a track installed from a checkout is on no package index, so its extra installs from there."""
    try:
        text = md.distribution(distribution).read_text("direct_url.json")
        info = json.loads(text or "{}")
    except (md.PackageNotFoundError, OSError, ValueError):
        return None
    url = info.get("url") if isinstance(info, dict) else None
    editable = isinstance(info, dict) and isinstance(info.get("dir_info"), dict) and info["dir_info"].get("editable")
    if not editable or not isinstance(url, str) or not url.startswith("file://"):
        return None
    return urllib.parse.unquote(urllib.parse.urlparse(url).path) or None


def install_line(task: TaskSpec, needs: Any) -> str:
    """The install hint of a refusal: the task's own line, else the modules themselves. A track installed from a
    checkout (`pip install -e plugins/classification`, as the README does) gets the line from that folder:
    `pip install 'automedbench-classification[model]'` asked an index that has no such distribution."""
    what = needs.install or " ".join(needs.modules)
    named = DISTRIBUTION_WITH_EXTRAS.fullmatch(what) if needs.install else None
    source = editable_source(named.group(1)) if named else None
    if named and source:
        return f"pip install -e {shlex.quote(source + (named.group(2) or '').replace(' ', ''))}"
    return f"pip install '{what}'" if what and " " not in what else f"pip install {what}"


def scoring_gap(track: Any, task: TaskSpec, evaluator: str = "process") -> str | None:
    """The one line refusing to score `task` with a local `evaluator` backend ("process" or "warm": this
    machine's Python and programs) that lacks what the metric runs, or None (another backend brings its own)."""
    if evaluator not in ("process", "warm"):
        return None
    gap = track.scoring_gap(task)
    return None if gap is None else f"{task.id} cannot be scored on this machine: {gap}"


def sandbox_gap(track: Any, task: TaskSpec, sandbox: Any, distribution: str = "") -> str | None:
    """The one line refusing a run of `task` in `sandbox` (the track's `distribution` without what it requires,
    modules the sandbox's Python lacks, assets not there, a program the local evaluator that scores runs of this
    sandbox needs), or None when the sandbox has what the task's reference method needs (or the backend cannot
    tell)."""
    missing_dependency = dependency_gap(track, distribution)
    if missing_dependency is not None:
        return f"{task.id} cannot run: {missing_dependency}"
    needs = track.sandbox_needs(task)
    problem = assets_problem(track, task)
    if problem is not None:
        return f"{task.id} cannot run: {problem}"
    gap = scoring_gap(track, task, getattr(sandbox, "evaluator", "process"))
    if gap is not None:
        return gap
    if not needs.modules:
        return None
    found = sandbox.missing_modules(list(needs.modules), track.name)
    if found is None:
        return None
    missing, where = found
    if not missing:
        return None
    return (f"{task.id} needs {', '.join(missing)} inside the sandbox, which {where} cannot import: "
            f"{install_line(task, needs)}")


def ready_here(track: Any, task: TaskSpec, distribution: str = "") -> tuple[bool, str]:
    """Whether this machine's local sandbox (the harness's Python) has what the task needs, and if not what to
    install: the `Ready` column of `automedbench tasks`. `distribution`: the track's, checked for what it requires."""
    problem = dependency_gap(track, distribution) or assets_problem(track, task) or track.scoring_gap(task)
    if problem is not None:
        return False, problem
    needs = track.sandbox_needs(task)
    missing = missing_here(list(needs.modules))
    if missing:
        return False, f"{install_line(task, needs)} (needs {', '.join(missing)})"
    return True, ""
