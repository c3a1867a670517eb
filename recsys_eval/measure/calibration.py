"""Miscalibration C_KL of top-k lists (Steck, "Calibrated Recommendations", RecSys 2018;
docs/CONVENTIONS.md#calibration).

For a unit of user u, with p(g|i) = 1/|G_i| for each genre g of item i (0 for an item without
genres), H the user's train items with genres and L the listed top-k items with genres:

    p(g|u) = sum_{i in H} p(g|i) / |H|,   q(g|u) = sum_{i in L} p(g|i) / |L|,
    q~ = (1 - alpha) q + alpha p,          C_KL = sum_g p(g|u) log(p(g|u) / q~(g|u))   (nats)

with uniform weights (Steck's w_{u,i} = w_r(i) = 1) and alpha = ``calibration_alpha`` (0.01). NaN
when H or L is empty: no genre data in the user's profile, or in the list.

The one pass over every unit's train items and list computes it
(:func:`recsys_eval.measure.listpass.list_pass`, with these functions): both walk the same items.
"""

from __future__ import annotations

import numpy as np
from numba import njit



def genre_rows(genres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An items x genres bool matrix as one row per item: its genre count, then its genres
    ascending (padded), in the smallest integer type; and p(g|i) = 1/|G_i| by count. A row is a
    few bytes and the table a few hundred kB, so that each lookup of a train or listed item, the
    kernels' cost, is one cache line and the table stays in cache."""
    genres = np.asarray(genres, dtype=bool)
    per_item = genres.sum(axis=1)
    width = int(per_item.max(initial=0))
    dtype = np.uint8 if max(genres.shape[1], width + 1) <= 256 else np.int64
    rows = np.zeros((len(genres), 1 + width), dtype=dtype)
    rows[:, 0] = per_item
    items, columns = np.nonzero(genres)
    rows[items, 1 + np.arange(len(items)) - np.repeat(np.cumsum(per_item) - per_item, per_item)] = columns
    with np.errstate(divide="ignore"):
        weight = np.where(np.arange(width + 1) > 0, 1.0 / np.arange(width + 1), 0.0)
    return rows, weight


@njit(cache=True, nogil=True, inline="always")
def add_item(item, g_rows, g_weight, into):
    """Add p(.|item) to ``into``; 1 if the item has genres, else 0."""
    n = g_rows[item, 0]
    for j in range(1, n + 1):
        into[g_rows[item, j]] += g_weight[n]
    return 1 if n > 0 else 0


@njit(cache=True, nogil=True, inline="always")
def miscalibration(p, q, n_listed, alpha):
    """C_KL of profile ``p`` (normalised) and the genre sums ``q`` of ``n_listed`` items with genres."""
    total = 0.0
    for g in range(len(p)):
        if p[g] > 0:
            total += p[g] * np.log(p[g] / ((1.0 - alpha) * q[g] / n_listed + alpha * p[g]))
    return total
