"""`automedbench new-track NAME`: a working track package to start from, written from the scaffold templates
(package data beside this module): pyproject with the entry point, task file, stager, checker, metric, brief
templates, rubric hints, baselines, scripted reference solution, tests and README. Its output passes
`validate-task` and runs its demo with no edits (tests/test_new_track.py)."""

from __future__ import annotations

import keyword
import re
from importlib import resources
from pathlib import Path

import click
from automedbench.api import UserError, atomic_write_text
from automedbench.engine import CommandContext

NAME = re.compile(r"[a-z][a-z0-9_]{1,30}")
SUFFIX = ".tmpl"


def names(track: str) -> dict[str, str]:
    """The placeholders of the templates for a track name (`my_track`: package automedbench_my_track,
    distribution automedbench-my-track, class MyTrack)."""
    if not NAME.fullmatch(track) or keyword.iskeyword(track) or track.endswith("_"):
        raise UserError(f"track name {track!r}: use 2-31 lower-case letters, digits and underscores, starting "
                        "with a letter (it becomes the task ids' prefix and part of the package name)")
    return {"@@name@@": track, "@@package@@": f"automedbench_{track}",
            "@@dist@@": "automedbench-" + track.replace("_", "-"),
            "@@class@@": "".join(part.capitalize() for part in track.split("_"))}


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def write_track(track: str, parent: Path, registered: set[str] = frozenset()) -> Path:  # type: ignore[assignment]
    """Write the package into `parent/<distribution>/`, a new or empty folder; return that folder."""
    values = names(track)
    if track in registered:
        raise UserError(f"a track named {track!r} is installed already; choose another name")
    dest = parent / values["@@dist@@"]
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UserError(f"{dest} already exists and is not empty; choose another --dir")
    root = resources.files("automedbench_testkit").joinpath("scaffold")
    for source in _files(root):
        relative = source[0]
        target = relative.replace("package/", values["@@package@@"] + "/", 1) if relative.startswith("package/") \
            else relative
        target = _fill(target, values).removesuffix(SUFFIX)
        atomic_write_text(dest / target, _fill(source[1].read_text(encoding="utf-8"), values))
    return dest


def _files(root, prefix: str = "") -> list[tuple[str, object]]:
    """(path relative to the scaffold, the traversable) of every template file, in a stable order."""
    found = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.is_dir():
            if entry.name != "__pycache__":
                found += _files(entry, f"{prefix}{entry.name}/")
        elif entry.name.endswith(SUFFIX):
            found.append((prefix + entry.name, entry))
    return found


@click.command("new-track")
@click.argument("name")
@click.option("--dir", "parent", type=click.Path(file_okay=False), default=".", show_default=True,
              help="Where to write the package (it goes into DIR/automedbench-NAME/, which must be new or empty).")
@click.pass_obj
def new_track(context: CommandContext, name: str, parent: str) -> None:
    """Write a working track package NAME to start from: a demo task that validates and runs as it is.

    Then: pip install -e DIR/automedbench-NAME, automedbench validate-task NAME/demo, automedbench run --task
    NAME/demo --agent reference. CONTRIBUTING.md walks through replacing each part.
    """
    dest = write_track(name, Path(parent), set(context.registry().components["track"]))
    context.console.print(f"wrote the track {name} into {dest}", soft_wrap=True)
    context.console.print(f"next: pip install -e {dest} && automedbench validate-task {name}/demo && "
                         f"automedbench run --task {name}/demo --agent reference", soft_wrap=True)
