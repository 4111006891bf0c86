"""Axial SSIM against one reference volume, bit for bit scikit-image's `structural_similarity` per plane.

The metric's SSIM (7x7 uniform window, sample covariance, K1 0.01, K2 0.03, a fixed data range, the 3-voxel
border cropped) is computed plane by plane with the same operations in the same order as scikit-image, so the
values are equal, not close (tests compare with `==`). What does not depend on the submission -- the clipped
reference, its filtered mean and variance terms, the planes scored and their masks -- is prepared once per
reference: a warm evaluator keeps it between evaluations (`refcache`) and then filters only the prediction's
three moment images per plane instead of five. A reference too large to keep is prepared plane by plane as it
is scored (memory bounded by one plane), never as whole-volume float64 copies.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from scipy import ndimage

WIN = 7
PAD = (WIN - 1) // 2
K1, K2 = 0.01, 0.03
COV_NORM = WIN * WIN / (WIN * WIN - 1.0)  # scikit-image's sample covariance: NP / (NP - 1)
MIN_MASK = 16  # a masked plane with fewer mask voxels is not scored


def _box(image: np.ndarray) -> np.ndarray:
    return ndimage.uniform_filter(image, size=WIN)


class PlaneTerms:
    """The reference's share of one plane's SSIM: the clipped plane and its filtered terms."""

    __slots__ = ("index", "inside", "ref", "two_ux", "ux", "ux2", "vx")

    def __init__(self, index: int, plane: np.ndarray, lo: float, hi: float, mask: np.ndarray | None) -> None:
        self.index = index
        self.ref = np.clip(np.asarray(plane, dtype=np.float64), lo, hi)
        ux = _box(self.ref)
        uxx = _box(self.ref * self.ref)
        self.vx = COV_NORM * (uxx - ux * ux)  # grouped as scikit-image groups it, so the bits match
        self.ux, self.two_ux, self.ux2 = ux, 2 * ux, ux ** 2
        self.inside: np.ndarray | None = None
        if mask is not None:  # the mask voxels away from the border the SSIM map leaves out
            inside = np.zeros(plane.shape, dtype=bool)
            inside[PAD:-PAD, PAD:-PAD] = mask[PAD:-PAD, PAD:-PAD] > 0
            self.inside = inside

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.ref, self.ux, self.two_ux, self.ux2, self.vx)) + (
            self.inside.nbytes if self.inside is not None else 0)


class AxialSSIM:
    """SSIM of predictions against one reference over its axial planes (array axis 2), on [lo, hi].

    `keep=True` prepares every scored plane's terms now and keeps them (what a warm cache holds);
    `keep=False` prepares each plane's terms while scoring and drops them (one-off use, large volumes)."""

    def __init__(self, reference: np.ndarray, mask: np.ndarray | None, lo: float, hi: float,
                 keep: bool = False) -> None:
        self.reference, self.mask, self.lo, self.hi = reference, mask, float(lo), float(hi)
        self.shape = tuple(reference.shape)
        span = self.hi - self.lo
        self.c1, self.c2 = (K1 * span) ** 2, (K2 * span) ** 2
        self.planes = self._planes()
        self.kept: list[PlaneTerms] | None = list(self._prepare()) if keep else None

    def _planes(self) -> list[int]:
        if len(self.shape) != 3 or min(self.shape[0], self.shape[1]) < WIN:
            return []
        if self.mask is None:
            return list(range(self.shape[2]))
        counts = np.count_nonzero(self.mask.reshape(-1, self.shape[2]), axis=0)
        return [int(k) for k in np.flatnonzero(counts >= MIN_MASK)]

    def _prepare(self) -> Iterator[PlaneTerms]:
        for k in self.planes:
            mask = self.mask[:, :, k] if self.mask is not None else None
            yield PlaneTerms(k, self.reference[:, :, k], self.lo, self.hi, mask)

    def nbytes(self) -> int:
        return sum(t.nbytes() for t in self.kept or [])

    def __call__(self, prediction: np.ndarray) -> dict[str, float | None]:
        """{'ssim': mean over the scored planes (inside the mask when there is one), 'ssim_full_plane'}."""
        if tuple(np.shape(prediction)) != self.shape:
            raise ValueError(f"shape {np.shape(prediction)} is not the reference's {self.shape}")
        if not self.planes:
            return {"ssim": None, "ssim_full_plane": None}
        full, masked = [], []
        for terms in self.kept if self.kept is not None else self._prepare():
            y = np.clip(np.asarray(prediction[:, :, terms.index], dtype=np.float64), self.lo, self.hi)
            if np.array_equal(y, terms.ref):
                # scikit-image's value for a plane equal to the reference's, without the filtering: every term of
                # the map's numerator then equals its denominator's, bit for bit, so the map is 1.0 everywhere
                # (CT-SR: the slices the degradation kept, which any interpolation passes through)
                full.append(1.0)
                masked.append(1.0)
                continue
            smap = self._map(terms, y)
            value = float(smap[PAD:-PAD, PAD:-PAD].mean(dtype=np.float64))
            full.append(value)
            if terms.inside is not None:
                masked.append(float(smap[terms.inside].mean()) if terms.inside.any() else value)
        whole = float(np.mean(full))
        return {"ssim": float(np.mean(masked)) if self.mask is not None else whole, "ssim_full_plane": whole}

    def _map(self, t: PlaneTerms, y: np.ndarray) -> np.ndarray:
        """The SSIM map of one clipped float64 plane `y`: scikit-image's formula, the reference's terms from `t`."""
        uy = _box(y)
        uyy = _box(y * y)
        uxy = _box(t.ref * y)
        uy2 = uy * uy  # the same value as uy ** 2
        vy = COV_NORM * (uyy - uy2)
        vxy = COV_NORM * (uxy - t.ux * uy)
        a1 = t.two_ux * uy  # 2 * ux * uy + C1
        a1 += self.c1
        a2 = 2 * vxy  # 2 * vxy + C2
        a2 += self.c2
        b1 = np.add(t.ux2, uy2, out=uy2)  # ux ** 2 + uy ** 2 + C1
        b1 += self.c1
        b2 = np.add(t.vx, vy, out=vy)  # vx + vy + C2
        b2 += self.c2
        a1 *= a2  # A1 * A2
        b1 *= b2  # D = B1 * B2
        a1 /= b1
        return a1
