"""Each study's picture for the run page: its images (up to two views), with the agent's report beside the
reference report. The report is the text the scoring read with the contract's reader (size-limited, UTF-8)."""

from __future__ import annotations

from pathlib import Path

from automedbench.api import CasePicture, Panel, read_image

from . import contract

MAX_VIEWS = 2


def case_picture(public_case: Path, report: str | None, reference: str) -> CasePicture:
    manifest = contract.read_manifest(public_case / "manifest.json")
    names = [n for n in manifest.get("image_files") or [] if isinstance(n, str)]
    views = [str(v) for v in manifest.get("view_positions") or []]
    panels = []
    for index, name in enumerate(names[:MAX_VIEWS]):
        if ".." in Path(name).parts or Path(name).is_absolute():
            continue  # staged names are plain: anything else is not drawn
        view = views[index] if index < len(views) else f"image {index + 1}"
        panels.append(Panel(view, image=read_image(public_case / name), role="input"))
    panels.append(Panel("report", text=report if report is not None else "(no valid report)", role="output"))
    panels.append(Panel("reference report", text=reference, role="reference"))
    return CasePicture(panels, f"{len(names)} image(s) in the study")
