"""`synthesis/demo-mrct` from a real brain template: nilearn's bundled MNI152 (skull-stripped T1, grey and white
matter, brain mask), offline, with a known tissue -> HU map and a head built around the brain.

Each case is the template moved by a random rigid-plus-scale transform and a smooth elastic warp, both drawn
from the staging's secret seed, then resampled onto the task's grid. Around the warped brain lie, by distance
from it, a CSF layer, the skull and the scalp, their thicknesses varying smoothly with the seed; beyond is air.
The MR input is the warped T1 inside the brain and a known T1-like value per outer tissue, with a seeded bias
field, gain and noise; the target CT applies the HU table below. The template ships inside the sandbox's
Python (nilearn), so it must not give the reference away: without the secret warp and shell thicknesses it
lies millimetres off every case: mapped through the same table it scores below the B band
(tests/test_synthesis_reference_reach.py).

| tissue | where | HU | T1-like MR (brain 95th percentile = 1) |
|---|---|---|---|
| brain | warped brain mask: CSF/GM/WM mixed by the GM and WM probabilities | 8 / 40 / 28 | the template's T1 |
| CSF layer | 0 to `csf` mm outside the brain | 8 | 0.15 |
| skull | then `skull` mm; e = abs(2u - 1), u = depth across it (0 to 1) | 700 + 900 e | 0.05 + 0.35 (1 - e) |
| scalp | then `scalp` mm | 30 | 0.85 |
| air | beyond | -1000 | 0 |
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from collections.abc import Iterator

import numpy as np

HU_AIR, HU_CSF, HU_GM, HU_WM = -1000.0, 8.0, 40.0, 28.0


@contextlib.contextmanager
def _scratch_nilearn_data() -> Iterator[None]:
    """NILEARN_DATA pointed at a throwaway folder while nilearn runs, so nothing lands under ~."""
    before = os.environ.get("NILEARN_DATA")
    with tempfile.TemporaryDirectory(prefix="amb-nilearn-") as scratch:
        os.environ["NILEARN_DATA"] = scratch
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("NILEARN_DATA", None)
            else:
                os.environ["NILEARN_DATA"] = before


@functools.lru_cache(maxsize=2)
def template_maps(resolution: int = 2) -> tuple[dict[str, np.ndarray], float]:
    """The MNI152 maps as float32 arrays on one grid ({t1, gm, wm, brain}) and their voxel size in mm."""
    with _scratch_nilearn_data():
        from nilearn.datasets import (
            load_mni152_brain_mask,
            load_mni152_gm_template,
            load_mni152_template,
            load_mni152_wm_template,
        )

        images = {"t1": load_mni152_template(resolution=resolution),
                  "gm": load_mni152_gm_template(resolution=resolution),
                  "wm": load_mni152_wm_template(resolution=resolution),
                  "brain": load_mni152_brain_mask(resolution=resolution)}
        maps = {name: np.asarray(image.get_fdata(), dtype=np.float32) for name, image in images.items()}
        voxel = float(abs(images["t1"].affine[0, 0]))
    shapes = {m.shape for m in maps.values()}
    if len(shapes) != 1:
        raise ValueError(f"MNI152 maps on different grids: {shapes}")
    return maps, voxel


def _rotation(angles: np.ndarray) -> np.ndarray:
    (cx, cy, cz), (sx, sy, sz) = np.cos(angles), np.sin(angles)
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rz @ ry @ rx


def warped_maps(shape: tuple[int, int, int], spacing: tuple[float, float, float], seed: int,
                resolution: int = 2, strength: float = 1.0) -> dict[str, np.ndarray]:
    """The template maps resampled onto `shape` x `spacing` (centred) through the seed's transform and warp.

    `strength` 0 gives the template as it is (centred, no warp): what an agent holding only the shipped
    template could place on the grid."""
    from scipy import ndimage

    maps, voxel = template_maps(resolution)
    rng = np.random.default_rng([seed, 11])
    grid = np.stack(np.meshgrid(*(np.arange(n) - (n - 1) / 2 for n in shape), indexing="ij"), axis=-1)
    mm = grid * np.asarray(spacing)
    rotate = _rotation(np.radians(rng.uniform(-8, 8, 3)) * strength)
    scale = 1.0 + rng.uniform(-0.08, 0.08, 3) * strength
    shift = rng.uniform(-5, 5, 3) * strength
    moved = (mm @ rotate.T) * scale + shift
    coarse = [max(2, round(n / 12)) for n in shape]  # a smooth field: random vectors on a coarse grid, zoomed
    for axis in range(3):
        field = rng.normal(0, 2.0 * strength, coarse)
        moved[..., axis] += _zoom_cubic(field, shape)
    centre = (np.asarray(maps["t1"].shape) - 1) / 2
    coords = [moved[..., axis] / voxel + centre[axis] for axis in range(3)]
    return {name: ndimage.map_coordinates(volume, coords, order=1, mode="constant", cval=0.0).astype(np.float32)
            for name, volume in maps.items()}


def _zoom_cubic(coarse: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`scipy.ndimage.zoom(coarse, shape / coarse.shape, order=3)`, one axis at a time: the spline zoom is the
    product of one 1D operator per axis (each the zoom of the unit vectors, a small matrix), so applying those
    in turn gives its values to ~1e-14 for a fraction of the CPU (a 3D zoom costs 64 taps per output voxel:
    0.25 CPU-s a field here, 27 fields a staging of the demo)."""
    from scipy import ndimage

    out = np.asarray(coarse, dtype=np.float64)
    for axis, n in enumerate(shape):
        c = coarse.shape[axis]
        operator = ndimage.zoom(np.eye(c), (n / c, 1.0), order=3)  # column j: the zoom of the j-th unit vector
        out = np.moveaxis(np.tensordot(operator, out, axes=([1], [axis])), 0, axis)
    return out


def _smooth_field(rng: np.random.Generator, shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
    """A slowly varying field in [low, high] (random values on a 4-point grid, zoomed cubically)."""
    coarse = rng.uniform(low, high, (4, 4, 4))
    return np.clip(_zoom_cubic(coarse, shape), low, high)[tuple(slice(n) for n in shape)]


def tissue_maps(maps: dict[str, np.ndarray], spacing: tuple[float, float, float],
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(CT in HU, T1-like MR scaled to the brain's 95th percentile, head mask) from warped maps, by the module's
    table; the shell thicknesses come from `rng`."""
    from scipy import ndimage

    shape = maps["t1"].shape
    brain = maps["brain"] > 0.5
    t1 = maps["t1"] / max(float(np.percentile(maps["t1"][brain], 95)), 1e-6) if brain.any() else maps["t1"]
    depth = ndimage.distance_transform_edt(~brain, sampling=spacing)
    csf = _smooth_field(rng, shape, 1.0, 3.0)
    skull = csf + _smooth_field(rng, shape, 4.0, 8.0)
    scalp = skull + _smooth_field(rng, shape, 4.0, 7.0)
    ct = np.full(shape, HU_AIR, dtype=np.float32)
    mr = np.zeros(shape, dtype=np.float32)
    layer = ~brain & (depth <= scalp)
    ct[layer], mr[layer] = 30.0, 0.85
    bone = ~brain & (depth <= skull)
    u = np.clip((depth - csf) / np.maximum(skull - csf, 1e-3), 0.0, 1.0)
    edge = np.abs(2 * u - 1)
    ct[bone], mr[bone] = (700.0 + 900.0 * edge)[bone], (0.05 + 0.35 * (1 - edge))[bone]
    fluid = ~brain & (depth <= csf)
    ct[fluid], mr[fluid] = HU_CSF, 0.15
    gm = np.clip(maps["gm"], 0, 1)
    wm = np.clip(maps["wm"], 0, 1 - gm)
    mix = HU_CSF * (1 - gm - wm) + HU_GM * gm + HU_WM * wm
    ct[brain], mr[brain] = mix[brain], t1[brain]
    return ct, mr, brain | (depth <= scalp)


def head_case(shape: tuple[int, int, int], spacing: tuple[float, float, float], seed: int,
              strength: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(CT in HU, MR in arbitrary units, body mask) of one case: the warped template with its head, the known
    HU map, and the T1-like MR with a bias field, a gain and noise."""
    from scipy import ndimage

    maps = warped_maps(shape, spacing, seed, strength=strength)
    rng = np.random.default_rng([seed, 12])
    ct, t1, head = tissue_maps(maps, spacing, rng)
    ct = ndimage.gaussian_filter(ct, 0.5) + np.where(head, rng.normal(0, 8.0, ct.shape), 0.0)
    grid = np.meshgrid(*(np.linspace(-1, 1, n) for n in shape), indexing="ij")
    tilt = rng.uniform(-0.12, 0.12, 3)
    bias = 1.0 + sum(k * g for k, g in zip(tilt, grid, strict=True))
    mr = ndimage.gaussian_filter(t1, 0.5) * bias * rng.uniform(600, 1400)
    mr = np.abs(mr + rng.normal(0, 0.01 * float(mr.max()), mr.shape))
    mask = ndimage.binary_dilation(head, iterations=3)
    return (np.clip(ct, -1024.0, 3071.0).astype(np.float32), mr.astype(np.float32), mask.astype(np.uint8))
