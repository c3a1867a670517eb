"""Miscalibration C_KL of top-k lists (Steck, "Calibrated Recommendations", RecSys 2018;
docs/CONVENTIONS.md#calibration).

For a unit of user u, with p(g|i) = 1/|G_i| for each genre g of item i (0 for an item without
genres), H the user's train items with genres and L the listed top-k items with genres:

    p(g|u) = sum_{i in H} p(g|i) / |H|,   q(g|u) = sum_{i in L} p(g|i) / |L|,
    q~ = (1 - alpha) q + alpha p,          C_KL = sum_g p(g|u) log(p(g|u) / q~(g|u))   (nats)

with uniform weights (Steck's w_{u,i} = w_r(i) = 1) and alpha = ``calibration_alpha`` (0.01). NaN
when H or L is empty: no genre data in the user's profile, or in the list.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.units import Rankings


def genre_lists(genres: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An items x genres bool matrix as each item's genres (items x the most genres of an item, in
    the smallest integer type, ascending, padded), its genre count, and p(g|i) = 1/|G_i| by count:
    a few hundred kB, so that the lookups of every train and listed item, the kernel's cost, hit
    the cache."""
    genres = np.asarray(genres, dtype=bool)
    per_item = genres.sum(axis=1)
    width = int(per_item.max(initial=0))
    dtype = np.uint8 if genres.shape[1] <= 256 else np.int64
    lists = np.zeros((len(genres), max(width, 1)), dtype=dtype)
    rows, columns = np.nonzero(genres)
    lists[rows, np.arange(len(rows)) - np.repeat(np.cumsum(per_item) - per_item, per_item)] = columns
    with np.errstate(divide="ignore"):
        weight = np.where(np.arange(width + 1) > 0, 1.0 / np.arange(width + 1), 0.0)
    return lists, per_item.astype(dtype if width <= 255 else np.int64), weight


def calibration_values(rankings: Rankings, cutoffs: list[int], train_indptr: np.ndarray, train_indices: np.ndarray,
                       genres: np.ndarray, alpha: float) -> np.ndarray:
    """units x cutoffs: C_KL of every unit's top-k list against its user's train profile.
    ``train_indptr``/``train_indices``: every user index's train items (CSR); ``genres``: items x
    genres bool matrix."""
    g_lists, g_count, g_weight = genre_lists(genres)
    out = np.full((rankings.n_units, len(cutoffs)), np.nan)
    run_chunks(_calibration_chunk, chunk_bounds(rankings.n_units), rankings.offsets.astype(np.int64),
               rankings.items.astype(np.int64), rankings.unit_user.astype(np.int64), train_indptr, train_indices,
               g_lists, g_count, g_weight, np.asarray(cutoffs, dtype=np.int64), genres.shape[1], float(alpha), out)
    return out


@njit(cache=True, nogil=True)
def _add_item(item, g_lists, g_count, g_weight, into):
    """Add p(.|item) to ``into``; 1 if the item has genres, else 0."""
    n = g_count[item]
    for j in range(n):
        into[g_lists[item, j]] += g_weight[n]
    return 1 if n > 0 else 0


@njit(cache=True, nogil=True)
def _calibration_chunk(lo, hi, offsets, items, unit_user, t_indptr, t_indices, g_lists, g_count, g_weight,
                       cutoffs, n_genres, alpha, out):
    p = np.zeros(n_genres)
    q = np.zeros(n_genres)
    for u in range(lo, hi):
        p[:] = 0.0
        q[:] = 0.0
        user = unit_user[u]
        n_profile = 0
        if user + 1 < len(t_indptr):
            for j in range(t_indptr[user], t_indptr[user + 1]):
                n_profile += _add_item(t_indices[j], g_lists, g_count, g_weight, p)
        if n_profile == 0:
            continue
        p /= n_profile
        n_listed = 0
        c = 0
        length = offsets[u + 1] - offsets[u]
        for r in range(length + 1):
            while c < len(cutoffs) and (r == cutoffs[c] or r == length):
                if n_listed > 0:
                    total = 0.0
                    for g in range(n_genres):
                        if p[g] > 0:
                            total += p[g] * np.log(p[g] / ((1.0 - alpha) * q[g] / n_listed + alpha * p[g]))
                    out[u, c] = total
                c += 1
            if r < length and c < len(cutoffs):
                n_listed += _add_item(items[offsets[u] + r], g_lists, g_count, g_weight, q)
