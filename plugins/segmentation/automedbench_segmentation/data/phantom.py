"""Deterministic phantom abdominal CT volumes with kidney (organ) and tumour (lesion) labels.

Small enough to generate in well under a second per case, structured enough that a classical method
gets a real but imperfect Dice: blurred organ boundaries, noise, a hypodense tumour inside one kidney,
a bright spine and a liver-like organ that overlaps the tumour's intensity range.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

SHAPE = (96, 96, 40)
SPACING = (0.8, 0.8, 2.5)


def _ellipsoid(shape, centre, radii) -> np.ndarray:
    grids = np.ogrid[tuple(slice(0, n) for n in shape)]
    total = sum(((g - c) / r) ** 2 for g, c, r in zip(grids, centre, radii, strict=True))
    return total <= 1.0


def affine(spacing=SPACING) -> np.ndarray:
    aff = np.diag([*spacing, 1.0])
    aff[:3, 3] = [-s * n / 2 for s, n in zip(spacing, SHAPE, strict=True)]
    return aff


def make_case(index: int, tumour: bool, seed: int = 20261202) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (ct HU int16, organ uint8, lesion uint8) for case `index`."""
    ct, organ, lesion, _ = make_case_with_liver(index, tumour, seed)
    return ct, organ, lesion


def make_label_map(index: int, tumour: bool, seed: int = 20261202) -> tuple[np.ndarray, np.ndarray]:
    """Return (ct HU int16, labels uint8) with 1 kidney (without tumour), 2 kidney tumour, 3 liver."""
    ct, organ, lesion, liver = make_case_with_liver(index, tumour, seed)
    labels = np.zeros(SHAPE, dtype=np.uint8)
    labels[liver.astype(bool)] = 3
    labels[organ.astype(bool)] = 1
    labels[lesion.astype(bool)] = 2
    return ct, labels


def make_case_with_liver(index: int, tumour: bool, seed: int = 20261202):
    """(ct, organ, lesion, liver): the same draws as `make_case`, plus the visible liver mask."""
    rng = np.random.default_rng([seed, index])
    cx, cy, cz = (s / 2 for s in SHAPE)
    ct = np.full(SHAPE, -1000.0, dtype=np.float32)
    body = _ellipsoid(SHAPE, (cx, cy, cz), (42, 34, 60))
    ct[body] = 40.0
    liver = _ellipsoid(SHAPE, (cx - 18 + rng.uniform(-2, 2), cy - 14, cz + 6), (16, 12, 14))
    liver &= body
    ct[liver] = 95.0
    spine = _ellipsoid(SHAPE, (cx, cy + 22, cz), (6, 6, 60))
    ct[spine] = 650.0
    organ = np.zeros(SHAPE, dtype=bool)
    for side in (-1, 1):
        centre = (cx + side * 24 + rng.uniform(-2, 2), cy + 8 + rng.uniform(-2, 2), cz + rng.uniform(-3, 3))
        radii = (rng.uniform(8, 10), rng.uniform(11, 13), rng.uniform(7, 9))
        organ |= _ellipsoid(SHAPE, centre, radii)
    ct[organ] = 175.0
    lesion = np.zeros(SHAPE, dtype=bool)
    if tumour:
        side = rng.choice([-1, 1])
        centre = (cx + side * 24 + rng.uniform(-2, 2), cy + 8 + rng.uniform(-3, 3), cz + rng.uniform(-2, 2))
        r = rng.uniform(3.5, 5.5)
        lesion = _ellipsoid(SHAPE, centre, (r, r, max(1.5, r * 0.32 * 2)))
        lesion &= ndimage.binary_erosion(organ, iterations=2)
        ct[lesion] = 85.0
        organ |= lesion
    ct = ndimage.gaussian_filter(ct, sigma=(0.8, 0.8, 0.4))
    ct += rng.normal(0.0, 18.0, SHAPE).astype(np.float32)
    liver &= ~organ & ~spine
    return np.round(ct).astype(np.int16), organ.astype(np.uint8), lesion.astype(np.uint8), liver.astype(np.uint8)
