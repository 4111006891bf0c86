"""Generated CT-like volumes in HU (abdomen, for CT-SR), from a seed, in a second or two.

Abdomen: a body outline with a fat layer, a liver with texture, kidneys, a spine of vertebrae and
discs that alternate every few slices, contrast-filled vessels running obliquely (their cross-sections
move in-plane from slice to slice), bowel gas and small nodules; correlated noise of ~12 HU in the
body. The oblique vessels and the vertebra/disc alternation are what a x4 z-decimation loses and a plain
linear re-interpolation smears, so the demo separates a method from an input copy.
The MRI -> CT demo's heads are built on the MNI152 template instead (`data.mni`).
"""

from __future__ import annotations

import numpy as np


def _grid(shape: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, y, z = (np.arange(n, dtype=np.float32) for n in shape)
    return x[:, None, None], y[None, :, None], z[None, None, :]


def _noise(rng: np.random.Generator, shape: tuple[int, ...], sigma: float, smooth: float) -> np.ndarray:
    from scipy import ndimage

    field = ndimage.gaussian_filter(rng.standard_normal(shape).astype(np.float32), smooth)
    return (sigma * field / (field.std() or 1.0)).astype(np.float32)


def abdomen(shape: tuple[int, int, int], seed: int) -> np.ndarray:
    """One abdomen-like CT volume in HU (float32, array axes x, y, z with z axial)."""
    rng = np.random.default_rng(seed)
    nx, ny, nz = shape
    x, y, z = _grid(shape)
    cx, cy = nx / 2 + rng.uniform(-3, 3), ny / 2 + rng.uniform(-3, 3)
    zt = z / max(nz - 1, 1)
    ax = nx * (0.44 + 0.03 * np.sin(2 * np.pi * zt + rng.uniform(0, 6)))
    ay = ny * (0.34 + 0.02 * np.cos(2 * np.pi * zt + rng.uniform(0, 6)))
    r_body = ((x - cx) / ax) ** 2 + ((y - cy) / ay) ** 2
    ct = np.full(shape, -1000.0, dtype=np.float32)
    ct[np.broadcast_to(r_body < 1.0, shape)] = -100.0  # subcutaneous fat
    inner = r_body < 0.80
    ct[np.broadcast_to(inner, shape)] = 35.0  # muscle / soft tissue
    tex = _noise(rng, shape, 8.0, 1.5)
    # liver: a large ellipsoid on one side, with texture
    lx, ly, lz = cx - nx * 0.14, cy - ny * 0.04, nz * rng.uniform(0.35, 0.5)
    liver = (((x - lx) / (nx * 0.2)) ** 2 + ((y - ly) / (ny * 0.16)) ** 2 + ((z - lz) / (nz * 0.45)) ** 2) < 1
    ct = np.where(liver & inner, 62.0 + 1.5 * tex, ct)
    # kidneys: cortex brighter than medulla
    for side in (-1, 1):
        kx, ky, kz = cx + side * nx * 0.2, cy + ny * 0.12, nz * rng.uniform(0.45, 0.6)
        r = ((x - kx) / (nx * 0.07)) ** 2 + ((y - ky) / (ny * 0.06)) ** 2 + ((z - kz) / (nz * 0.2)) ** 2
        ct = np.where(r < 1, 150.0, ct)
        ct = np.where(r < 0.45, 30.0, ct)
    # spine: vertebral bodies and discs alternating along z (period 7-10 slices), posterior to the body centre
    period, phase = rng.uniform(7, 10), rng.uniform(0, 10)
    sx, sy = cx + rng.uniform(-2, 2), cy + ny * 0.2
    round_ = ((x - sx) / (nx * 0.06)) ** 2 + ((y - sy) / (ny * 0.06)) ** 2 < 1
    disc = (((z + phase) % period) < 0.3 * period)
    ct = np.where(round_ & ~disc, 650.0 + 0.5 * tex, ct)
    ct = np.where(round_ & disc, 90.0, ct)
    cortical = round_ & ~disc & (((x - sx) / (nx * 0.06)) ** 2 + ((y - sy) / (ny * 0.06)) ** 2 > 0.7)
    ct = np.where(cortical, 1100.0, ct)
    # oblique tubes: contrast-filled vessels and gas-filled bowel loops whose centres move in-plane with z
    for _ in range(int(rng.integers(20, 28))):
        vx0, vy0 = cx + rng.uniform(-0.6, 0.6) * nx * 0.3, cy + rng.uniform(-0.6, 0.4) * ny * 0.25
        dx, dy = rng.uniform(-2.2, 2.2), rng.uniform(-2.2, 2.2)
        wob, period = rng.uniform(2, 8), rng.uniform(6, 14)
        radius = rng.uniform(2.0, 4.5)
        vx = vx0 + dx * (z - nz / 2) * 0.5 + wob * np.sin(z / period)
        vy = vy0 + dy * (z - nz / 2) * 0.5 + wob * np.cos(z / period)
        value = -900.0 if rng.uniform() < 0.35 else rng.uniform(180, 320)
        ct = np.where(((x - vx) ** 2 + (y - vy) ** 2 < radius ** 2) & inner, value, ct)
    # bowel gas and nodules: small blobs, some shorter than the decimation step
    for _ in range(int(rng.integers(8, 14))):
        bx, by, bz = cx + rng.uniform(-0.5, 0.5) * nx * 0.5, cy + rng.uniform(-0.5, 0.3) * ny * 0.4, rng.uniform(0, nz)
        rxy, rz = rng.uniform(2.5, 6), rng.uniform(1.5, 5)
        blob = ((x - bx) ** 2 + (y - by) ** 2) / rxy ** 2 + ((z - bz) / rz) ** 2 < 1
        ct = np.where(blob & inner, -950.0 if rng.uniform() < 0.5 else rng.uniform(80, 250), ct)
    from scipy import ndimage

    ct = ndimage.gaussian_filter(ct, (0.6, 0.6, 0.5))  # partial volume
    body = np.broadcast_to(r_body < 1.0, shape)
    ct = ct + np.where(body, _noise(rng, shape, 12.0, 0.7), _noise(rng, shape, 3.0, 0.7))
    return np.clip(ct, -1024.0, 3071.0).astype(np.float32)
