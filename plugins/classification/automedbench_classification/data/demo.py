"""The generated demo: dermoscopy-like RGB images whose class follows a known, visible rule.

A skin-coloured background with noise and a few dark hairs; one lesion (an irregular disc) whose look
says its class (the HAM10000 seven, in the checkpoint abbreviations' order):

| class | rule |
|---|---|
| actinic_keratoses (akiec) | red lesion with many small white scale points |
| basal_cell_carcinoma (bcc) | pink lesion with thin dark-red branching lines |
| benign_keratosis_like_lesions (bkl) | light-brown lesion with a few round white milia |
| dermatofibroma (df) | brown ring around a pale centre |
| melanoma (mel) | dark, irregular lesion with a blue-grey veil |
| melanocytic_nevi (nv) | uniform medium-brown round lesion |
| vascular_lesions (vasc) | red-purple lesion with dark purple lacunae |

Class counts follow a HAM-like prior with a floor per class (`counts`), shuffled by the seed; the seed
is a fresh secret per staging (the core replaces it), so the generator in the sandbox cannot rebuild the
labels. Deterministic per (seed, index).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from automedbench.api import StagedData, TaskSpec, staging_area

from .staged import jpeg_bytes, neutral_ids, write_case

ABBREVIATIONS = ["akiec", "bcc", "bkl", "df", "mel", "nv", "vasc"]
CLASSES = ["actinic_keratoses", "basal_cell_carcinoma", "benign_keratosis_like_lesions", "dermatofibroma",
           "melanoma", "melanocytic_nevi", "vascular_lesions"]
SKIN = np.array([0.87, 0.70, 0.60])
BASE = {"akiec": (0.80, 0.38, 0.35), "bcc": (0.90, 0.58, 0.60), "bkl": (0.72, 0.55, 0.40),
        "df": (0.47, 0.31, 0.22), "mel": (0.26, 0.16, 0.13), "nv": (0.52, 0.34, 0.23),
        "vasc": (0.66, 0.26, 0.44)}
WHITE = np.array([0.97, 0.96, 0.93])


def _blob(rng: np.random.Generator, yy: np.ndarray, xx: np.ndarray, cy: float, cx: float, r: float,
          irregular: float) -> np.ndarray:
    """A disc whose radius varies smoothly with angle (irregular = relative amplitude)."""
    angle = np.arctan2(yy - cy, xx - cx)
    wobble = sum(rng.uniform(0, irregular) * np.cos(k * angle + rng.uniform(0, 2 * np.pi)) for k in (2, 3, 5))
    return np.hypot(yy - cy, xx - cx) <= r * (1.0 + wobble)


def _dots(rng: np.random.Generator, img: np.ndarray, yy: np.ndarray, xx: np.ndarray, mask: np.ndarray,
          count: int, radius: tuple[float, float], colour: np.ndarray) -> None:
    ys, xs = np.nonzero(mask)
    for _ in range(count):
        k = int(rng.integers(len(ys)))
        r = rng.uniform(*radius)
        img[np.hypot(yy - ys[k], xx - xs[k]) <= r] = colour


def _lines(rng: np.random.Generator, img: np.ndarray, cy: float, cx: float, r: float, colour: np.ndarray) -> None:
    """Branching random walks from near the centre (telangiectasia-like vessels), 1 px wide."""
    size = img.shape[0]
    for _ in range(int(rng.integers(3, 6))):
        y, x = cy + rng.uniform(-0.3, 0.3) * r, cx + rng.uniform(-0.3, 0.3) * r
        heading = rng.uniform(0, 2 * np.pi)
        for _step in range(int(r * 1.1)):
            heading += rng.normal(0, 0.35)
            y, x = y + np.sin(heading), x + np.cos(heading)
            iy, ix = round(y), round(x)
            if 0 <= iy < size and 0 <= ix < size and np.hypot(y - cy, x - cx) < 0.85 * r:
                img[iy, ix] = colour


def make_lesion(seed: int, index: int, abbreviation: str, size: int = 160) -> np.ndarray:
    """One image of the given class as uint8 RGB pixels."""
    from scipy.ndimage import gaussian_filter

    rng = np.random.default_rng([seed, index])
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    skin = np.clip(SKIN + rng.normal(0, 0.025, 3), 0, 1)
    img = np.broadcast_to(skin, (size, size, 3)).copy()
    img += gaussian_filter(rng.normal(0, 0.04, (size, size, 1)), (2, 2, 0))
    cy, cx = size / 2 + rng.uniform(-0.08, 0.08, 2) * size
    r = rng.uniform(0.24, 0.32) * size
    irregular = 0.12 if abbreviation == "mel" else 0.04
    mask = _blob(rng, yy, xx, cy, cx, r, irregular)
    base = np.clip(np.array(BASE[abbreviation]) + rng.normal(0, 0.025, 3), 0, 1)
    img[mask] = base + rng.normal(0, 0.02, (int(mask.sum()), 3))
    inner = mask & (np.hypot(yy - cy, xx - cx) <= 0.7 * r)
    if abbreviation == "akiec":
        _dots(rng, img, yy, xx, inner, int(rng.integers(25, 40)), (0.8, 1.4), WHITE)
    elif abbreviation == "bcc":
        _lines(rng, img, cy, cx, r, np.array([0.62, 0.10, 0.14]))
    elif abbreviation == "bkl":
        _dots(rng, img, yy, xx, inner, int(rng.integers(4, 8)), (2.2, 3.5), WHITE)
    elif abbreviation == "df":
        img[np.hypot(yy - cy, xx - cx) <= rng.uniform(0.45, 0.55) * r] = skin + np.array([0.0, 0.04, 0.06])
    elif abbreviation == "mel":
        veil = _blob(rng, yy, xx, cy + rng.uniform(-0.2, 0.2) * r, cx + rng.uniform(-0.2, 0.2) * r,
                     rng.uniform(0.35, 0.5) * r, 0.1) & mask
        img[veil] = np.array([0.42, 0.48, 0.60]) + rng.normal(0, 0.02, 3)
    elif abbreviation == "vasc":
        _dots(rng, img, yy, xx, inner, int(rng.integers(6, 11)), (2.5, 4.5), np.array([0.40, 0.10, 0.30]))
    for _ in range(int(rng.integers(0, 4))):  # hairs: thin dark arcs across the image
        y0, x0, angle = rng.uniform(0, size), rng.uniform(0, size), rng.uniform(0, np.pi)
        t = np.linspace(-size, size, 4 * size)
        bend = rng.uniform(-0.002, 0.002)
        ys = (y0 + t * np.sin(angle) + bend * t**2).round().astype(int)
        xs = (x0 + t * np.cos(angle)).round().astype(int)
        keep = (ys >= 0) & (ys < size) & (xs >= 0) & (xs < size)
        img[ys[keep], xs[keep]] = np.array([0.18, 0.12, 0.10])
    img = gaussian_filter(img, (0.7, 0.7, 0)) + rng.normal(0, 0.012, img.shape)
    return (np.clip(img, 0.0, 1.0) * 255).round().astype(np.uint8)


def class_plan(counts: dict[str, int], seed: int) -> list[str]:
    """The abbreviation of every case, in a seeded order."""
    plan = [abbr for abbr in ABBREVIATIONS for _ in range(int(counts.get(abbr, 0)))]
    np.random.default_rng([seed, 7]).shuffle(plan)
    return plan


def stage_demo(task: TaskSpec, dest: Path) -> StagedData:
    params = task.params
    seed, size = int(params.get("seed", 20261205)), int(params.get("size", 160))
    plan = class_plan(dict(params["counts"]), seed)
    if len(plan) != task.case_count:
        raise ValueError(f"{task.id}: counts add up to {len(plan)}, case_count is {task.case_count}")
    canonical = dict(zip(ABBREVIATIONS, CLASSES, strict=True))
    classes = [str(c) for c in params["classes"]]
    with staging_area(dest) as area:
        case_ids = neutral_ids(str(params.get("case_prefix", "lesion")), len(plan))
        for index, (case_id, abbr) in enumerate(zip(case_ids, plan, strict=True)):
            pixels = make_lesion(seed, index, abbr, size)
            write_case(area.root, case_id, jpeg_bytes(pixels, 92), classes, canonical[abbr],
                       {"generator": "automedbench_classification.data.demo", "index": index})
        return area.commit(case_ids)
