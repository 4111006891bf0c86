"""Plan artefacts copied out of the agent's workspace after a run: plan.md, plan.png, summary plots, and the
scripts the agent's calls named (the run page shows them beside the verdicts that cite them).

The brief asks Pro runs for summary plots of their results beside the plan. The paper does not score
Pro's plots, so they enter no stage: they are kept with the plan and the result says which are present.
The plan folder is agent-writable, so it is opened once with no-follow semantics and every file is
opened relative to that descriptor, never by a path the agent could redirect.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from .fsutil import atomic_write_bytes, open_path, read_regular
from .trace import Trace

PLAN_FILES = ("plan.md", "plan.png")
MAX_PLAN_BYTES = 20 << 20
MAX_PLOTS = 20
# plan.md, plan.png and the plots copied in all: one file hard-linked under 22 names (or sparse) was copied 22
# times, 264 MB onto the host's disk from 12 MB of workspace; the run's disk reservation holds this much
MAX_ARTEFACT_BYTES = 64 << 20
MAX_NAMES = 1000  # names looked at in plan/, so a folder of a million files costs nothing
PLOT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}\.(?:png|jpe?g|svg|pdf)", re.I)
PLOTS_DIR = "plots"


def collect(plan_dir: Path, dest: Path) -> list[str]:
    """Copy plan.md, plan.png and up to MAX_PLOTS summary plots (other images in plan/) into `dest`
    (plots into `dest/plots/`), MAX_ARTEFACT_BYTES in all; return the names of the plots copied, sorted."""
    dest.mkdir(parents=True, exist_ok=True)
    dir_fd = open_path(plan_dir.parent, plan_dir.name)
    if dir_fd is None:  # missing, not a folder, or a symlink to somewhere else
        return []
    plots: list[str] = []
    left = MAX_ARTEFACT_BYTES
    try:
        with os.scandir(dir_fd) as entries:
            names = sorted(entry.name for _, entry in zip(range(MAX_NAMES), entries, strict=False))
        # the plan's own files first: the plots get what the budget has left
        for name in sorted(names, key=lambda n: n not in PLAN_FILES):
            is_plot = name not in PLAN_FILES and PLOT_NAME.fullmatch(name) is not None
            if name not in PLAN_FILES and not (is_plot and len(plots) < MAX_PLOTS):
                continue
            data = read_regular(dir_fd, name, min(MAX_PLAN_BYTES, left))
            if data is None:
                continue
            left -= len(data)
            if is_plot:
                atomic_write_bytes(dest / PLOTS_DIR / name, data)
                plots.append(name)
            else:
                atomic_write_bytes(dest / name, data)
    finally:
        os.close(dir_fd)
    return plots


SCRIPTS_DIR = "scripts"
MAX_SCRIPTS = 20
MAX_SCRIPT_BYTES = 256 << 10


def collect_scripts(workspace: Path, events: list[dict[str, Any]], dest: Path) -> list[str]:
    """Copy the workspace scripts the agent's calls named (ran, or wrote by name) into `dest/scripts/`, keeping
    their workspace paths; the first MAX_SCRIPTS, each up to MAX_SCRIPT_BYTES. Each is opened through no-follow
    descriptors from the workspace down: a name the agent chose never leads outside it. Returns the paths kept."""
    trace = Trace(events)
    named: list[str] = []
    for call in trace.calls:
        named += [p for p in trace.scripts(call) if p not in named]
        if len(named) >= 4 * MAX_SCRIPTS:
            break
    kept: list[str] = []
    for path in named:
        if len(kept) >= MAX_SCRIPTS:
            break
        parent, _, name = path.rpartition("/")
        if parent.split("/", 1)[0] in ("outputs", "plan"):
            continue  # case outputs and the plan are shown as such
        fd = open_path(workspace, parent)
        if fd is None:
            continue
        try:
            data = read_regular(fd, name, MAX_SCRIPT_BYTES)
        finally:
            os.close(fd)
        if data is not None:
            atomic_write_bytes(dest / SCRIPTS_DIR / path, data)
            kept.append(path)
    return kept
