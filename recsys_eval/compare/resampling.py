"""Resampling: sign-flip (paired permutation) null distributions, the bootstrap means of the paired
tests' relative difference, and bootstrap intervals from a bootstrap distribution. (The summary's
bootstrap distribution, which must merge across Spark partitions, is drawn by
recsys_eval.compare.bootstrap; the paired tests run on one machine and draw here, one matrix product
per chunk of resamples: docs/CONVENTIONS.md#effect-sizes.)

Users, the unit the summaries average over, are resampled jointly across the columns of a users x
columns matrix, so one set of draws serves every system, metric and cutoff measured on those users.
Sign flips and these bootstrap draws come from a numpy ``Generator``; the same generator state gives
the same result.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import numpy as np
from scipy.special import ndtr, ndtri


#: Random draws held in memory at once (int32 indices or float64 signs per chunk of resamples).
CHUNK_ELEMENTS = 4_000_000
#: Relative tolerance below which a resampled statistic counts as equal to the observed one
#: (the same guard against round-off as ``scipy.stats.permutation_test``).
TIE_TOLERANCE = 1e-14


#: Draws kept by :func:`kept_draw` for the last few generator states drawn from (each at most
#: ``CHUNK_ELEMENTS`` float64: 32 MB).
_KEPT_DRAWS = 8
_kept: OrderedDict[tuple, tuple[np.ndarray, dict]] = OrderedDict()
_kept_lock = threading.Lock()


def kept_draw(rng: np.random.Generator, kind: str, shape: tuple[int, int],
              draw: Callable[[np.random.Generator], np.ndarray]) -> np.ndarray:
    """``draw(rng)`` (a read-only array of ``kind`` and ``shape``), or the same array kept from
    an earlier call from the same generator state, the generator then moved on to where drawing
    would leave it.

    The analysis tests every metric of a (fold, protocol) from generators seeded alike, so the
    same draws recur once per metric: a kept draw skips drawing and converting them again."""
    key = (kind, repr(rng.bit_generator.state), shape)
    with _kept_lock:
        kept = _kept.get(key)
        if kept is not None:
            _kept.move_to_end(key)
    if kept is not None:
        rng.bit_generator.state = kept[1]
        return kept[0]
    drawn = draw(rng)
    drawn.flags.writeable = False
    with _kept_lock:
        _kept[key] = (drawn, rng.bit_generator.state)
        if len(_kept) > _KEPT_DRAWS:
            _kept.popitem(last=False)
    return drawn


def resample_counts(rng: np.random.Generator, n_resamples: int, n: int) -> np.ndarray:
    """How often each of ``n`` rows is drawn in each of ``n_resamples`` resamples of n draws with
    replacement (float64 counts, resamples x n, ready for a matrix product): the draws of
    ``rng.integers(0, n, (n_resamples, n))``, counted per resample (:func:`kept_draw`)."""

    def draw(rng: np.random.Generator) -> np.ndarray:
        indices = rng.integers(0, n, (n_resamples, n), dtype=np.int32).astype(np.int64)
        indices += (np.arange(n_resamples, dtype=np.int64) * n)[:, None]
        return np.bincount(indices.ravel(), minlength=n_resamples * n).astype(np.float64).reshape(n_resamples, n)

    return kept_draw(rng, "counts", (n_resamples, n), draw)


def sign_flips(rng: np.random.Generator, n_resamples: int, n: int) -> np.ndarray:
    """``n_resamples`` x ``n`` random signs (float64 +-1), each +1 with probability 1/2: the bits
    of ``rng.integers(0, 256, (n_resamples, ceil(n / 8)), dtype=uint8)``, unpacked
    (:func:`kept_draw`)."""

    def draw(rng: np.random.Generator) -> np.ndarray:
        packed = rng.integers(0, 256, (n_resamples, (n + 7) // 8), dtype=np.uint8)
        signs = np.unpackbits(packed, axis=1, count=n).astype(np.float64)
        signs *= 2.0
        signs -= 1.0
        return signs

    return kept_draw(rng, "signs", (n_resamples, n), draw)


def bootstrap_means(values: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of ``n_resamples`` bootstrap resamples of the rows of ``values`` (n x c, no NaN).

    Each resample draws n rows with replacement, shared by all columns: its means are
    ``counts @ values / n``, one matrix product per chunk of resamples (:func:`resample_counts`).
    Returns (n_resamples, c).
    """
    values = np.ascontiguousarray(values, dtype=np.float64)
    n = values.shape[0]
    out = np.empty((n_resamples, values.shape[1]))
    rows_per_chunk = max(1, CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, n_resamples, rows_per_chunk):
        stop = min(start + rows_per_chunk, n_resamples)
        out[start:stop] = resample_counts(rng, stop - start, n) @ values
    return out / n


def sign_flip_means(diffs: np.ndarray, n_resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """Null distribution of the mean paired difference under random sign flips (pair swaps).

    ``diffs`` is n x c (no NaN); each resample flips the sign of every row with probability 1/2, the
    same flips for all columns. When 2**n <= n_resamples all 2**n sign vectors are enumerated instead
    (an exact test). Returns (null of shape (resamples, c), exact).
    """
    diffs = np.ascontiguousarray(diffs, dtype=np.float64)
    n = diffs.shape[0]
    if n < 31 and 2**n <= n_resamples:
        patterns = np.arange(2**n)[:, None] >> np.arange(n)[None, :]
        signs = (patterns & 1) * 2.0 - 1.0
        return signs @ diffs / n, True
    out = np.empty((n_resamples, diffs.shape[1]))
    rows_per_chunk = max(1, CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, n_resamples, rows_per_chunk):
        stop = min(start + rows_per_chunk, n_resamples)
        out[start:stop] = sign_flips(rng, stop - start, n) @ diffs
    return out / n, False


def permutation_pvalues(null: np.ndarray, observed: np.ndarray, alternative: str, exact: bool) -> np.ndarray:
    """p-values of ``observed`` (c,) against its null distribution (resamples x c).

    A random (not exact) null counts the observed statistic as one of the resamples, (count + 1) /
    (resamples + 1), so p is never 0; two-sided p = min(1, 2 * min(p_less, p_greater)).
    """
    adjustment = 0 if exact else 1
    size = null.shape[0] + adjustment
    gamma = np.abs(observed) * TIE_TOLERANCE
    p_less = ((null <= observed + gamma).sum(axis=0) + adjustment) / size
    p_greater = ((null >= observed - gamma).sum(axis=0) + adjustment) / size
    if alternative == "less":
        return p_less
    if alternative == "greater":
        return p_greater
    return np.minimum(1.0, 2.0 * np.minimum(p_less, p_greater))


def acceleration(square_sums: np.ndarray, cube_sums: np.ndarray) -> np.ndarray:
    """BCa acceleration of the mean per column from the closed-form jackknife, given the sums of
    u^2 and u^3 over its values, u = x - mean(x): a = sum(u^3) / (6 sum(u^2)^1.5)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return cube_sums / (6.0 * square_sums**1.5)


def bootstrap_interval(
    distribution: np.ndarray,
    estimate: np.ndarray,
    *,
    level: float,
    method: str,
    acceleration: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided interval per column from a bootstrap distribution (resamples x c).

    ``percentile``: the alpha/2 and 1-alpha/2 quantiles; ``basic``: 2*estimate minus those;
    ``bca``: quantiles at Efron's bias-corrected, accelerated levels
    ndtr(z0 + (z0 + z)/(1 - a (z0 + z))), z0 = ndtri(share of resamples below the estimate).
    Quantiles interpolate linearly, as ``numpy.quantile`` and ``scipy.stats.bootstrap`` do.
    """
    alpha = (1.0 - level) / 2.0
    n_resamples, n_cols = distribution.shape
    if method == "bca":
        below = (distribution < estimate).sum(axis=0) + (distribution <= estimate).sum(axis=0)
        z0 = ndtri(below / (2.0 * n_resamples))
        z_low, z_high = ndtri(alpha), ndtri(1.0 - alpha)
        with np.errstate(invalid="ignore", divide="ignore"):
            q_low = ndtr(z0 + (z0 + z_low) / (1.0 - acceleration * (z0 + z_low)))
            q_high = ndtr(z0 + (z0 + z_high) / (1.0 - acceleration * (z0 + z_high)))
    else:
        q_low = np.full(n_cols, alpha)
        q_high = np.full(n_cols, 1.0 - alpha)
    ordered = np.sort(distribution, axis=0)
    lower = _column_quantiles(ordered, q_low)
    upper = _column_quantiles(ordered, q_high)
    if method == "basic":
        lower, upper = 2.0 * estimate - upper, 2.0 * estimate - lower
    return lower, upper


def _column_quantiles(ordered: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Linear-interpolation quantile q[c] of each sorted column; NaN where q is NaN."""
    n = ordered.shape[0]
    position = np.where(np.isnan(q), 0.0, q) * (n - 1)
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, n - 1)
    frac = position - low
    cols = np.arange(ordered.shape[1])
    result = ordered[low, cols] * (1.0 - frac) + ordered[high, cols] * frac
    return np.where(np.isnan(q), np.nan, result)
