"""`refguard.add_blobs` filters each blob over a window around it, not the whole image: the demo references it
helps make (enhancement's) must stay the same values, so the window's result is checked against the whole-image
computation, blobs at the edges and corners included."""

from __future__ import annotations

import numpy as np
import pytest
from automedbench import refguard
from scipy import ndimage


def whole_image_blobs(image, rng, count, radius_px, contrast, where=None):
    """The blobs as the whole-image computation makes them: each ellipse drawn and smoothed over the full image."""
    out = image.astype(np.float64).copy()
    h, w = image.shape
    points = np.argwhere(where) if where is not None and where.any() else None
    yy, xx = np.mgrid[:h, :w]
    for _ in range(int(rng.integers(count[0], count[1] + 1))):
        cy, cx = points[rng.integers(len(points))] if points is not None else (rng.uniform(0, h), rng.uniform(0, w))
        ry, rx = rng.uniform(*radius_px, 2)
        theta = rng.uniform(0, np.pi)
        u = ((yy - cy) * np.cos(theta) + (xx - cx) * np.sin(theta)) / ry
        v = (-(yy - cy) * np.sin(theta) + (xx - cx) * np.cos(theta)) / rx
        blob = ndimage.gaussian_filter(((u * u + v * v) <= 1.0).astype(np.float64), 1.5)
        out += rng.choice([-1.0, 1.0]) * rng.uniform(*contrast) * blob
    return out


@pytest.mark.parametrize("shape", [(96, 128), (40, 33), (150, 170)])
def test_windowed_blobs_equal_the_whole_image_computation(shape):
    edges = np.zeros(shape, dtype=bool)
    edges[:3, :], edges[-2:, :], edges[:, :2], edges[:, -3:] = True, True, True, True  # centres on the border
    for seed in range(12):
        image = np.random.default_rng(seed).normal(0, 50, shape)
        for where in (None, edges, np.ones(shape, dtype=bool)):
            options = {"count": (4, 8), "radius_px": (2.0, 22.0), "contrast": (40.0, 120.0), "where": where}
            got = refguard.add_blobs(image, np.random.default_rng([seed, 1]), **options)
            want = whole_image_blobs(image, np.random.default_rng([seed, 1]), **options)
            assert np.array_equal(got, want), (shape, seed, float(np.abs(got - want).max()))
            assert not np.array_equal(got, image)  # blobs were added


def test_the_secret_variant_is_unchanged_for_a_seed():
    """A whole variant (warp, shading, blobs) against the same steps with whole-image blobs."""
    image = np.random.default_rng(3).normal(0, 100, (128, 160))
    blobs = {"count": (4, 8), "radius_px": (5.0, 22.0), "contrast": (40.0, 120.0)}
    got = refguard.secret_variant(image, [7, 1], blobs=blobs)
    rng = np.random.default_rng([7, 1])
    out = refguard.warp(image, rng)
    shading = 1.0 + 0.5 * 0.06 * np.tanh(ndimage.gaussian_filter(rng.standard_normal(out.shape), 60, mode="wrap")
                                         * 40.0)
    out = out * (1.0 + rng.uniform(-0.06, 0.06)) * shading + rng.uniform(-0.0, 0.0)
    assert np.array_equal(got, whole_image_blobs(out, rng, **blobs))
