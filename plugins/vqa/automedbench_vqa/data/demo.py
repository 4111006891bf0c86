"""The generated demo: synthetic scans whose answers follow from the pixels (presence, count, side,
shape as MCQ, and a multi-frame "which frame" MCQ). Deterministic, offline, well under a second.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from automedbench.api import StagedData, TaskSpec, staging_area
from PIL import Image, ImageDraw

from ..answers import LETTERS
from .records import finish, write_question

SIZE = 128
LESION = 225
# (lesion count, side, shape, body system): the cohort's scans. Which slot holds which (count, side, shape) is
# dealt by the staging's secret seed (`dealt_scans`): this table is readable wherever the package is installed.
SCANS: list[tuple[int, str, str, str]] = [
    (1, "left", "circle", "chest"), (0, "", "", "chest"), (2, "right", "square", "chest"),
    (1, "right", "triangle", "abdomen"), (3, "left", "circle", "abdomen"), (2, "left", "square", "abdomen"),
]
SHAPES = ["circle", "square", "triangle", "ring", "star"]
FRAMES = 5


def _png(image: Image.Image) -> bytes:
    """Stored, not compressed: every image of one size has one file size. Compressed, a flat bright lesion saved
    bytes over the noise around it, so the file sizes alone ranked the scans by lesion count."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=0)
    return buffer.getvalue()


def _base(rng: np.random.Generator) -> Image.Image:
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    body = ((xx - SIZE / 2) / 56) ** 2 + ((yy - SIZE / 2) / 48) ** 2 <= 1.0
    pixels = np.where(body, 95.0, 12.0) + rng.normal(0.0, 7.0, (SIZE, SIZE))
    return Image.fromarray(np.clip(pixels, 0, 150).astype(np.uint8), mode="L")


def _draw(draw: ImageDraw.ImageDraw, shape: str, cx: float, cy: float, r: float) -> None:
    box = [cx - r, cy - r, cx + r, cy + r]
    if shape == "circle":
        draw.ellipse(box, fill=LESION)
    elif shape == "square":
        draw.rectangle(box, fill=LESION)
    else:
        draw.polygon([(cx, cy - r), (cx + r, cy + r), (cx - r, cy + r)], fill=LESION)


def make_scan(index: int, count: int, side: str, shape: str, seed: int) -> bytes:
    rng = np.random.default_rng([seed, index])
    image = _base(rng)
    draw = ImageDraw.Draw(image)
    x_lo, x_hi = (24, 52) if side == "left" else (76, 104)
    for k in range(count):
        cy = 30 + k * 32 + rng.uniform(-3, 3)
        _draw(draw, shape, rng.uniform(x_lo, x_hi), cy, rng.uniform(7, 9))
    return _png(image)


def make_frames(index: int, seed: int) -> tuple[list[bytes], int]:
    """Five frames of one growing-then-shrinking lesion; returns the frames and the largest frame (0-based)."""
    rng = np.random.default_rng([seed, 1000 + index])
    peak = int(rng.integers(0, FRAMES))
    frames = []
    for f in range(FRAMES):
        image = _base(rng)
        radius = 12 - 2.0 * abs(f - peak)
        ImageDraw.Draw(image).ellipse([64 - radius, 64 - radius, 64 + radius, 64 + radius], fill=LESION)
        frames.append(_png(image))
    return frames, peak


def _options(rng: np.random.Generator, correct: str, pool: list[str]) -> tuple[dict[str, str], str]:
    order = list(rng.permutation(pool))
    options = dict(zip(LETTERS, order, strict=True))
    return options, next(k for k, v in options.items() if v == correct)


def dealt_scans(seed: int) -> list[tuple[int, str, str, str]]:
    """SCANS' lesion facts (count, side, shape) dealt to the scan slots by the seed; body systems stay per slot.

    With the facts in a fixed order, the answers to every presence, count, side and shape question were
    constants of this module: an agent reading the installed package (the sandbox runs the harness's own
    Python) scored A without opening an image. Dealt, the cohort keeps its answer mix (one scan without
    lesions, the same counts, sides and shapes) and the source answers nothing."""
    rng = np.random.default_rng([seed, 3000])
    counts = [SCANS[k][0] for k in rng.permutation(len(SCANS))]
    sides = list(rng.permutation([side for _, side, _, _ in SCANS if side]))  # dealt apart from the counts
    shapes = list(rng.permutation([shape for _, _, shape, _ in SCANS if shape]))
    dealt = []
    for count, (_, _, _, system) in zip(counts, SCANS, strict=True):
        side, shape = (str(sides.pop()), str(shapes.pop())) if count else ("", "")
        dealt.append((count, side, shape, system))
    return dealt


def demo_questions(seed: int) -> list[tuple[dict[str, Any], list[tuple[str, bytes]], dict[str, str]]]:
    """(public question fields, images, gold) for every demo question, in a fixed order (`stage_demo` numbers them
    in a secret one).

    Each question has a render of its own (its own noise and lesion places, the scan's facts): a scan without
    lesions is asked no side or shape question, so when its questions shared one image, the images with no side
    question were the "no" and "0" answers, and a blind agent grouping questions by their image's bytes (or by
    the numbering, which followed this order) rated A on the demo (kappa 0.15-0.20; tests/test_redteam_round9.py)."""
    items = []
    for index, (count, side, shape, system) in enumerate(dealt_scans(seed)):
        def scan(kind: int, index: int = index, count: int = count, side: str = side,
                 shape: str = shape) -> list[tuple[str, bytes]]:
            return [("image", make_scan(4 * index + kind, count, side, shape, seed))]

        common = {"dataset": "vqa-demo", "split": "test", "body_system": system, "modality": "synthetic CT"}
        items.append(({**common, "question": "Is there a bright lesion in this image?", "mode": "open_ended",
                       "question_type": "presence"}, scan(0), {"answer_text": "yes" if count else "no"}))
        items.append(({**common, "question": "How many bright lesions are visible?", "mode": "open_ended",
                       "question_type": "count"}, scan(1), {"answer_text": str(count)}))
        if count:
            items.append(({**common, "question": "On which side of the image are the bright lesions?",
                           "mode": "open_ended", "question_type": "side"}, scan(2), {"answer_text": side}))
            options, label = _options(np.random.default_rng([seed, 2000 + index]), shape, SHAPES)
            items.append(({**common, "question": "What shape are the bright lesions?", "mode": "multiple_choice",
                           "options": options, "question_type": "shape"}, scan(3),
                          {"answer_text": shape, "answer_label": label}))
    for index in range(2):
        frames, peak = make_frames(index, seed)
        options = {letter: f"frame {i + 1}" for i, letter in enumerate(LETTERS)}
        items.append(({"dataset": "vqa-demo", "split": "test", "body_system": "abdomen",
                       "modality": "synthetic ultrasound cine", "mode": "multiple_choice", "options": options,
                       "question": "The frames are in time order. In which frame is the bright lesion largest?",
                       "question_type": "frames"},
                      [(f"frame_{i + 1}", data) for i, data in enumerate(frames)],
                      {"answer_text": options[LETTERS[peak]], "answer_label": LETTERS[peak]}))
    return items


def stage_demo(task: TaskSpec, dest: Path) -> StagedData:
    seed = int(task.params.get("seed", 20261202))
    with staging_area(dest) as area:
        qids = []
        items = demo_questions(seed)
        for number, index in enumerate(area.secret.shuffled(range(len(items)), "order")):
            qid = f"demo_q{number:02d}"
            write_question(area.root, qid, *items[index])
            qids.append(qid)
        return finish(area, qids, task.params)
