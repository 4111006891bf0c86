"""A deterministic airway-tree phantom: a branching tube tree inside lung-shaped volumes on CT.

The trachea runs down the mediastinum from the top of the volume and splits at the carina; every
branch splits in two, shorter and narrower, into the lungs. Lumen is air (-1000 HU) with a soft-tissue
wall (-80 HU) around it, lungs are -850 HU in a 40 HU body. Blur and noise make the thinnest
branches fade into the parenchyma, so region growing from the trachea finds the tree well but not
perfectly (a real, imperfect Dice). The reference is the lumen.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from automedbench.api import StagedData, TaskSpec, staging_area
from scipy import ndimage

from .. import io

SHAPE = (80, 72, 96)  # x (right-left), y (front-back), z (feet-head)
SPACING = (1.0, 1.0, 1.0)
LUMEN_HU, WALL_HU, LUNG_HU, BODY_HU = -1000.0, -80.0, -820.0, 40.0
WALL_MM = 1.2
DEPTH = 4  # branching generations below the trachea


def affine() -> np.ndarray:
    aff = np.diag([*SPACING, 1.0])
    aff[:3, 3] = [-s * n / 2 for s, n in zip(SPACING, SHAPE, strict=True)]
    return aff


def _ellipsoid(centre, radii) -> np.ndarray:
    grids = np.ogrid[tuple(slice(0, n) for n in SHAPE)]
    return sum(((g - c) / r) ** 2 for g, c, r in zip(grids, centre, radii, strict=True)) <= 1.0


def _segment_distance(a: np.ndarray, b: np.ndarray, reach: float) -> tuple[tuple[slice, ...], np.ndarray]:
    """Distance of every voxel in the segment's bounding box (grown by `reach`) to the segment a-b."""
    lo = np.maximum(np.floor(np.minimum(a, b) - reach).astype(int), 0)
    hi = np.minimum(np.ceil(np.maximum(a, b) + reach).astype(int) + 1, SHAPE)
    box = tuple(slice(int(start), int(stop)) for start, stop in zip(lo, hi, strict=True))
    grids = np.meshgrid(*(np.arange(s.start, s.stop) for s in box), indexing="ij")
    points = np.stack(grids, axis=-1).astype(np.float32)
    d = b - a
    t = np.clip(((points - a) @ d) / max(float(d @ d), 1e-9), 0.0, 1.0)
    nearest = a + t[..., None] * d
    return box, np.linalg.norm(points - nearest, axis=-1)


def _branches(rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """(start, end, radius) of every tube: the trachea, then DEPTH generations of binary splits."""
    cx, cy = SHAPE[0] / 2 + rng.uniform(-1.5, 1.5), SHAPE[1] / 2 + rng.uniform(-1.5, 1.5)
    top, carina = np.array([cx, cy, SHAPE[2] - 1.0]), np.array([cx, cy, SHAPE[2] * 0.62 + rng.uniform(-2, 2)])
    tubes = [(top, carina, 4.0 + rng.uniform(-0.3, 0.3))]
    level = [(carina, np.array([0.0, 0.0, -1.0]), 4.0, 20.0)]
    for generation in range(DEPTH):
        nxt = []
        for start, direction, radius, length in level:
            for side in (-1.0, 1.0):
                angle = np.deg2rad(rng.uniform(28, 40)) * side
                twist = rng.uniform(-0.35, 0.35)
                if generation == 0:  # main bronchi go right and left, into the lungs
                    new = np.array([np.sin(angle) * 1.2, twist, -np.cos(angle)])
                else:
                    axis = np.cross(direction, [0.0, 1.0, 0.0] if generation % 2 else [1.0, 0.0, 0.0])
                    axis /= np.linalg.norm(axis) or 1.0
                    new = np.cos(angle) * direction + np.sin(angle) * axis + twist * np.cross(direction, axis)
                new /= np.linalg.norm(new)
                r, ln = radius * 0.72, length * rng.uniform(0.7, 0.8)
                end = np.clip(start + new * ln, 2, np.array(SHAPE) - 3)
                tubes.append((start, end, r))
                nxt.append((end, new, r, ln))
        level = nxt
    return tubes


def make_case(index: int, seed: int = 20261204) -> tuple[np.ndarray, np.ndarray]:
    """(ct int16 HU, airway lumen uint8) of case `index`."""
    rng = np.random.default_rng([seed, index])
    cx, cy, cz = (n / 2 for n in SHAPE)
    ct = np.full(SHAPE, -1000.0, dtype=np.float32)
    body = _ellipsoid((cx, cy, cz), (38, 33, 200))
    ct[body] = BODY_HU
    lungs = np.zeros(SHAPE, dtype=bool)
    for side in (-1, 1):
        lungs |= _ellipsoid((cx + side * 17, cy + rng.uniform(-1, 1), cz - 8 + rng.uniform(-2, 2)),
                            (15 + rng.uniform(-1, 1), 25, 40 + rng.uniform(-2, 2)))
    lungs &= body
    ct[lungs] = LUNG_HU
    lumen = np.zeros(SHAPE, dtype=bool)
    for a, b, radius in _branches(rng):
        box, dist = _segment_distance(a, b, radius + WALL_MM + 1.0)
        wall = (dist <= radius + WALL_MM) & ~lumen[box]
        ct[box][wall] = WALL_HU
        lumen[box] |= dist <= radius
    lumen &= body
    ct[lumen] = LUMEN_HU
    ct = ndimage.gaussian_filter(ct, sigma=0.6)
    ct += rng.normal(0.0, 20.0, SHAPE).astype(np.float32)
    return np.round(ct).astype(np.int16), lumen.astype(np.uint8)


def stage_airway_demo(task: TaskSpec, dest: Path) -> StagedData:
    seed = int(task.params.get("seed", 20261204))
    ids = [f"case_{i:03d}" for i in range(task.case_count)]
    aff = affine()
    facts = {}
    with staging_area(dest) as area:
        for index, case in enumerate(ids):
            ct, lumen = make_case(index, seed)
            io.save(area.private / case / task.output_files[0], lumen, aff)
            io.save(area.public / case / task.input_files[0], ct, aff)
            facts[case] = {"labels_present": [1] if lumen.any() else []}
        io.write_case_facts(area.private, facts)
        return area.commit(ids)
