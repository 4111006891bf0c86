"""The generated demo: synthetic blood smears (RBC, WBC, Platelets as in BCCD) with exact boxes.

Cells are discs drawn with scikit-image: red cells salmon with a pale centre and allowed to overlap
(up to `overlap` of the smaller disc), so touching cells must be split and duplicate boxes suppressed;
white cells lavender with 2–4 dark lobes; platelets small purple dots. A box is the disc's bounding
box clipped to the image (an occluded cell keeps its whole box, as annotators draw it). Deterministic
per (seed, index); a dozen 640×480 smears in about a second.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from automedbench.api import StagedData, TaskSpec, staging_area

from .staged import GTBox, neutral_ids, png_bytes, write_case

CLASSES = ["RBC", "WBC", "Platelets"]
PLASMA = np.array([0.93, 0.84, 0.80])
RBC_RIM, RBC_CENTRE = np.array([0.84, 0.42, 0.40]), np.array([0.90, 0.62, 0.58])
WBC_CYTO, WBC_LOBE = np.array([0.76, 0.68, 0.90]), np.array([0.36, 0.18, 0.55])
PLATELET = np.array([0.52, 0.32, 0.68])


def _place(rng: np.random.Generator, discs: list[tuple[float, float, float]], r: float, width: int, height: int,
           overlap: float, tries: int = 200) -> tuple[float, float] | None:
    """A centre whose disc overlaps every placed disc by less than `overlap` of the smaller radius."""
    for _ in range(tries):
        cx, cy = rng.uniform(0.6 * r, width - 0.6 * r), rng.uniform(0.6 * r, height - 0.6 * r)
        if all(np.hypot(cx - x, cy - y) >= (r + q) - overlap * 2 * min(r, q) for x, y, q in discs):
            return cx, cy
    return None


def make_smear(seed: int, index: int, width: int = 640, height: int = 480, n_rbc: tuple[int, int] = (25, 40),
               n_wbc: tuple[int, int] = (0, 2), n_plt: tuple[int, int] = (1, 5),
               overlap: float = 0.45) -> tuple[np.ndarray, list[GTBox]]:
    """One smear as uint8 RGB pixels and its boxes (class, x1, y1, x2, y2)."""
    from skimage.draw import disk, ellipse
    from skimage.filters import gaussian

    rng = np.random.default_rng([seed, index])
    yy, xx = np.mgrid[0:height, 0:width]
    vignette = 1.0 - 0.06 * (((xx - width / 2) / width) ** 2 + ((yy - height / 2) / height) ** 2)
    img = PLASMA[None, None, :] * vignette[..., None]
    placed: list[tuple[float, float, float]] = []
    objects: list[tuple[str, float, float, float]] = []
    for name, count, radius, rule in (("WBC", n_wbc, (30, 40), 0.02), ("RBC", n_rbc, (17, 24), overlap),
                                      ("Platelets", n_plt, (4, 7), 0.0)):
        for _ in range(int(rng.integers(count[0], count[1] + 1))):
            r = float(rng.uniform(*radius))
            spot = _place(rng, placed, r, width, height, rule)
            if spot is not None:
                placed.append((spot[0], spot[1], r))
                objects.append((name, spot[0], spot[1], r))
    shape = (height, width)
    for name, cx, cy, r in sorted(objects, key=lambda o: ("RBC", "WBC", "Platelets").index(o[0])):
        rr, cc = disk((cy, cx), r, shape=shape)
        if name == "RBC":
            d = np.hypot(rr - cy, cc - cx) / r
            mix = np.clip((0.55 - d) / 0.3, 0.0, 1.0)[:, None]
            img[rr, cc] = RBC_RIM * (1 - mix) + RBC_CENTRE * mix
        elif name == "WBC":
            img[rr, cc] = WBC_CYTO
            for _ in range(int(rng.integers(2, 5))):
                a, b = rng.uniform(0.25, 0.4) * r, rng.uniform(0.15, 0.25) * r
                ox, oy = rng.uniform(-0.35, 0.35, 2) * r
                er, ec = ellipse(cy + oy, cx + ox, b, a, shape=shape, rotation=rng.uniform(0, np.pi))
                img[er, ec] = WBC_LOBE
        else:
            img[rr, cc] = PLATELET
    img = gaussian(img, sigma=1.2, channel_axis=-1) + rng.normal(0.0, 0.015, img.shape)
    pixels = (np.clip(img, 0.0, 1.0) * 255).round().astype(np.uint8)
    boxes = [(name, max(0.0, cx - r), max(0.0, cy - r), min(float(width), cx + r), min(float(height), cy + r))
             for name, cx, cy, r in objects]
    return pixels, boxes


def stage_demo(task: TaskSpec, dest: Path) -> StagedData:
    params = task.params
    seed, count = int(params.get("seed", 20261203)), task.case_count
    width, height = int(params.get("width", 640)), int(params.get("height", 480))
    overlap = float(params.get("overlap", 0.45))
    n_rbc = tuple(params.get("rbc", (25, 40)))
    with staging_area(dest) as area:
        case_ids = neutral_ids(params.get("case_prefix", "smear"), count)
        for index, case_id in enumerate(case_ids):
            pixels, boxes = make_smear(seed, index, width, height, n_rbc=n_rbc, overlap=overlap)  # type: ignore[arg-type]
            write_case(area.root, case_id, png_bytes(pixels), width, height, CLASSES, boxes,
                       {"generator": "automedbench_detection.data.demo", "seed": seed, "index": index})
        return area.commit(case_ids)
