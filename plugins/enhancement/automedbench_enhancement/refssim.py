"""SSIM against a fixed reference with the reference's half of the work done once, bit for bit the metric's SSIM.

A warm evaluator scores the same staged references run after run: of an SSIM's five Gaussian-filtered
moment images, the reference's two (mean, mean of squares) and the whole identity-baseline SSIM (reference
against the case's own input) do not depend on the submission. They are kept in this process's memory only
(never on disk, nothing an agent can write), looked up by the reference file's path and the window, and
used only after the cached reference and input compare equal, element for element, to the arrays just read:
a restaged or altered file is recomputed, never served stale. The arithmetic is the same sequence of
operations as scikit-image's `structural_similarity` with the metric's settings, so the values are identical
to `metric.ssim` (tests/test_enhancement_metric.py checks equality, not closeness).
"""

from __future__ import annotations

import collections

import numpy as np
from scipy import ndimage

SIGMA = 1.5
TRUNCATE = 3.5  # scikit-image's Gaussian SSIM window: radius int(3.5 * 1.5 + 0.5) = 5, an 11-pixel window
PAD = 5  # the border SSIM leaves out (the window's radius)
K1, K2 = 0.01, 0.03
MAX_ENTRIES = 64  # references kept (demo: 6 cases x 2 windows; each entry ~4 reference-sized float64 images)


def windowed(image: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """An image as the metric scores it: rounded to float32 as the original reads every array (so a float64
    output within float32 rounding of the reference is the reference, 99 dB, not 170), then float64 clipped
    to the window [lo, hi]."""
    return np.clip(np.asarray(image, dtype=np.float32).astype(np.float64), lo, hi)


def _blur(image: np.ndarray) -> np.ndarray:
    return ndimage.gaussian_filter(image, sigma=SIGMA, mode="reflect", truncate=TRUNCATE)


class ReferenceSSIM:
    """SSIM of any prediction against one reference on the fixed window [lo, hi] (data range hi - lo)."""

    def __init__(self, reference: np.ndarray, lo: float, hi: float) -> None:
        self.source = np.array(reference, copy=True)  # the array as read: what a later lookup must equal
        self.lo, self.hi = lo, hi
        self.ref = windowed(reference, lo, hi)
        if min(self.ref.shape, default=0) < 2 * PAD + 1:
            raise ValueError(f"an image of shape {self.ref.shape} is smaller than the SSIM window")
        ux = _blur(self.ref)
        # the reference's terms, each computed exactly as in the full formula (the grouping kept, so the bits are)
        self.two_ux = 2 * ux
        self.ux2 = ux ** 2
        self.vx = 1.0 * (_blur(self.ref * self.ref) - ux * ux)
        self.ux = ux
        self.identity: tuple[np.ndarray, float] | None = None  # (the input it was computed from, its SSIM)

    def __call__(self, prediction: np.ndarray) -> float:
        if np.shape(prediction) != self.ref.shape:
            raise ValueError(f"shape {np.shape(prediction)} is not the reference's {self.ref.shape}")
        y = windowed(prediction, self.lo, self.hi)
        span = self.hi - self.lo
        c1, c2 = (K1 * span) ** 2, (K2 * span) ** 2
        uy = _blur(y)
        uy2 = uy * uy  # the same value as uy ** 2
        vy = _blur(y * y)
        vy -= uy2  # uyy - uy * uy
        vxy = _blur(self.ref * y)
        vxy -= self.ux * uy  # uxy - ux * uy; then 2 * vxy + c2:
        vxy *= 2
        vxy += c2
        a1 = self.two_ux * uy  # 2 * ux * uy + c1
        a1 += c1
        a1 *= vxy  # A1 * A2
        b1 = np.add(self.ux2, uy2, out=uy2)  # ux ** 2 + uy ** 2 + c1
        b1 += c1
        b2 = np.add(self.vx, vy, out=vy)  # vx + vy + c2
        b2 += c2
        b1 *= b2  # B1 * B2
        a1 /= b1
        return float(a1[(slice(PAD, -PAD),) * a1.ndim].mean(dtype=np.float64))

    def of_identity(self, identity: np.ndarray) -> float:
        """The SSIM of the case's identity baseline, computed once per (reference, input) pair."""
        if self.identity is None or not _same(self.identity[0], identity):
            self.identity = (np.array(identity, copy=True), self(identity))
        return self.identity[1]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


_CACHE: collections.OrderedDict[tuple[str, float, float], ReferenceSSIM] = collections.OrderedDict()


def for_reference(key: str, reference: np.ndarray, lo: float, hi: float) -> ReferenceSSIM:
    """The cached ReferenceSSIM of `reference` (named by `key`, e.g. its file path) on [lo, hi], built anew when
    none is cached or the cached one's reference differs from this array in any element."""
    slot = (key, float(lo), float(hi))
    found = _CACHE.get(slot)
    if found is None or not _same(found.source, reference):
        found = ReferenceSSIM(reference, lo, hi)
        _CACHE[slot] = found
    _CACHE.move_to_end(slot)
    while len(_CACHE) > MAX_ENTRIES:
        _CACHE.popitem(last=False)
    return found
