"""Bootstrap confidence intervals, vectorised over metrics (NaN = not scored, left out per metric)."""

from __future__ import annotations

import zlib

import numpy as np

CHUNK = 4_000_000  # resample cells (rows × runs) held in memory at once


def group_seed(seed: int, key: tuple[str, ...]) -> int:
    """A seed per group that does not depend on the order groups are visited in."""
    return (seed * 1_000_003 + zlib.crc32("\x1f".join(key).encode())) % (2**32)


def bootstrap_means(values: np.ndarray, *, resamples: int = 2000, seed: int = 0,
                    level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean, CI low, CI high and count per column of `values` (runs × metrics), percentile bootstrap.

    Each column ignores its NaNs; a column with no values gives NaN everywhere and count 0.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    n, m = values.shape
    present = ~np.isnan(values)
    counts = present.sum(axis=0)
    filled = np.where(present, values, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = filled.sum(axis=0) / counts
    lo = np.full(m, np.nan)
    hi = np.full(m, np.nan)
    if n == 0:
        return mean, lo, hi, counts
    rng = np.random.default_rng(seed)
    sums = np.empty((resamples, m))
    cnts = np.full((resamples, m), float(n))
    gaps = [j for j in range(m) if counts[j] < n]  # only columns with nulls need per-resample counts
    # Resample indices in chunks (memory stays at CHUNK cells whatever n is) and reduce column by
    # column with `take`: 10 000 runs × 2000 resamples take well under a second per column.
    rows = max(1, min(resamples, CHUNK // max(n, 1)))
    for start in range(0, resamples, rows):
        c = min(rows, resamples - start)
        index = rng.integers(0, n, size=(c, n), dtype=np.int32 if n < 2**31 else np.int64)
        for j in range(m):
            sums[start:start + c, j] = filled[:, j].take(index).sum(axis=1)
        for j in gaps:
            cnts[start:start + c, j] = present[:, j].take(index).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / cnts
    alpha = (1.0 - level) / 2.0
    for j in range(m):
        if counts[j] == 0:
            continue
        col = means[:, j]
        col = col[~np.isnan(col)]
        lo[j], hi[j] = np.quantile(col, [alpha, 1.0 - alpha])
    return mean, lo, hi, counts
