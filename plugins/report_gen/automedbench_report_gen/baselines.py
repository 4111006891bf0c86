"""Baselines `automedbench evaluate --baseline NAME` writes: bounds and naive systems for calibration."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from automedbench.api import StagedData, TaskSpec, UserError, atomic_write_text
from PIL import Image

from . import contract
from .data.wording import NORMAL_REPORT, REWORDED, Findings, report

BASELINES: dict[str, str] = {
    "perfect": "the reference reports",
    "empty": "an empty report.txt for every study (invalid: strict Task 0)",
    "constant": "one normal chest X-ray report for every study",
    "majority-template": "the reference report most similar to all others (the cohort's label prior as text), "
                         "copied to every study",
    "template-plus-word": "the majority template with one different word added per study (escapes exact matching)",
    "nearest-template": "the reference report of the most similar other study (first view, 32x32 pixels)",
    "reworded": "the same findings in other words (demo: the second template set; other tasks: the "
                "reference's sentences in reverse order)",
}

# Trivial and gaming submissions the bands must hold below B (checked on every demo by the tests).
TRIVIAL: dict[str, str] = {
    "empty": "no report",
    "constant": "one fixed normal report, no image opened",
    "majority-template": "the cohort's most typical reference copied everywhere (label prior)",
    "template-plus-word": "a template perturbed by one word per case",
    "nearest-template": "retrieval of another study's reference by pixel distance",
}
FILLER = ("Noted", "Seen", "Reviewed", "Viewed", "Read", "Checked", "Assessed", "Studied", "Examined", "Compared")


def majority_template(staged: StagedData) -> str:
    """The reference with the highest summed word overlap with every other reference."""
    from .text import word_overlap

    texts = [(staged.private / c / contract.REPORT_FILE).read_text("utf-8") for c in staged.case_ids]
    return max(texts, key=lambda t: sum(word_overlap(t, o) for o in texts))


def _thumbnail(public_case: Path) -> np.ndarray:
    manifest = contract.read_manifest(public_case / contract.MANIFEST_FILE)
    with Image.open(public_case / manifest["image_files"][0]) as image:
        small = np.asarray(image.convert("L").resize((32, 32), Image.BILINEAR), dtype=np.float32)
    return (small - small.mean()) / (small.std() + 1e-6)


def nearest_reports(staged: StagedData) -> dict[str, str]:
    """Leave-one-out retrieval: each study gets the report of its nearest neighbour by pixel distance."""
    ids = list(staged.case_ids)
    if len(ids) < 2:
        raise UserError("nearest-template needs at least two studies")
    thumbs = np.stack([_thumbnail(staged.public / c) for c in ids]).reshape(len(ids), -1)
    distance = ((thumbs[:, None, :] - thumbs[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(distance, np.inf)
    return {c: (staged.private / ids[int(distance[i].argmin())] / contract.REPORT_FILE).read_text("utf-8")
            for i, c in enumerate(ids)}


def reworded(private_case: Path) -> str:
    facts_path = private_case / "facts.json"
    facts = json.loads(facts_path.read_text("utf-8")) if facts_path.is_file() else {}
    if "findings" in facts:
        return report(Findings(**facts["findings"]), REWORDED, [0] * 12)
    text = (private_case / contract.REPORT_FILE).read_text("utf-8")
    sentences = [s.strip() for s in re.split(r"(?<=\.)\s+", " ".join(text.split())) if s.strip()]
    return " ".join(reversed(sentences)) + "\n"


def write_baseline(task: TaskSpec, name: str, staged: StagedData, dest: Path) -> None:
    if name not in BASELINES:
        raise UserError(f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}")
    nearest = nearest_reports(staged) if name == "nearest-template" else {}
    template = majority_template(staged) if name in ("majority-template", "template-plus-word") else ""
    for n, case in enumerate(staged.case_ids):
        private = staged.private / case
        if name == "perfect":
            text = (private / contract.REPORT_FILE).read_text("utf-8")
        elif name == "empty":
            text = ""
        elif name == "constant":
            text = NORMAL_REPORT
        elif name == "majority-template":
            text = template
        elif name == "template-plus-word":
            text = template.rstrip() + f" {FILLER[n % len(FILLER)]} {n}.\n"
        elif name == "nearest-template":
            text = nearest[case]
        else:
            text = reworded(private)
        atomic_write_text(dest / case / contract.REPORT_FILE, text)
