"""The staged layout every report task shares (demo and stagers):

public/<case>/images/<file>  +  public/<case>/manifest.json  {case_id, image_files, view_positions}
public/pilot_ids.txt          the studies to pilot on first
private/<case>/report.txt     the reference report (FINDINGS section scored, or the whole text)
private/<case>/facts.json     case facts for breakdowns and detectors (views, later-view-only findings)
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from automedbench.api import StagedData, StagingArea, UserError, atomic_write_bytes, atomic_write_text

PILOT_FILE = "pilot_ids.txt"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(value: str) -> str:
    text = _UNSAFE.sub("_", str(value)).strip("._")
    if not text:
        raise UserError(f"name {value!r} has no usable characters")
    return text



def write_study(work: Path, case: str, images: list[tuple[str, bytes]], reference: str, facts: dict[str, Any],
                views: list[str] | None = None) -> None:
    """One study: its images and manifest in public/, its reference report and facts in private/."""
    public, private = work / "public" / case, work / "private" / case
    names = []
    for name, data in images:
        atomic_write_bytes(public / "images" / safe_name(name), data)
        names.append(f"images/{safe_name(name)}")
    manifest: dict[str, Any] = {"case_id": case, "image_files": names}
    if views:
        manifest["view_positions"] = list(views)
    atomic_write_text(public / "manifest.json", json.dumps(manifest, indent=2) + "\n")
    atomic_write_text(private / "report.txt", reference if reference.endswith("\n") else reference + "\n")
    atomic_write_text(private / "facts.json", json.dumps({"views": len(images), **facts}, indent=2) + "\n")


def finish(area: StagingArea, ids: list[str], params: dict[str, Any]) -> StagedData:
    """Write the pilot list and commit the staging area (a failed re-stage keeps the old staging)."""
    if not ids:
        raise UserError("staging produced no studies")
    order = area.secret.shuffled(ids, "pilot")
    atomic_write_text(area.public / PILOT_FILE, "".join(f"{c}\n" for c in order[:int(params.get("pilot", 1))]))
    return area.commit(ids, "studies")
