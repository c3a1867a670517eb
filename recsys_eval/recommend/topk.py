"""Top-k selection over a block of scores in one pass per row (numba, parallel over rows).

Each row keeps a min-heap of its best k (score, item) pairs. Items are scanned in index order and
must beat the heap's worst strictly, so among equal scores the smaller item index wins: the same
ranking as sorting by (score desc, item asc). The user's training items (a sorted CSR row) and
blocked items are skipped during the scan, so they never need to be written into the block; they
are looked up (binary search in the sorted train row) only for items good enough to enter the heap.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, inline="always")
def _worse(s_a: float, i_a: int, s_b: float, i_b: int) -> bool:
    return s_a < s_b or (s_a == s_b and i_a > i_b)


@numba.njit(cache=True, inline="always")
def _contains(sorted_values, lo, hi, value) -> bool:
    """Binary search of ``value`` in ``sorted_values[lo:hi]``."""
    end = hi
    while lo < hi:
        mid = (lo + hi) // 2
        if sorted_values[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    return lo < end and sorted_values[lo] == value


@numba.njit(cache=True)
def _sift_down(heap_s, heap_i, start, size):
    pos = start
    while True:
        left = 2 * pos + 1
        if left >= size:
            return
        child = left
        right = left + 1
        if right < size and _worse(heap_s[right], heap_i[right], heap_s[left], heap_i[left]):
            child = right
        if _worse(heap_s[child], heap_i[child], heap_s[pos], heap_i[pos]):
            heap_s[pos], heap_s[child] = heap_s[child], heap_s[pos]
            heap_i[pos], heap_i[child] = heap_i[child], heap_i[pos]
            pos = child
        else:
            return


@numba.njit(cache=True, parallel=True)
def top_k_rows(scores, rows, seen_indptr, seen_indices, blocked, k):
    """Best ``k`` items of every row of ``scores`` (rows x items), skipping the items of
    ``seen`` row ``rows[r]`` and items with ``blocked[item]``; -inf scores are never taken.

    Returns items and scores (rows x k, best first) and each row's count (< k when fewer items
    are allowed)."""
    n_rows, n_items = scores.shape
    out_i = np.full((n_rows, k), -1, dtype=np.int32)
    out_s = np.full((n_rows, k), -np.inf, dtype=np.float32)
    counts = np.zeros(n_rows, dtype=np.int64)
    for r in numba.prange(n_rows):
        heap_s = np.empty(k, dtype=np.float32)
        heap_i = np.empty(k, dtype=np.int32)
        size = 0
        lo = seen_indptr[rows[r]]
        hi = seen_indptr[rows[r] + 1]
        for j in range(n_items):
            s = scores[r, j]
            # The common case first: an item that cannot enter the full heap costs one compare.
            if size == k and not s > heap_s[0]:
                continue
            if not s > -np.inf or blocked[j] or _contains(seen_indices, lo, hi, j):
                continue
            if size < k:
                # sift up
                pos = size
                heap_s[pos] = s
                heap_i[pos] = j
                size += 1
                while pos > 0:
                    parent = (pos - 1) // 2
                    if _worse(heap_s[pos], heap_i[pos], heap_s[parent], heap_i[parent]):
                        heap_s[pos], heap_s[parent] = heap_s[parent], heap_s[pos]
                        heap_i[pos], heap_i[parent] = heap_i[parent], heap_i[pos]
                        pos = parent
                    else:
                        break
            elif s > heap_s[0]:
                heap_s[0] = s
                heap_i[0] = j
                _sift_down(heap_s, heap_i, 0, size)
        # pop the heap worst-first into the output, filling it from the back
        counts[r] = size
        for pos in range(size - 1, -1, -1):
            out_s[r, pos] = heap_s[0]
            out_i[r, pos] = heap_i[0]
            size -= 1
            heap_s[0] = heap_s[size]
            heap_i[0] = heap_i[size]
            _sift_down(heap_s, heap_i, 0, size)
    return out_i, out_s, counts
