"""Sorting inside compiled kernels: the one home of the sorts our numba kernels call.

numba compiles its own sort routines (quicksort for ``np.sort``/``np.argsort``, a galloping merge
sort for ``kind="mergesort"``) afresh for every key type a kernel passes them, and they are large:
on an empty kernel cache the quickstart spent ~7 s of its ~43 s of compiling on four variants of
them (``benchmarks/bench_first_run.py``). The routines here are small enough to compile in a
fraction of that, and do what the kernels need:

- :func:`stable_argsort`: the order that sorts keys ascending, equal keys in their original order
  and NaN last, as ``np.argsort(keys, kind="stable")``: runs of 16 by insertion, then bottom-up
  merges between two index buffers. O(n log n) comparisons, two int64 buffers of n.
- :func:`insertion_sort`: a few dozen values in place, with no call and no allocation.
- :func:`sort_items`: non-negative integer codes in place, by bytes (LSD radix).
- :func:`equal_range`: where a key falls in an ascending array, as ``np.searchsorted`` left and
  right (numba compiles two routines per pair of types for it, ~1.3 s of the quickstart's compiling).

Kernels pass float64 keys where the values allow (float32 scores and int32 item codes convert
exactly), so each routine is compiled for few key types. They copy with loops rather than slice
assignment, which would compile numba's shape-mismatch message (~2 s of string formatting code).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Length of the runs :func:`stable_argsort` sorts by insertion before merging.
_RUN = 16


@njit(cache=True, nogil=True, inline="always")
def _before(a, b):  # pragma: no cover - compiled
    """True when key ``a`` sorts strictly before key ``b``: numeric order, NaN after every number."""
    return a < b or (b != b and a == a)


@njit(cache=True, nogil=True)
def stable_argsort(keys):  # pragma: no cover - compiled
    """Indices that sort ``keys`` ascending; equal keys keep their order, NaN go last (as
    ``np.argsort(keys, kind="stable")``)."""
    # Plain loops only: slices, np.arange and min() each cost compile time in every key type.
    n = len(keys)
    src = np.empty(n, np.int64)
    for i in range(n):  # runs of _RUN by insertion
        key = keys[i]
        j = i - 1
        lo = i - i % _RUN
        while j >= lo and _before(key, keys[src[j]]):
            src[j + 1] = src[j]
            j -= 1
        src[j + 1] = i
    dst = np.empty(n, np.int64)
    width = _RUN
    while width < n:
        for lo in range(0, n, 2 * width):
            mid = lo + width if lo + width < n else n
            hi = mid + width if mid + width < n else n
            i, j = lo, mid
            for out in range(lo, hi):
                if j >= hi or (i < mid and not _before(keys[src[j]], keys[src[i]])):
                    dst[out] = src[i]  # the left run's key unless the right one is strictly first
                    i += 1
                else:
                    dst[out] = src[j]
                    j += 1
        src, dst = dst, src
        width *= 2
    return src


@njit(cache=True, nogil=True)
def equal_range(a, key):  # pragma: no cover - compiled
    """Where ``key`` falls in ascending ``a`` (NaN last): ``(lo, hi)`` with ``lo`` the first index
    whose value is not before ``key`` and ``hi`` the first after it (``np.searchsorted`` left and
    right; ``len(a)`` if none), so ``a[lo:hi]`` are the values equal to ``key``.

    One routine for both sides: a flag choosing the side would be compiled once per constant a
    kernel passes, and the second search, from ``lo`` on, costs a few comparisons."""
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) >> 1
        if _before(a[mid], key):
            lo = mid + 1
        else:
            hi = mid
    first, hi = lo, len(a)
    while lo < hi:
        mid = (lo + hi) >> 1
        if _before(key, a[mid]):
            hi = mid
        else:
            lo = mid + 1
    return first, lo


@njit(cache=True)
def insertion_sort(a, n):  # pragma: no cover - compiled
    """Sort ``a[:n]`` in place by insertion: O(n^2), but no call and no allocation, so the fastest
    way for a few dozen values."""
    for i in range(1, n):
        x = a[i]
        j = i - 1
        while j >= 0 and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = x


@njit(cache=True)
def sort_items(a, n, bits, tmp, count):  # pragma: no cover - compiled
    """Sort ``a[:n]`` (non-negative ints below ``2**bits``) in place: LSD radix sort by bytes.

    A short sample is otherwise sorted with a comparison sort that mispredicts on every other
    branch; radix passes are branch-free and several times faster at n = 100.
    """
    if n < 24:
        insertion_sort(a, n)
        return
    src, dst = a, tmp
    passes = 0
    for shift in range(0, bits, 8):
        count[:] = 0
        for i in range(n):
            count[((src[i] >> shift) & 255) + 1] += 1
        for b in range(256):
            count[b + 1] += count[b]
        for i in range(n):
            digit = (src[i] >> shift) & 255
            dst[count[digit]] = src[i]
            count[digit] += 1
        src, dst = dst, src
        passes += 1
    if passes % 2 == 1:
        for i in range(n):  # a loop: a slice assignment compiles numba's shape-error message
            a[i] = tmp[i]
