"""Demo references no sandbox-readable file reveals: a secret per-staging variant of a shipped image.

A demo built from an image that an installed package ships (pydicom-data, scikit-image data, ...) has its
source readable in every sandbox, and the generator's code too. So the reference is never the shipped
image itself: `secret_variant` warps it (random rotation, scale, shift and a smooth elastic field),
remaps its intensities and adds smooth structures, all drawn from a generator seeded by the staging's
secret seed (a fresh `secrets.randbits` per staging, kept in no public file). Registering the shipped
image onto the noisy input then recovers less than denoising the input does; the conformance check
`automedbench.testing.find_reference_leaks` measures that on every track's demo.

Those smooth changes all show in the input's low band, so a demo whose input lacks the high band (a
super-resolution input) still gets its fine detail from the shipped image: registered onto the input
(similarity, then optical flow), the shipped image's high band added to the input's low band rated A on
enhancement/demo-sr (tests/test_redteam_round28.py). `jitter_px` moves every pixel a fraction of a pixel
by a field varying over a few pixels, a scale the low band cannot show: the shipped high band no longer
lines up with the reference's.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def smooth_field(shape: tuple[int, int], rng: np.random.Generator, sigma_px: float, amplitude_px: float) -> np.ndarray:
    """A smooth random displacement (2, H, W) whose largest magnitude is `amplitude_px`."""
    from scipy import ndimage

    field = np.stack([ndimage.gaussian_filter(rng.standard_normal(shape), sigma_px, mode="wrap") for _ in range(2)])
    peak = float(np.abs(field).max()) or 1.0
    return field * (amplitude_px / peak)


def warp(image: np.ndarray, rng: np.random.Generator, *, rotate_deg: float = 10.0, scale: float = 0.06,
         shift_px: float = 10.0, elastic_px: float = 6.0, elastic_sigma_px: float = 24.0,
         fill: float | None = None) -> np.ndarray:
    """The image resampled (cubic) through a random similarity transform plus a smooth elastic field."""
    from scipy import ndimage

    h, w = image.shape
    angle = np.deg2rad(rng.uniform(-rotate_deg, rotate_deg))
    zoom = 1.0 + rng.uniform(-scale, scale)
    dy, dx = rng.uniform(-shift_px, shift_px, 2)
    yy, xx = np.mgrid[:h, :w].astype(np.float64)
    cy, cx = (h - 1) / 2, (w - 1) / 2
    y, x = (yy - cy) / zoom, (xx - cx) / zoom
    sy = np.cos(angle) * y - np.sin(angle) * x + cy + dy
    sx = np.sin(angle) * y + np.cos(angle) * x + cx + dx
    field = smooth_field((h, w), rng, elastic_sigma_px, elastic_px)
    coords = np.stack([sy + field[0], sx + field[1]])
    cval = float(image.min()) if fill is None else fill
    return ndimage.map_coordinates(image.astype(np.float64), coords, order=3, mode="constant", cval=cval)


def add_blobs(image: np.ndarray, rng: np.random.Generator, count: tuple[int, int], radius_px: tuple[float, float],
              contrast: tuple[float, float], where: np.ndarray | None = None) -> np.ndarray:
    """Smooth elliptical structures of random size, orientation and signed contrast, centred inside
    `where` (anywhere without it): structure no shipped image holds."""
    from scipy import ndimage

    out = image.astype(np.float64).copy()
    h, w = image.shape
    points = np.argwhere(where) if where is not None and where.any() else None
    for _ in range(int(rng.integers(count[0], count[1] + 1))):
        cy, cx = points[rng.integers(len(points))] if points is not None else (rng.uniform(0, h), rng.uniform(0, w))
        ry, rx = rng.uniform(*radius_px, 2)
        theta = rng.uniform(0, np.pi)
        blob = np.zeros((h, w))
        window = _blob_window(cy, cx, max(ry, rx), h, w)
        yy, xx = np.mgrid[window]
        u = ((yy - cy) * np.cos(theta) + (xx - cx) * np.sin(theta)) / ry
        v = (-(yy - cy) * np.sin(theta) + (xx - cx) * np.cos(theta)) / rx
        blob[window] = ndimage.gaussian_filter(((u * u + v * v) <= 1.0).astype(np.float64), BLOB_SIGMA)
        out += rng.choice([-1.0, 1.0]) * rng.uniform(*contrast) * blob
    return out


BLOB_SIGMA = 1.5
# scipy's default truncation (4 sigma): how far the Gaussian reaches from the ellipse
_BLOB_REACH = int(4.0 * BLOB_SIGMA + 0.5)


def _blob_window(cy: float, cx: float, radius: float, h: int, w: int) -> tuple[slice, slice]:
    """The part of the image a blob's smoothed ellipse can touch, with a margin past the filter's reach.

    Filtering only this window gives the whole image's values bit for bit (each output is the same taps over
    the same inputs; a window edge inside the image reflects zeros, as the image there holds zeros) and zeros
    elsewhere, for a fraction of the CPU: each of an enhancement demo staging's dozens of small ellipses was
    smoothed over the whole 512x512 image (~0.7 CPU-s of a demo-ldct staging)."""
    margin = radius + 2 * _BLOB_REACH + 2
    rows = slice(max(0, int(np.floor(cy - margin))), min(h, int(np.ceil(cy + margin)) + 1))
    cols = slice(max(0, int(np.floor(cx - margin))), min(w, int(np.ceil(cx + margin)) + 1))
    return rows, cols


def jitter(image: np.ndarray, rng: np.random.Generator, amplitude_px: float, sigma_px: float) -> np.ndarray:
    """The image resampled (cubic) through a displacement of at most `amplitude_px` varying over `sigma_px`:
    fine detail moved by amounts no lower-resolution view of the image shows (edges held at the border)."""
    from scipy import ndimage

    field = smooth_field(image.shape, rng, sigma_px, amplitude_px)
    yy, xx = np.mgrid[:image.shape[0], :image.shape[1]].astype(np.float64)
    return ndimage.map_coordinates(image.astype(np.float64), [yy + field[0], xx + field[1]], order=3, mode="nearest")


def secret_variant(image: np.ndarray, seed: Any, *, fill: float | None = None, blobs: dict[str, Any] | None = None,
                   gain: float = 0.06, offset: float = 0.0, pivot: float = 0.0, jitter_px: float = 0.0,
                   jitter_sigma_px: float = 3.0, **warp_options: Any) -> np.ndarray:
    """A secret variant of a shipped image: warped, intensity-remapped about `pivot` (gain 1 ± `gain` and a
    smooth multiplicative shading: `pivot` itself, e.g. air at -1024 HU, stays put; then offset ± `offset`),
    with `add_blobs(**blobs)` added, then (`jitter_px` > 0) `jitter`ed for a demo whose input lacks the high
    band. `seed` is the staging's secret seed with the case's index (e.g. `[seed, index]`); the same seed
    gives the same variant."""
    from scipy import ndimage

    rng = np.random.default_rng(seed)
    out = warp(image, rng, fill=fill, **warp_options)
    shading = 1.0 + 0.5 * gain * np.tanh(ndimage.gaussian_filter(rng.standard_normal(out.shape), 60, mode="wrap")
                                         * 40.0)
    out = pivot + (out - pivot) * (1.0 + rng.uniform(-gain, gain)) * shading + rng.uniform(-offset, offset)
    if blobs:
        out = add_blobs(out, rng, **blobs)
    if jitter_px > 0:
        out = jitter(out, rng, jitter_px, jitter_sigma_px)
    return out
