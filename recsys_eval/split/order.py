"""Seeded orders within groups: the one kernel behind every splitter.

Every splitter needs, for each row, its rank within its user (or within the whole data): in a
uniformly random order, or by time with ties among equal times in a uniformly random order. Both
come from three steps: a stable counting sort of the rows by group; for time orders, a sort by
time inside each group; then a Fisher-Yates shuffle of every run of rows that cannot be told apart
(equal time, or the whole group for a random order), driven by uniform draws from a numpy
``Generator`` (:func:`rank_within`), or a sort of the run by a key per row
(:func:`keyed_rank_within`: the splitters' keys, :mod:`recsys_eval.split.keyed`, which make a
row's rank independent of every other group and of the rows' order). Ties are therefore never
broken by input order, and the same seed gives the same ranks. A global order of keyed entries
(rows, users or items: :func:`keyed_rank`) is one sort by key.

The sort by time is one numpy sort of 64-bit keys ``group | time - min time | position in group``
when the three fit in 64 bits (ML-25M: 18 + 30 + 15 bits); otherwise each group is sorted on its
own. The rest is O(n) in numba (compiled once, cached on disk).
"""

from __future__ import annotations

import numba
import numpy as np

from recsys_eval.core.sorting import stable_argsort


@numba.njit(cache=True)
def _group_order(group, n_groups):  # pragma: no cover - compiled
    """Rows stably sorted by group (counting sort), and each group's slice bounds."""
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
    return order, offsets


@numba.njit(cache=True)
def _packed_keys(group, time, order, offsets, t_min, time_bits, pos_bits):  # pragma: no cover
    """Per position p of ``order``: group, time offset and position within the group, packed."""
    keys = np.empty(order.shape[0], np.uint64)
    for p in range(order.shape[0]):
        row = order[p]
        g = group[row]
        keys[p] = (
            (np.uint64(g) << np.uint64(time_bits + pos_bits))
            | (np.uint64(time[row] - t_min) << np.uint64(pos_bits))
            | np.uint64(p - offsets[g])
        )
    return keys


@numba.njit(cache=True)
def _unpack_order(keys, order, offsets, time_bits, pos_bits):  # pragma: no cover - compiled
    """The rows in the order of the sorted ``keys``."""
    shift = np.uint64(time_bits + pos_bits)
    mask = (np.uint64(1) << np.uint64(pos_bits)) - np.uint64(1)
    out = np.empty(keys.shape[0], np.int64)
    for p in range(keys.shape[0]):
        out[p] = order[offsets[np.int64(keys[p] >> shift)] + np.int64(keys[p] & mask)]
    return out


@numba.njit(cache=True)
def _sort_groups_by_time(order, offsets, time):  # pragma: no cover - compiled
    """Sort each group's slice of ``order`` by time, in place (when keys do not fit 64 bits)."""
    for g in range(offsets.shape[0] - 1):
        _sort_run(order, offsets[g], offsets[g + 1], time)


@numba.njit(cache=True, inline="always")
def _run_stop(order, run, end, time, by_time):  # pragma: no cover - compiled
    """Where the run of rows that cannot be told apart starting at ``run`` ends: the rows of equal
    time (the whole rest of the group without time)."""
    if not by_time:
        return end
    stop = run + 1
    while stop < end and time[order[stop]] == time[order[run]]:
        stop += 1
    return stop


@numba.njit(cache=True)
def _order_runs_and_rank(order, offsets, time, by_time, draws, keyed):  # pragma: no cover - compiled
    """Order every run of equal time (the whole group without time) in ``order``: a Fisher-Yates
    shuffle driven by uniform ``draws``, or (``keyed``) a sort by ``draws`` as the rows' keys; then
    the rank of every row within its group."""
    rank = np.empty(order.shape[0], np.int64)
    for g in range(offsets.shape[0] - 1):
        start, end = offsets[g], offsets[g + 1]
        run = start
        while run < end:
            stop = _run_stop(order, run, end, time, by_time)
            if keyed:
                _sort_run(order, run, stop, draws)
            else:
                _shuffle_run(order, run, stop, draws)
            run = stop
        for p in range(start, end):
            rank[order[p]] = p - start
    return rank


@numba.njit(cache=True, inline="always")
def _shuffle_run(order, run, stop, u01):  # pragma: no cover - compiled
    """Fisher-Yates shuffle of ``order[run:stop]``, one uniform number per position."""
    for p in range(stop - 1, run, -1):
        j = run + int(u01[p] * (p - run + 1))
        if j > p:
            j = p
        order[p], order[j] = order[j], order[p]


@numba.njit(cache=True, inline="always")
def _sort_run(order, run, stop, keys):  # pragma: no cover - compiled
    """``order[run:stop]`` sorted by its rows' keys (equal keys keep their order), compared in
    their own type (int64 times may exceed float64's 2**53)."""
    if stop - run < 2:
        return
    run_keys = np.empty(stop - run, keys.dtype)
    for p in range(stop - run):
        run_keys[p] = keys[order[run + p]]
    by_key = stable_argsort(run_keys)
    segment = order[run:stop].copy()
    for p in range(stop - run):
        order[run + p] = segment[by_key[p]]


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
    groups = _checked_groups(groups, n_groups)
    return _rank_runs(groups, n_groups, times, rng.random(len(groups)), keyed=False)


def keyed_rank_within(groups: np.ndarray, n_groups: int, keys: np.ndarray,
                      times: np.ndarray | None = None) -> np.ndarray:
    """0-based rank of every row within its group: by ``keys`` (uint64), or by ``times`` with rows
    of equal time by ``keys``. Rows of equal key (a 2^-64 chance for two distinct rows) keep their
    order."""
    groups = _checked_groups(groups, n_groups)
    keys = _read_only(np.ascontiguousarray(keys, dtype=np.uint64))
    return _rank_runs(groups, n_groups, times, keys, keyed=True)


def _checked_groups(groups: np.ndarray, n_groups: int) -> np.ndarray:
    groups = _read_only(np.ascontiguousarray(groups, dtype=np.int32))
    if len(groups) and (groups.min() < 0 or groups.max() >= n_groups):  # the kernels trust them
        raise ValueError(f"groups must lie in 0..{n_groups - 1}")
    return groups


def _rank_runs(groups, n_groups, times, draws, keyed: bool) -> np.ndarray:
    """The rows ordered by group (and by time within it), then every run of rows that cannot be
    told apart ordered with ``draws`` (uniform numbers, or keys when ``keyed``) and ranked."""
    order, offsets = _group_order(groups, int(n_groups))
    if times is None:
        return _order_runs_and_rank(order, offsets, _read_only(np.zeros(0, np.int64)), False, draws, keyed)
    time = _read_only(np.ascontiguousarray(times, dtype=np.int64))
    if len(time):
        order = _sorted_by_time(groups, n_groups, time, order, offsets)
    return _order_runs_and_rank(order, offsets, time, True, draws, keyed)


def _read_only(values: np.ndarray) -> np.ndarray:
    """A read-only view of ``values``: numba compiles a kernel once per argument writability, and
    polars' zero-copy columns are read-only while cached or computed arrays are not."""
    view = values.view()
    view.flags.writeable = False
    return view


def _sorted_by_time(groups, n_groups, time, order, offsets) -> np.ndarray:
    """``order`` re-sorted by time within each group (ties left in group order)."""
    t_min = int(time.min())
    time_bits = (int(time.max()) - t_min).bit_length()
    pos_bits = int(np.diff(offsets).max()).bit_length()
    group_bits = max(int(n_groups) - 1, 0).bit_length()
    if group_bits + time_bits + pos_bits <= 64:
        keys = _packed_keys(groups, time, order, offsets, np.int64(t_min), time_bits, pos_bits)
        keys.sort()
        return _unpack_order(keys, order, offsets, time_bits, pos_bits)
    _sort_groups_by_time(order, offsets, time)
    return order


def keyed_rank(keys: np.ndarray, *ties: np.ndarray) -> np.ndarray:
    """0-based rank of every entry in the order of its uint64 ``keys``, entries of equal key (a
    2^-64 chance for two) in the order of ``ties`` (arrays compared in turn, e.g. the user then the
    item index, which number raw ids in their sorted order), so the order is total and does not
    depend on the entries' positions."""
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    if len(ties) and np.any(ordered[1:] == ordered[:-1]):
        order = np.lexsort((*reversed(ties), keys))
    rank = np.empty(len(keys), np.int64)
    rank[order] = np.arange(len(keys))
    return rank


def keyed_first(keys: np.ndarray, size: int, *ties: np.ndarray) -> np.ndarray:
    """Bool per entry: the ``size`` first entries in :func:`keyed_rank`'s order (by key, equal keys
    by ``ties``), found in O(n) by the key at place ``size - 1`` (``np.partition``), without the
    full sort."""
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    chosen = np.zeros(len(keys), dtype=bool)
    if size <= 0:
        return chosen
    if size >= len(keys):
        return ~chosen
    cut = np.partition(keys, size - 1)[size - 1]
    chosen = keys < cut
    at_cut = np.flatnonzero(keys == cut)  # one entry, but for equal keys
    need = size - int(np.count_nonzero(chosen))
    if len(at_cut) > need:
        at_cut = at_cut[np.lexsort(tuple(t[at_cut] for t in reversed(ties)))] if ties else at_cut
    chosen[at_cut[:need]] = True
    return chosen


def random_rank(n: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random permutation of 0..n-1: the rank of every row in one random order."""
    return rank_within(np.zeros(n, np.int32), 1, rng)
