"""Staged question and answer records: `public/<qid>/question.json` + images, `private/<qid>/answer.json`.

Shared by the demo generator and every dataset stager so that all VQA tasks look the same to agents
and to the scorer. Breakdown facts (question type, body system, modality) are copied into the private
record too, so questions an agent never answered still count in their group. A stager passes a fact in the gold
instead when publishing it would state answers (OmniMedVQA's modality for its "modality recognition" questions):
it then reaches the private record only.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

from automedbench.api import (
    StagedData,
    StagingArea,
    StagingSecret,
    UserError,
    atomic_write_bytes,
    atomic_write_text,
    check_pixels,
    reencode_image,
)
from PIL import Image

from ..contract import ANSWER_FILE, QUESTION_FILE, read_json_object

SMOKE_FILE = "smoke_ids.txt"
CALIBRATION_FILE = "calibration_ids.txt"
FACTS = ("question_type", "body_system", "modality")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_id(value: Any) -> str:
    text = _UNSAFE.sub("_", str(value)).strip("._")
    if not text:
        raise UserError(f"question id {value!r} has no usable characters")
    return text


def image_extension(data: bytes, origin: str) -> str:
    """The file extension for encoded image bytes; a clear error when they are not an image."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            dims = [image.width, image.height, len(image.getbands())]
            image.verify()
            fmt = (image.format or "").lower()
    except Exception as exc:
        raise UserError(f"{origin}: not a readable image ({type(exc).__name__})") from None
    check_pixels(dims, 1, origin)  # a pixel bomb is refused here, never published to the agent
    return {"jpeg": "jpg", "mpo": "jpg"}.get(fmt, fmt or "img")


def write_question(staged_root: Path, qid: str, question: dict[str, Any], images: list[tuple[str, bytes]],
                   gold: dict[str, Any]) -> None:
    """Write one question. `images` are (stem, encoded bytes); the extension follows the bytes. A breakdown fact
    given in `gold` (kept from the agent) takes the place of the public one in the private record."""
    public, private = staged_root / "public" / qid, staged_root / "private" / qid
    paths = []
    for stem, data in images:
        name = f"{stem}.{image_extension(data, f'{qid}/{stem}')}"
        atomic_write_bytes(public / name, data)
        paths.append(name)
    record = {"question_id": qid, **question, "image_paths": paths}
    atomic_write_text(public / QUESTION_FILE, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    answer = {"question_id": qid, "answer_text": str(gold.get("answer_text", "")),
              "answer_label": str(gold.get("answer_label", "")),
              **{k: str(gold.get(k, question.get(k, "")) or "") for k in FACTS}}
    if gold.get("source_id"):
        answer["source_id"] = str(gold["source_id"])
    atomic_write_text(private / ANSWER_FILE, json.dumps(answer, indent=2, ensure_ascii=False) + "\n")


def subsample(count: int, limit: int | None, secret: StagingSecret) -> list[int]:
    """Indices of a sample of `limit` items (all when limit is None or >= count) drawn from the staging's
    secret, in a secret order."""
    return secret.sample(range(count), count if limit is None else int(limit), "sample")


def reencoded(images: list[tuple[str, bytes]], qid: str) -> list[tuple[str, bytes]]:
    """Each image decoded and written again as PNG (`automedbench.api.reencode_image`): the same pixels (a
    JPEG's as decoded), none of the source's bytes or metadata, so no file matches the source's by hash."""
    return [(stem, reencode_image(data, f"{qid}/{stem}")) for stem, data in images]


def set_modes(root: Path, dir_mode: int, file_mode: int) -> None:
    """Give every folder and file below `root` (and `root`) an explicit mode, whatever the umask.

    The atomic writes make files 0600; under docker with a root harness the agent runs as another
    uid, so public questions must be world-readable, and references must not be."""
    os.chmod(root, dir_mode)
    for folder, dirnames, filenames in os.walk(root):
        for name in dirnames:
            os.chmod(os.path.join(folder, name), dir_mode, follow_symlinks=False)
        for name in filenames:
            os.chmod(os.path.join(folder, name), file_mode, follow_symlinks=False)


def finish(area: StagingArea, qids: list[str], params: dict[str, Any]) -> StagedData:
    """Write the smoke and calibration id lists (disjoint, drawn from the staging's secret), then commit the area
    (a failed re-stage leaves the old staging intact, a successful one leaves no stale question folders)."""
    if not qids:
        raise UserError("staging produced no questions")
    order = area.secret.shuffled(qids, "smoke and calibration")
    smoke_n = int(params.get("smoke", 10))
    calibration_n = int(params.get("calibration", 15))
    smoke = order[:smoke_n]
    calibration = order[smoke_n:smoke_n + calibration_n]
    public = area.public
    atomic_write_text(public / SMOKE_FILE, "".join(f"{q}\n" for q in smoke))
    atomic_write_text(public / CALIBRATION_FILE, "".join(f"{q}\n" for q in calibration))
    set_modes(public, 0o755, 0o644)
    set_modes(area.private, 0o700, 0o600)
    return area.commit(qids, "questions")


def read_private(private: Path, qid: str) -> dict[str, Any]:
    path = private / qid / ANSWER_FILE
    return json.loads(path.read_text("utf-8")) if path.is_file() else {}


def read_question(public_case: Path) -> dict:
    """A staged question record (public/<qid>/question.json); a damaged one asks for re-staging."""
    record, problem = read_json_object(public_case / QUESTION_FILE)
    if record is None:
        raise UserError(f"staged question {public_case.name}: {problem}; re-stage the task with --force")
    return record
