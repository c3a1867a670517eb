"""Tied scores: validation, the deterministic order, and the tie flags the kernels walk.

Convention (documented in the README): items with equal scores are ordered by item index
ascending (``ties="first"``), so that every metric is a function of the scores alone and the same
scores always give the same values. ``ties="average"`` instead gives the expected value over all
orderings of each group of tied items (McSherry & Najork 2008), see :mod:`.kernels`. Ties are known
only among the listed items: a truncated list cannot say what was tied with its last item.
"""

from __future__ import annotations

import numpy as np

from recsys_eval.core.units import Rankings
from recsys_eval.errors import DataError


def unit_of_position(offsets: np.ndarray) -> np.ndarray:
    """The unit of every flat position of a CSR layout."""
    return np.repeat(np.arange(len(offsets) - 1, dtype=np.int64), np.diff(offsets))


def check_scores(rankings: Rankings, source: str = "rankings") -> None:
    """Scores must be finite and non-increasing along every unit's ranking."""
    scores = rankings.scores
    if scores is None:
        return
    bad = ~np.isfinite(scores)
    if bad.any():
        pos = int(np.flatnonzero(bad)[0])
        unit = int(unit_of_position(rankings.offsets)[pos])
        raise DataError(
            f"{source}: {int(bad.sum()):,} NaN or infinite scores (first in unit {unit}, user "
            f"{int(rankings.unit_user[unit])}); expected finite numbers"
        )
    rises = _within_unit(rankings.offsets, scores[1:] > scores[:-1])
    if rises.any():
        pos = int(np.flatnonzero(rises)[0]) + 1
        unit = int(unit_of_position(rankings.offsets)[pos])
        raise DataError(
            f"{source}: scores rise along the ranking of unit {unit} (user "
            f"{int(rankings.unit_user[unit])}) at position {pos - int(rankings.offsets[unit]) + 1}; "
            "a ranking lists its items best first, so scores must never increase"
        )


def tie_flags(rankings: Rankings) -> np.ndarray:
    """True at every position whose score equals the previous position's in the same unit."""
    n = len(rankings.items)
    flags = np.zeros(n, dtype=np.bool_)
    if rankings.scores is not None and n > 1:
        flags[1:] = _within_unit(rankings.offsets, rankings.scores[1:] == rankings.scores[:-1])
    return flags


def order_ties(rankings: Rankings) -> Rankings:
    """Within every group of tied scores, items by index ascending (the deterministic rule).

    Returns ``rankings`` itself when it is already in that order (the usual case: cheap check).
    """
    tied = tie_flags(rankings)
    items = rankings.items
    out_of_order = tied[1:] & (items[1:] < items[:-1])
    if not out_of_order.any():
        return rankings
    group = np.cumsum(~tied)
    order = np.lexsort((items, group))
    return Rankings(rankings.unit_user, rankings.offsets, items[order], rankings.scores[order])


def _within_unit(offsets: np.ndarray, pair_flags: np.ndarray) -> np.ndarray:
    """Keep flags of adjacent pairs (position i-1, i) only where both lie in the same unit."""
    flags = pair_flags.copy()
    starts = offsets[1:-1]
    starts = starts[(starts > 0) & (starts < len(flags) + 1)]
    flags[starts - 1] = False
    return flags
