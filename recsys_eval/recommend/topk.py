"""Top-k selection kernels (numba): a bounded min-heap per row, a walk of one global order, and a
per-unit sort; and the counts that place given items among all of a row's candidates.

Order everywhere is (score descending, index ascending). The heap keeps the best k (score, index)
pairs seen so far; its root is the worst of them. Candidates are offered in index order and must
beat the root strictly, so among equal scores the smaller index stays: the same result as a full
sort by (score desc, index asc), without sorting.

Placing items (a user's relevant items) among the candidates: while a row's scores are at hand,
each candidate column j scoring at least the lowest of the placed items is located among their
sorted scores, lo(j) = #placed scores < s_j and hi(j) = #placed scores <= s_j; the placed item of
sorted position q is then beaten by the columns with lo > q and tied with those with lo <= q < hi,
two suffix sums of the histograms of lo and hi. The scores are cut into about 8 buckets per
placed item, linear between the lowest and highest placed score, and a table gives the placed
scores below each bucket: a column whose bucket holds no placed score (most of them) is located
by one subtraction, one multiplication and a lookup, the others by a binary search among the few
in their bucket. A binary search among all of them cost 2-3 times the top-k scan per column: the
steps of its search wait on each other. A column below every placed item costs one comparison.
"""

from __future__ import annotations

import numba
import numpy as np

from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.sorting import equal_range, sort_items, stable_argsort
from recsys_eval.recommend.factor_scores import R_USERS, W_ITEMS, pack_items, score_tile


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
    size = np.int64(0)  # not 0: a Literal[int](0) would compile heap_offer and heap_drain once more
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


#: Buckets per placed item of :func:`_place_in_row`'s table, and at most so many in all.
BUCKETS_PER_PLACED, MAX_BUCKETS = 8, 1 << 14


@numba.njit(cache=True, inline="always")
def _bucket(x, lowest, scale, n_buckets):
    """The bucket of score ``x`` (at least ``lowest``): ``(x - lowest) * scale`` rounded down,
    the last bucket for what lies beyond (+inf, and NaN products of infinite scores). Never
    decreasing in ``x`` (IEEE subtraction and multiplication round monotonically), so a value
    in a lower bucket than another is below it."""
    t = (x - lowest) * scale
    return int(t) if t < n_buckets - 1 else n_buckets - 1


@numba.njit(cache=True)
def _place_in_row(row, seen_indices, first, last, blocked, placed, above, tied, before):
    """Add to ``above[p]``, ``tied[p]`` and ``before[p]`` the candidate columns of ``row`` (not in
    ``seen_indices[first:last]``, not blocked, not one of ``placed``) scoring higher than column
    ``placed[p]``, the same, and the same with a smaller index. ``placed`` is ascending and holds
    candidates. Returns the NaN scores met (NaN columns are never counted)."""
    n = len(placed)
    placed_s = np.empty(n)  # float64, as every sort key: one compiled sort (float32 converts exactly)
    for p in range(n):
        placed_s[p] = row[placed[p]]
    order = stable_argsort(placed_s)
    sorted_s = np.empty(n)
    for p in range(n):
        sorted_s[p] = placed_s[order[p]]
    lowest = sorted_s[0]
    # first_in[b]: the placed scores in buckets below b (a NaN score is in none: it counts nowhere)
    finite = n
    while finite > 0 and sorted_s[finite - 1] != sorted_s[finite - 1]:
        finite -= 1
    n_buckets = min(BUCKETS_PER_PLACED * n, MAX_BUCKETS)
    spread = sorted_s[finite - 1] - lowest if finite else 0.0
    scale = n_buckets / spread if 0.0 < spread < np.inf else 0.0
    first_in = np.zeros(n_buckets + 1, dtype=np.int64)
    for q in range(finite):
        first_in[_bucket(sorted_s[q], lowest, scale, n_buckets) + 1] += 1
    for b in range(n_buckets):
        first_in[b + 1] += first_in[b]
    n_lo = np.zeros(n + 1, dtype=np.int64)  # columns with lo(j) = q, and with hi(j) = q
    n_hi = np.zeros(n + 1, dtype=np.int64)
    nans = 0
    nxt = 0  # next placed column at or after j
    start = 0
    for ptr in range(first, last + 1):
        stop = seen_indices[ptr] if ptr < last else len(row)
        for j in range(start, stop):
            s = row[j]
            if s >= lowest:
                if blocked[j]:
                    continue
                while nxt < n and placed[nxt] < j:
                    nxt += 1
                if nxt < n and placed[nxt] == j:
                    continue
                b = _bucket(np.float64(s), lowest, scale, n_buckets)
                lo, hi = first_in[b], first_in[b + 1]
                if lo < hi:  # a placed score in s's bucket: search among those alone
                    a, z = equal_range(sorted_s[lo:hi], np.float64(s))
                    lo, hi = lo + a, lo + z
                n_lo[lo] += 1
                n_hi[hi] += 1
                for q in range(lo, hi):
                    if j < placed[order[q]]:
                        before[order[q]] += 1
            elif s != s:
                nans += 1
        start = stop + 1
    gt = 0
    ge = 0
    for q in range(n - 1, -1, -1):
        gt += n_lo[q + 1]
        ge += n_hi[q + 1]
        above[order[q]] += gt
        tied[order[q]] += ge - gt
    return nans


def no_places(n_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The ``place_ptr, placed, above, tied, before`` arguments of rows that place nothing."""
    empty = np.zeros(0, dtype=np.int64)
    return np.zeros(n_rows + 1, dtype=np.int64), np.zeros(0, dtype=np.int32), empty, empty, empty


@numba.njit(cache=True)
def _scan_row(row, seen_indices, first, last, blocked, out_s, out_i, placed, above, tied, before):
    """Top-k of the row (when ``out_s`` has room) and the places of ``placed`` (when any);
    returns (count, NaNs met)."""
    count, nans = 0, 0
    if len(out_s):
        count, nans = _top_k_of_row(row, seen_indices, first, last, blocked, out_s, out_i)
    if len(placed):
        nans += _place_in_row(row, seen_indices, first, last, blocked, placed, above, tied, before)
    return count, nans


def top_k_rows(scores, rows, seen_indptr, seen_indices, blocked, k, place_ptr, placed, above, tied, before):
    """Best ``k`` columns of every row of ``scores`` (rows x columns), skipping the columns of
    CSR row ``rows[r]`` of ``seen`` (indices sorted) and columns with ``blocked[col]``; -inf
    scores are never taken. With ``k = 0`` no top-k is kept.

    Row r also places its columns ``placed[place_ptr[r]:place_ptr[r + 1]]`` (ascending) among its
    other candidates, into the same slices of ``above``, ``tied`` and ``before``
    (:func:`_place_in_row`).

    Returns columns and scores (rows x k, best first), each row's count (< k when fewer columns
    are allowed) and the number of NaN scores met (NaN is never taken)."""
    n_rows = scores.shape[0]
    out_i = np.full((n_rows, k), -1, dtype=np.int32)
    out_s = np.full((n_rows, k), -np.inf, dtype=np.float32)
    counts = np.zeros(n_rows, dtype=np.int64)
    nans = np.zeros(n_rows, dtype=np.int64)
    run_chunks(_top_k_rows_chunk, chunk_bounds(n_rows), scores, rows, seen_indptr, seen_indices, blocked, place_ptr,
               placed, above, tied, before, out_i, out_s, counts, nans)
    return out_i, out_s, counts, nans.sum()


@numba.njit(cache=True, nogil=True)
def _top_k_rows_chunk(lo, hi, scores, rows, seen_indptr, seen_indices, blocked, place_ptr, placed, above, tied, before,
                      out_i, out_s, counts, nans):
    """:func:`top_k_rows` for the rows ``lo:hi``."""
    for r in range(lo, hi):
        first, last = seen_indptr[rows[r]], seen_indptr[rows[r] + 1]
        a, b = place_ptr[r], place_ptr[r + 1]
        counts[r], nans[r] = _scan_row(scores[r], seen_indices, first, last, blocked, out_s[r], out_i[r],
                                       placed[a:b], above[a:b], tied[a:b], before[a:b])


def top_k_factors(user_factors, item_factors_t, rows, seen_indptr, seen_indices, blocked, k, tile,
                  place_ptr, placed, above, tied, before, factor_rows=None, packed=None):
    """:func:`top_k_rows` of the scores ``user_factors[factor_rows] @ item_factors_t``, computed
    ``tile`` rows at a time by each thread and scanned while they are in cache: no rows x items
    block. ``factor_rows`` (default ``rows``) are the rows of ``user_factors`` holding the users
    ``rows``, for a model that holds only some users' factors. Scores are
    :mod:`recsys_eval.recommend.factor_scores`' fixed-order float32 sums: a row's do not depend on
    the tile, its place in it, the rows given or the threads. ``packed``: the item factors as
    :func:`~recsys_eval.recommend.factor_scores.pack_items` gives them, for a caller that ranks
    chunk after chunk of one model (packed here when None)."""
    n_rows = len(rows)
    factor_rows = rows if factor_rows is None else factor_rows
    out_i = np.full((n_rows, k), -1, dtype=np.int32)
    out_s = np.full((n_rows, k), -np.inf, dtype=np.float32)
    counts = np.zeros(n_rows, dtype=np.int64)
    nans = np.zeros(n_rows, dtype=np.int64)
    packed = pack_items(item_factors_t) if packed is None else packed
    run_chunks(_top_k_factors_chunk, chunk_bounds((n_rows + tile - 1) // tile), user_factors, packed,
               item_factors_t.shape[1], rows, np.asarray(factor_rows, dtype=np.int64), seen_indptr, seen_indices,
               blocked, tile, place_ptr, placed, above, tied, before, out_i, out_s, counts, nans)
    return out_i, out_s, counts, nans.sum()


@numba.njit(cache=True, nogil=True)
def _top_k_factors_chunk(t_lo, t_hi, user_factors, packed, n_items, rows, factor_rows, seen_indptr, seen_indices,
                         blocked, tile, place_ptr, placed, above, tied, before, out_i, out_s, counts, nans):
    """:func:`top_k_factors` for the tiles ``t_lo:t_hi``."""
    n_rows = len(rows)
    scores = np.empty((tile, n_items), dtype=np.float32)
    blocks = np.zeros(((tile + R_USERS - 1) // R_USERS, R_USERS, packed.shape[1]), dtype=np.float32)
    edge = np.zeros((R_USERS, W_ITEMS), dtype=np.float32)
    for t in range(t_lo, t_hi):
        lo, hi = t * tile, min((t + 1) * tile, n_rows)
        score_tile(user_factors, factor_rows[lo:hi], packed, scores, blocks, edge)
        for r in range(lo, hi):
            first, last = seen_indptr[rows[r]], seen_indptr[rows[r] + 1]
            a, b = place_ptr[r], place_ptr[r + 1]
            counts[r], nans[r] = _scan_row(scores[r - lo], seen_indices, first, last, blocked, out_s[r],
                                           out_i[r], placed[a:b], above[a:b], tied[a:b], before[a:b])


def top_k_global(order, rows, seen_indptr, seen_indices, n_items, k, bounds):
    """Top ``k`` of every row when the scores do not depend on the row: the first ``k`` items of
    ``order`` (every allowed item with a finite score, best first) not in CSR row ``rows[r]`` of
    ``seen``. A walk of the order's head per row, with the row's seen items stamped.

    Returns items (rows x k) and each row's count; ``bounds`` are the parallel chunks of rows."""
    n_rows = len(rows)
    out_i = np.full((n_rows, k), -1, dtype=np.int32)
    counts = np.zeros(n_rows, dtype=np.int64)
    run_chunks(_top_k_global_chunk, bounds, order, rows, seen_indptr, seen_indices, n_items, k, out_i, counts)
    return out_i, counts


@numba.njit(cache=True, nogil=True)
def _top_k_global_chunk(lo, hi, order, rows, seen_indptr, seen_indices, n_items, k, out_i, counts):
    """:func:`top_k_global` for the rows ``lo:hi``."""
    stamp = np.full(n_items, -1, dtype=np.int64)
    for r in range(lo, hi):
        u = rows[r]
        for p in range(seen_indptr[u], seen_indptr[u + 1]):
            stamp[seen_indices[p]] = r
        c = 0
        for j in order:
            if c == k:
                break
            if stamp[j] != r:
                out_i[r, c] = j
                c += 1
        counts[r] = c


def place_global(neg_sorted, position, item_scores, rows, seen_indptr, seen_indices, place_ptr, placed,
                 above, tied, before, bounds):
    """:func:`_place_in_row` when the scores do not depend on the row: from one global order of
    the allowed items (``position[item]`` its place, -1 if not allowed; ``neg_sorted`` the
    negated scores in that order, ascending, in float64 as every searched key), each placed
    item's counts are its global ones less the row's excluded items (its allowed seen items and
    placed items) that fall in the same ranges of the order, found by binary search in their
    sorted positions: O((|seen| + |placed|) log) per row instead of a pass over every item."""
    run_chunks(_place_global_chunk, bounds, neg_sorted, position, item_scores, rows, seen_indptr, seen_indices,
               place_ptr, placed, above, tied, before)


@numba.njit(cache=True, nogil=True)
def _place_global_chunk(lo, hi, neg_sorted, position, item_scores, rows, seen_indptr, seen_indices, place_ptr, placed,
                        above, tied, before):
    """:func:`place_global` for the rows ``lo:hi``."""
    # The excluded positions are sorted by the targets' radix sort (int32), whose kernel the
    # sampling compiles anyway: a quicksort of int64 would compile numba's own (~2.5 s cold).
    bits = np.int64(1)
    while (1 << bits) < len(position):
        bits += 1
    count = np.zeros(257, dtype=np.int64)
    for r in range(lo, hi):
        a, b = place_ptr[r], place_ptr[r + 1]
        if a == b:
            continue
        u = rows[r]
        size = seen_indptr[u + 1] - seen_indptr[u] + b - a
        excluded = np.empty(size, dtype=np.int32)
        tmp = np.empty(size, dtype=np.int32)
        n = np.int64(0)
        for p in range(seen_indptr[u], seen_indptr[u + 1]):
            if position[seen_indices[p]] >= 0:
                excluded[n] = position[seen_indices[p]]
                n += 1
        for p in range(a, b):
            excluded[n] = position[placed[p]]
            n += 1
        sort_items(excluded, n, bits, tmp, count)
        excluded = excluded[:n]
        for p in range(a, b):
            key = -np.float64(item_scores[placed[p]])
            g0, g1 = equal_range(neg_sorted, key)  # allowed items scoring higher; ... at least as high
            at = position[placed[p]]
            e0 = equal_range(excluded, g0)[0]
            e1 = equal_range(excluded, g1)[0]
            e_at = equal_range(excluded, at)[0]
            above[p] = g0 - e0
            tied[p] = (g1 - g0) - (e1 - e0)  # the placed item itself is among the excluded
            before[p] = (at - g0) - (e_at - e0)


def place_listed(relevant, rel_scores, unit_group, neg_offsets, negatives, neg_scores):
    """For every unit, of the listed items of its group ``negatives[neg_offsets[g]:neg_offsets[g +
    1]]`` (``g = unit_group[unit]``) other than its relevant item: those scoring higher than the
    relevant item, the same, and the same with a smaller index. O(group size) per unit, no sort."""
    n = len(relevant)
    above = np.zeros(n, dtype=np.int64)
    tied = np.zeros(n, dtype=np.int64)
    before = np.zeros(n, dtype=np.int64)
    run_chunks(_place_listed_chunk, chunk_bounds(n), relevant, rel_scores, unit_group, neg_offsets, negatives,
               neg_scores, above, tied, before)
    return above, tied, before


@numba.njit(cache=True, nogil=True)
def _place_listed_chunk(lo, hi, relevant, rel_scores, unit_group, neg_offsets, negatives, neg_scores, above, tied,
                        before):
    """:func:`place_listed` for the units ``lo:hi``."""
    for u in range(lo, hi):
        g = unit_group[u]
        item = relevant[u]
        s = rel_scores[u]
        for p in range(neg_offsets[g], neg_offsets[g + 1]):
            j = negatives[p]
            x = neg_scores[p]
            if j == item:
                continue
            if x > s:
                above[u] += 1
            elif x == s:
                tied[u] += 1
                if j < item:
                    before[u] += 1


def sort_units(offsets, items, scores):
    """Positions of every unit's slice ordered by (score desc, item asc): a permutation of
    ``0..len(items)-1`` that keeps each unit's positions inside its slice."""
    order = np.empty(len(items), dtype=np.int64)
    run_chunks(_sort_units_chunk, chunk_bounds(len(offsets) - 1), offsets, items, scores, order)
    return order


@numba.njit(cache=True, nogil=True)
def _sort_units_chunk(first, last, offsets, items, scores, order):
    """:func:`sort_units` for the units ``first:last``."""
    # Plain loops and float64 keys (exact for int32 items and float32 scores): slices, np.all,
    # np.arange and slice assignment would each add compiled code, and another key type another sort.
    for u in range(first, last):
        lo, hi = offsets[u], offsets[u + 1]
        n = hi - lo
        keys = np.empty(n)
        listed = True  # the usual case: listed in item order
        for p in range(n):
            keys[p] = items[lo + p]
            if p > 0 and items[lo + p] <= items[lo + p - 1]:
                listed = False
        if listed:
            by_item = np.empty(n, dtype=np.int64)
            for p in range(n):
                by_item[p] = p
        else:
            by_item = stable_argsort(keys)
        for p in range(n):
            keys[p] = -scores[lo + by_item[p]]
        by_score = stable_argsort(keys)  # ties keep item order
        for p in range(n):
            order[lo + p] = lo + by_item[by_score[p]]


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
