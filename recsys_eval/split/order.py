"""Seeded orders within groups: the one kernel behind every splitter.

Every splitter needs, for each row, its rank within its user (or within the whole data): in a
uniformly random order, or by time with ties among equal times in a uniformly random order. Both
come from one pass: a stable counting sort by group, a sort by time inside each group, then a
Fisher-Yates shuffle of every run of rows that cannot be told apart (equal time, or the whole group
for a random order), driven by uniform draws from a numpy ``Generator``. Ties are therefore never
broken by input order, and the same seed gives the same ranks.

The work is O(n) plus the per-group time sorts, in numba (compiled once, cached on disk).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def _ranks(group, n_groups, time, by_time, u01):  # pragma: no cover - compiled
    n = group.shape[0]
    offsets = np.zeros(n_groups + 1, np.int64)
    for i in range(n):
        offsets[group[i] + 1] += 1
    for g in range(n_groups):
        offsets[g + 1] += offsets[g]
    fill = offsets[:-1].copy()
    order = np.empty(n, np.int64)
    for i in range(n):
        g = group[i]
        order[fill[g]] = i
        fill[g] += 1
    rank = np.empty(n, np.int64)
    for g in range(n_groups):
        start, end = offsets[g], offsets[g + 1]
        if by_time and end - start > 1:
            seg = order[start:end]
            order[start:end] = seg[np.argsort(time[seg])]
        run = start
        while run < end:
            stop = run + 1
            if by_time:
                while stop < end and time[order[stop]] == time[order[run]]:
                    stop += 1
            else:
                stop = end
            for p in range(stop - 1, run, -1):  # Fisher-Yates over the run [run, stop)
                j = run + int(u01[p] * (p - run + 1))
                if j > p:
                    j = p
                order[p], order[j] = order[j], order[p]
            run = stop
        for p in range(start, end):
            rank[order[p]] = p - start
    return rank


def rank_within(
    groups: np.ndarray,
    n_groups: int,
    rng: np.random.Generator,
    times: np.ndarray | None = None,
) -> np.ndarray:
    """0-based rank of every row within its group (int64).

    ``groups`` holds a group in ``0..n_groups-1`` per row (e.g. the user index). Without ``times``
    the order within each group is uniformly random; with ``times`` it is by time, earliest first,
    rows of equal time in uniformly random order. ``rng`` supplies the randomness (one draw per row).
    """
    groups = np.ascontiguousarray(groups, dtype=np.int32)
    if len(groups) and (groups.min() < 0 or groups.max() >= n_groups):  # the kernel trusts them
        raise ValueError(f"groups must lie in 0..{n_groups - 1}")
    u01 = rng.random(len(groups))
    by_time = times is not None
    time = np.ascontiguousarray(times, dtype=np.int64) if by_time else np.zeros(0, np.int64)
    return _ranks(groups, int(n_groups), time, by_time, u01)


def random_rank(n: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random permutation of 0..n-1: the rank of every row in one random order."""
    return rank_within(np.zeros(n, np.int32), 1, rng)
