"""Tied scores: validation, the deterministic order, and the tie flags the kernels walk.

Convention (documented in the README): items with equal scores are ordered by item index
ascending (``ties="first"``), so that every metric is a function of the scores alone and the same
scores always give the same values. ``ties="average"`` instead gives the expected value over all
orderings of each group of tied items (McSherry & Najork 2008), see :mod:`.kernels`. Ties are known
only among the listed items: a truncated list cannot say what was tied with its last item.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.units import Rankings
from recsys_eval.errors import DataError


def unit_of_position(offsets: np.ndarray) -> np.ndarray:
    """The unit of every flat position of a CSR layout."""
    return np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))


def scan_scores(rankings: Rankings, source: str = "rankings") -> tuple[np.ndarray, bool]:
    """Check that scores are finite and never increase along a unit's ranking, and return the tie
    flags (True at every position whose score equals the previous position's in the same unit) and
    whether every group of tied items is in item order already: one parallel pass over the scores.
    Without scores nothing is tied."""
    scores = rankings.scores
    if scores is None:
        return np.zeros(len(rankings.items), dtype=np.bool_), True
    offsets = rankings.offsets.astype(np.int64, copy=False)
    tied, non_finite, rise, unordered = _scan(offsets, scores, rankings.items, chunk_bounds(len(offsets) - 1))
    if (non_finite >= 0).any():
        pos = int(non_finite[non_finite >= 0][0])
        unit = int(unit_of_position(offsets)[pos])
        raise DataError(
            f"{source}: {int((~np.isfinite(scores)).sum()):,} NaN or infinite scores (first in unit {unit}, "
            f"user {int(rankings.unit_user[unit])}); expected finite numbers"
        )
    if (rise >= 0).any():
        pos = int(rise[rise >= 0][0])
        unit = int(unit_of_position(offsets)[pos])
        raise DataError(
            f"{source}: scores rise along the ranking of unit {unit} (user "
            f"{int(rankings.unit_user[unit])}) at position {pos - int(offsets[unit]) + 1}; "
            "a ranking lists its items best first, so scores must never increase"
        )
    return tied, not (unordered >= 0).any()


def _scan(offsets, scores, items, bounds):
    """Tie flags, and per chunk of units the first position (-1: none) of a non-finite score, of a
    score above the previous one, and of a tied item listed after a larger item index."""
    n_chunks = len(bounds) - 1
    tied = np.zeros(len(scores), dtype=np.bool_)
    non_finite = np.full(n_chunks, -1, np.int64)
    rise = np.full(n_chunks, -1, np.int64)
    unordered = np.full(n_chunks, -1, np.int64)
    run_chunks(_scan_chunk, bounds, offsets, scores, items, tied, non_finite, rise, unordered, index=True)
    return tied, non_finite, rise, unordered


@njit(cache=True, nogil=True)
def _scan_chunk(chunk, first, last, offsets, scores, items, tied, non_finite, rise, unordered):
    """:func:`_scan` for the units ``first:last``, chunk ``chunk`` of the first positions."""
    first_non_finite = first_rise = first_unordered = -1  # locals: no store per position
    for u in range(first, last):
        start = offsets[u]
        for j in range(start, offsets[u + 1]):
            score = scores[j]
            if first_non_finite < 0 and not np.isfinite(score):
                first_non_finite = j
            if j > start:
                if score > scores[j - 1]:
                    if first_rise < 0:
                        first_rise = j
                elif score == scores[j - 1]:
                    tied[j] = True
                    if first_unordered < 0 and items[j] < items[j - 1]:
                        first_unordered = j
    non_finite[chunk], rise[chunk], unordered[chunk] = first_non_finite, first_rise, first_unordered


def order_ties(rankings: Rankings, tied: np.ndarray) -> Rankings:
    """Within every group of tied scores (``tied``: :func:`scan_scores`), items by index ascending
    (the deterministic rule)."""
    group = np.cumsum(~tied)
    order = np.lexsort((rankings.items, group))
    return Rankings(rankings.unit_user, rankings.offsets, rankings.items[order], rankings.scores[order])
