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
_BLOCK = 32  # planes' columns transposed at a time by `box_means` (measured: 8 and 64 slower on 128 x 128 planes)


def box_means(by_columns: np.ndarray, by_rows: np.ndarray) -> None:
    """scikit-image's box filter (scipy's `uniform_filter`: a running mean along plane axis 0, then along axis 1,
    reflected at the edges) of a stack of planes given transposed (`by_columns`, C-ordered, (k, n1, n0)), into
    `by_rows` ((k, n0, n1)); `by_columns` is overwritten.

    Each pass runs along contiguous memory: the first filters the transposed planes along their rows (the planes'
    columns), the result is transposed back in blocks for the second. Each line is the same numbers in the same
    order as scipy's, so the values are equal; the strided pass `uniform_filter` would run costs about three
    times a contiguous one, and one call filters the whole stack."""
    ndimage.uniform_filter1d(by_columns, WIN, axis=2, output=by_columns)  # along plane axis 0
    for start in range(0, by_rows.shape[2], _BLOCK):  # transposed in blocks: about half a whole copy's time
        stop = start + _BLOCK
        np.copyto(by_rows[:, :, start:stop], by_columns[:, start:stop, :].transpose(0, 2, 1))
    ndimage.uniform_filter1d(by_rows, WIN, axis=2, output=by_rows)  # along plane axis 1


def clipped_transposed(plane: np.ndarray, lo: float, hi: float, out: np.ndarray) -> np.ndarray:
    """`plane` as float64 clipped to [lo, hi] (scikit-image's order: convert, then clip), transposed into `out`."""
    np.copyto(out, plane.T, casting="unsafe")
    return np.clip(out, lo, hi, out=out)


class PlaneTerms:
    """The reference's share of one plane's SSIM: the clipped plane and its filtered terms."""

    __slots__ = ("index", "inside", "ref_t", "two_ux", "ux", "ux2", "vx")

    def __init__(self, index: int, plane: np.ndarray, lo: float, hi: float, mask: np.ndarray | None) -> None:
        self.index = index
        ref_t = np.empty((2, plane.shape[1], plane.shape[0]), dtype=np.float64)
        # the clipped plane, transposed: the layout the prediction's first pass uses
        self.ref_t = clipped_transposed(plane, lo, hi, ref_t[0]).copy()
        np.multiply(ref_t[0], ref_t[0], out=ref_t[1])
        ux, uxx = means = np.empty((2, *plane.shape), dtype=np.float64)
        box_means(ref_t, means)
        self.vx = COV_NORM * (uxx - ux * ux)  # grouped as scikit-image groups it, so the bits match
        self.ux, self.two_ux, self.ux2 = ux, 2 * ux, ux ** 2
        self.inside: np.ndarray | None = None
        if mask is not None:  # the mask voxels away from the border the SSIM map leaves out
            inside = np.zeros(plane.shape, dtype=bool)
            inside[PAD:-PAD, PAD:-PAD] = mask[PAD:-PAD, PAD:-PAD] > 0
            self.inside = inside

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.ref_t, self.ux, self.two_ux, self.ux2, self.vx)) + (
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
        work = _Work(self.shape[:2])
        for terms in self.kept if self.kept is not None else self._prepare():
            y_t = work.clipped(prediction[:, :, terms.index], self.lo, self.hi)
            if np.array_equal(y_t[0], terms.ref_t[0]) and np.array_equal(y_t, terms.ref_t):  # first row: a cheap no
                # scikit-image's value for a plane equal to the reference's, without the filtering: every term of
                # the map's numerator then equals its denominator's, bit for bit, so the map is 1.0 everywhere
                # (CT-SR: the slices the degradation kept, which any interpolation passes through)
                full.append(1.0)
                masked.append(1.0)
                continue
            work.moments(terms.ref_t)
            smap = self._map(terms, work)
            value = float(smap[PAD:-PAD, PAD:-PAD].mean(dtype=np.float64))
            full.append(value)
            if terms.inside is not None:
                masked.append(float(smap[terms.inside].mean()) if terms.inside.any() else value)
        whole = float(np.mean(full))
        return {"ssim": float(np.mean(masked)) if self.mask is not None else whole, "ssim_full_plane": whole}

    def _map(self, t: PlaneTerms, work: _Work) -> np.ndarray:
        """The SSIM map from the prediction's box means (`_Work.moments`): scikit-image's formula and grouping, the
        reference's terms from `t`, computed in the work buffers (the map is the first one's)."""
        uy, uyy, uxy = work.by_rows
        uy2, ux_uy = work.spare
        np.multiply(uy, uy, out=uy2)  # the same value as uy ** 2
        vy = np.subtract(uyy, uy2, out=uyy)  # vy = cov_norm * (uyy - uy * uy)
        vy *= COV_NORM
        vxy = np.subtract(uxy, np.multiply(t.ux, uy, out=ux_uy), out=uxy)  # vxy = cov_norm * (uxy - ux * uy)
        vxy *= COV_NORM
        a1 = np.multiply(t.two_ux, uy, out=uy)  # A1 = 2 * ux * uy + C1
        a1 += self.c1
        a2 = np.multiply(vxy, 2, out=vxy)  # A2 = 2 * vxy + C2
        a2 += self.c2
        b1 = np.add(t.ux2, uy2, out=uy2)  # B1 = ux ** 2 + uy ** 2 + C1
        b1 += self.c1
        b2 = np.add(t.vx, vy, out=vy)  # B2 = vx + vy + C2
        b2 += self.c2
        a1 *= a2  # A1 * A2
        b1 *= b2  # D = B1 * B2
        a1 /= b1
        return a1


class _Work:
    """One prediction's buffers, reused plane after plane: its clipped plane and moment images (y, y*y, ref*y)
    stacked transposed for `box_means`, their means, and the map's intermediate terms."""

    __slots__ = ("by_columns", "by_rows", "spare")

    def __init__(self, plane: tuple[int, ...]) -> None:
        self.by_columns = np.empty((3, plane[1], plane[0]), dtype=np.float64)  # transposed planes
        self.by_rows = np.empty((3, *plane), dtype=np.float64)
        self.spare = np.empty((2, *plane), dtype=np.float64)  # the map's intermediate terms

    def clipped(self, plane: np.ndarray, lo: float, hi: float) -> np.ndarray:
        """The prediction's plane, clipped and transposed (`clipped_transposed`) into the first buffer."""
        return clipped_transposed(plane, lo, hi, self.by_columns[0])

    def moments(self, ref_t: np.ndarray) -> None:
        """The box means of y, y*y and ref*y (into `by_rows`) for the plane `clipped` last (`ref_t`: the reference's
        plane transposed)."""
        y_t = self.by_columns[0]
        np.multiply(y_t, y_t, out=self.by_columns[1])
        np.multiply(ref_t, y_t, out=self.by_columns[2])
        box_means(self.by_columns, self.by_rows)
