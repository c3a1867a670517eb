"""Top-k selection kernels (numba): a bounded min-heap per row, and a per-unit sort.

Order everywhere is (score descending, index ascending). The heap keeps the best k (score, index)
pairs seen so far; its root is the worst of them. Candidates are offered in index order and must
beat the root strictly, so among equal scores the smaller index stays: the same result as a full
sort by (score desc, index asc), without sorting.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def _worse(s_a: float, i_a: int, s_b: float, i_b: int) -> bool:
    return s_a < s_b or (s_a == s_b and i_a > i_b)


@numba.njit(cache=True)
def _sift_down(heap_s, heap_i, pos, size):
    while True:
        child = 2 * pos + 1
        if child >= size:
            return
        if child + 1 < size and _worse(heap_s[child + 1], heap_i[child + 1], heap_s[child], heap_i[child]):
            child += 1
        if not _worse(heap_s[child], heap_i[child], heap_s[pos], heap_i[pos]):
            return
        heap_s[pos], heap_s[child] = heap_s[child], heap_s[pos]
        heap_i[pos], heap_i[child] = heap_i[child], heap_i[pos]
        pos = child


@numba.njit(cache=True)
def heap_offer(heap_s, heap_i, size, s, j):
    """Offer (s, j) to a heap of capacity len(heap_s) holding ``size`` pairs; return the new size.
    Offers must come in ascending j for ties to keep the smaller index."""
    if size < len(heap_s):
        pos = size
        heap_s[pos] = s
        heap_i[pos] = j
        while pos > 0:
            parent = (pos - 1) // 2
            if not _worse(heap_s[pos], heap_i[pos], heap_s[parent], heap_i[parent]):
                break
            heap_s[pos], heap_s[parent] = heap_s[parent], heap_s[pos]
            heap_i[pos], heap_i[parent] = heap_i[parent], heap_i[pos]
            pos = parent
        return size + 1
    if s > heap_s[0]:
        heap_s[0] = s
        heap_i[0] = j
        _sift_down(heap_s, heap_i, 0, size)
    return size


@numba.njit(cache=True)
def heap_drain(heap_s, heap_i, size, out_s, out_i):
    """Empty the heap into ``out_s``/``out_i`` best first (their first ``size`` entries)."""
    for pos in range(size - 1, -1, -1):
        out_s[pos] = heap_s[0]
        out_i[pos] = heap_i[0]
        size -= 1
        heap_s[0] = heap_s[size]
        heap_i[0] = heap_i[size]
        _sift_down(heap_s, heap_i, 0, size)


@numba.njit(cache=True)
def _top_k_of_row(row, seen_indices, first, last, blocked, out_s, out_i):
    """Best len(out_s) columns of ``row`` into ``out_s``/``out_i`` (best first), skipping the
    columns ``seen_indices[first:last]`` (sorted) and blocked ones; -inf and NaN are never taken.
    Returns (count, NaNs met)."""
    k = len(out_s)
    heap_s = np.empty(k, dtype=np.float32)
    heap_i = np.empty(k, dtype=np.int32)
    size = 0
    nans = 0
    root = np.float32(-np.inf)  # a score must beat it to enter: -inf until the heap is full, then its worst
    start = 0
    for ptr in range(first, last + 1):  # the runs of columns between the seen columns
        stop = seen_indices[ptr] if ptr < last else len(row)
        for j in range(start, stop):
            s = row[j]
            if not s <= root:  # true for a better score, and for NaN: one compare per cell
                if s != s:
                    nans += 1
                elif not blocked[j]:
                    size = heap_offer(heap_s, heap_i, size, s, j)
                    if size == k:
                        root = heap_s[0]
        start = stop + 1
    heap_drain(heap_s, heap_i, size, out_s, out_i)
    return size, nans


@numba.njit(cache=True, parallel=True, nogil=True)
def top_k_rows(scores, rows, seen_indptr, seen_indices, blocked, k):
    """Best ``k`` columns of every row of ``scores`` (rows x columns), skipping the columns of
    CSR row ``rows[r]`` of ``seen`` (indices sorted) and columns with ``blocked[col]``; -inf
    scores are never taken.

    Returns columns and scores (rows x k, best first), each row's count (< k when fewer columns
    are allowed) and the number of NaN scores met (NaN is never taken)."""
    n_rows = scores.shape[0]
    out_i = np.full((n_rows, k), -1, dtype=np.int32)
    out_s = np.full((n_rows, k), -np.inf, dtype=np.float32)
    counts = np.zeros(n_rows, dtype=np.int64)
    nans = np.zeros(n_rows, dtype=np.int64)
    for r in numba.prange(n_rows):
        first, last = seen_indptr[rows[r]], seen_indptr[rows[r] + 1]
        counts[r], nans[r] = _top_k_of_row(scores[r], seen_indices, first, last, blocked, out_s[r], out_i[r])
    return out_i, out_s, counts, nans.sum()


@numba.njit(cache=True, parallel=True, nogil=True)
def top_k_factors(user_factors, item_factors_t, rows, seen_indptr, seen_indices, blocked, k, tile):
    """:func:`top_k_rows` of the scores ``user_factors[rows] @ item_factors_t``, computed ``tile``
    rows at a time by each thread and scanned while they are in cache: no rows x items block.
    Call with BLAS limited to one thread (the tiles are the parallelism)."""
    n_rows = len(rows)
    out_i = np.full((n_rows, k), -1, dtype=np.int32)
    out_s = np.full((n_rows, k), -np.inf, dtype=np.float32)
    counts = np.zeros(n_rows, dtype=np.int64)
    nans = np.zeros(n_rows, dtype=np.int64)
    for t in numba.prange((n_rows + tile - 1) // tile):
        lo, hi = t * tile, min((t + 1) * tile, n_rows)
        scores = np.dot(user_factors[rows[lo:hi]], item_factors_t)
        for r in range(lo, hi):
            first, last = seen_indptr[rows[r]], seen_indptr[rows[r] + 1]
            counts[r], nans[r] = _top_k_of_row(scores[r - lo], seen_indices, first, last, blocked, out_s[r], out_i[r])
    return out_i, out_s, counts, nans.sum()


@numba.njit(cache=True, parallel=True, nogil=True)
def sort_units(offsets, items, scores):
    """Positions of every unit's slice ordered by (score desc, item asc): a permutation of
    ``0..len(items)-1`` that keeps each unit's positions inside its slice."""
    order = np.empty(len(items), dtype=np.int64)
    for u in numba.prange(len(offsets) - 1):
        lo, hi = offsets[u], offsets[u + 1]
        unit_items = items[lo:hi]
        if np.all(unit_items[1:] > unit_items[:-1]):  # the usual case: listed in item order
            by_item = np.arange(hi - lo)
        else:
            by_item = np.argsort(unit_items, kind="mergesort")
        by_score = np.argsort(-scores[lo:hi][by_item], kind="mergesort")  # stable: ties keep item order
        order[lo:hi] = lo + by_item[by_score]
    return order


@numba.njit(cache=True, nogil=True)
def rank_units_by_row_order(units, unit_rows, offsets, items, order, scores, out_items, out_scores, kept, mark):
    """Each unit's listed items in the order of its user's row of ``order`` (the row's items by
    score desc, item asc), written at the unit's own offsets; ``-inf`` scores are left out and
    ``kept[u]`` counts what was written. One walk of the row per unit instead of a sort: a
    unit that lists most items (e.g. 1R+AN) costs a pass, not n log n. Returns whether a listed
    item scored NaN."""
    found_nan = False
    for i in range(len(units)):
        u, row = units[i], unit_rows[i]
        lo, hi = offsets[u], offsets[u + 1]
        for p in range(lo, hi):
            mark[items[p]] = True
        written, visited = lo, 0
        for j in order[row]:
            if visited == hi - lo:
                break
            if not mark[j]:
                continue
            visited += 1
            s = scores[row, j]
            if np.isnan(s):
                found_nan = True
            elif s > -np.inf:
                out_items[written] = j
                out_scores[written] = s
                written += 1
        kept[u] = written - lo
        for p in range(lo, hi):
            mark[items[p]] = False
    return found_nan


@numba.njit(cache=True, nogil=True)
def compact_units(offsets, kept, out_items, out_scores):
    """Move each unit's first ``kept[u]`` entries (written at ``offsets[u]``) left so that the units
    are contiguous, in place; returns the new offsets. Safe in place: no unit moves right."""
    new_offsets = np.empty(len(offsets), dtype=np.int64)
    new_offsets[0] = 0
    for u in range(len(offsets) - 1):
        start, dest = offsets[u], new_offsets[u]
        if dest != start:
            for p in range(kept[u]):
                out_items[dest + p] = out_items[start + p]
                out_scores[dest + p] = out_scores[start + p]
        new_offsets[u + 1] = dest + kept[u]
    return new_offsets
