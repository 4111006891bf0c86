"""The release's `z_axis_x4_trilinear` degradation, as this plugin fixes it (the release's code is unknown).

Keep every `scale`-th axial slice (array axis 2) starting at slice 0 (no anti-aliasing, no averaging),
then interpolate linearly along z back onto the original grid; slices after the last kept one hold its
value. x and y are untouched, so the result is on the same grid as the reference and a linear
interpolation of the kept slices gives it back exactly.
"""

from __future__ import annotations

import numpy as np


def kept_slices(depth: int, scale: int) -> np.ndarray:
    """Indices of the slices the degradation keeps: 0, scale, 2*scale, ..."""
    return np.arange(0, depth, scale)


def z_linear(volume: np.ndarray, scale: int) -> np.ndarray:
    """Decimate along axis 2 by `scale` (phase 0) and interpolate linearly back; float32."""
    vol = np.asarray(volume, dtype=np.float32)
    keep = kept_slices(vol.shape[2], scale)
    if keep.size == 1:
        return np.repeat(vol[:, :, :1], vol.shape[2], axis=2)
    z = np.arange(vol.shape[2], dtype=np.float64)
    below = np.clip(np.searchsorted(keep, z, side="right") - 1, 0, keep.size - 2)
    lo, hi = keep[below], keep[below + 1]
    t = np.clip((z - lo) / (hi - lo), 0.0, 1.0).astype(np.float32)
    return vol[:, :, lo] * (1 - t) + vol[:, :, hi] * t


def z_nearest(volume: np.ndarray, scale: int) -> np.ndarray:
    """The nearest kept slice for every slice (the blocky inverse of the same decimation)."""
    vol = np.asarray(volume, dtype=np.float32)
    keep = kept_slices(vol.shape[2], scale)
    z = np.arange(vol.shape[2])
    nearest = keep[np.clip(np.rint(z / scale).astype(int), 0, keep.size - 1)]
    return vol[:, :, nearest]


def z_cubic(volume: np.ndarray, scale: int) -> np.ndarray:
    """A natural cubic spline through the kept slices along z (edge slices held past the last one)."""
    from scipy.interpolate import CubicSpline

    vol = np.asarray(volume, dtype=np.float32)
    keep = kept_slices(vol.shape[2], scale)
    if keep.size < 3:
        return z_linear(vol, scale)
    spline = CubicSpline(keep, vol[:, :, keep], axis=2, bc_type="natural")
    z = np.minimum(np.arange(vol.shape[2]), keep[-1])
    return spline(z).astype(np.float32)
