"""Seeded sampling of non-relevant items without replacement, and the kernel that fills the units.

Randomness is counter-based: every random number is a splitmix64 hash of ``(seed, user, stream key,
counter)``, where the stream key is -1 for a user's shared sample and the relevant item for a fresh
per-unit sample (1R). A unit's targets therefore depend only on the seed and the user's own data,
never on the order or the chunk in which users are processed. The ``user`` of the hash is the
user's index in the fold (:attr:`Plan.keys`): the same number as the index the user's rows are
read at, except in a Spark task, which numbers its users from 0 (recsys_eval.engine.targets).

Sampling ``m`` items from A(u) = pool \\ Tr(u) \\ Rel(u), without replacement:

- ``m == |A(u)|``: every available item (no randomness).
- Otherwise draw pool items (uniformly, or in proportion to their weight by an alias table) and
  reject the user's training items, relevant items and repeats, keeping the first ``m`` accepted:
  successive sampling, i.e. each kept item is a uniform (weight-proportional) draw from what is
  still available. Heavy users whose exclusions cover most of the pool would reject too often, so
  after a budget of draws the rest of the sample is taken by exponential keys ``-log(U) / w`` over
  the remaining available items (the ``m - kept`` smallest keys), which continues the same
  successive sampling exactly.

The user's exclusions are flagged in a byte array over items while its units are filled (set and
cleared in O(|Tr(u)| + |Te(u)|)), so a draw costs O(1): a hash, an alias-table lookup when weighted,
and one flag test; the sample is then radix-sorted. Cost per user: O(|Tr(u)| + |Te(u)| + m)
expected, O(|pool|) more for the rare heavy user. Blocks of users run in parallel, each task with
O(items) scratch memory, whatever the number of users.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from recsys_eval.core.chunks import run_chunks
from recsys_eval.core.rng import splitmix64
from recsys_eval.core.sorting import sort_items, stable_argsort

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_KEY_DOMAIN = np.uint64(0xD1B54A32D192ED03)  # separates the explicit keys from the draw stream
_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53
_MIN_BLOCK = 1024  # users per parallel task, at the least (each task has O(items) scratch)


@njit(cache=True)
def stream_state(seed, user, key):
    """The random stream of (seed, user, key): key -1 for a shared sample, else an item index."""
    state = splitmix64(np.uint64(seed) + _GOLDEN)
    state = splitmix64(state ^ np.uint64(user))
    return splitmix64(state ^ np.uint64(key + 1))


@njit(cache=True)
def uniform(state, counter):
    """The counter-th uniform number of a stream, in the open interval (0, 1)."""
    x = splitmix64(np.uint64(state) + np.uint64(counter + 1) * _GOLDEN)
    return (np.float64(x >> np.uint64(11)) + 0.5) * _TO_UNIT


@njit(cache=True)
def alias_table(weights):
    """Walker/Vose alias table of ``weights`` (all > 0): ``(prob, alias)`` for O(1) weighted draws."""
    size = len(weights)
    scaled = weights * (size / weights.sum())
    prob = np.ones(size, dtype=np.float64)
    alias = np.arange(size, dtype=np.int64)
    small = np.empty(size, dtype=np.int64)
    large = np.empty(size, dtype=np.int64)
    n_small = 0
    n_large = 0
    for i in range(size):
        if scaled[i] < 1.0:
            small[n_small] = i
            n_small += 1
        else:
            large[n_large] = i
            n_large += 1
    while n_small > 0 and n_large > 0:
        n_small -= 1
        lo = small[n_small]
        hi = large[n_large - 1]
        prob[lo] = scaled[lo]
        alias[lo] = hi
        scaled[hi] = (scaled[hi] + scaled[lo]) - 1.0
        if scaled[hi] < 1.0:
            n_large -= 1
            small[n_small] = hi
            n_small += 1
    return prob, alias


@njit(cache=True)
def _draw(state, counter, size, weighted, prob, alias):
    """A pool position: uniform, or by the alias table (the fraction of the scaled draw is the coin)."""
    x = uniform(state, counter) * size
    idx = np.int64(x)
    if idx >= size:
        idx = size - 1
    if weighted and x - idx >= prob[idx]:
        idx = alias[idx]
    return idx


class Pool(NamedTuple):
    """The items non-relevant targets are drawn from: ``items`` (ascending), drawn uniformly or,
    when ``weighted``, in proportion to ``weight`` (over every item) through the alias table
    ``prob``/``alias`` (:func:`alias_table`)."""

    items: np.ndarray
    weighted: bool
    prob: np.ndarray
    alias: np.ndarray
    weight: np.ndarray


class UserItems(NamedTuple):
    """Each user's train items (CSR ``tr_ptr``/``tr_idx``) and judged test items with their gains
    (CSR ``te_ptr``/``te_items``/``te_gain``, items ascending; gain > 0 is relevant)."""

    tr_ptr: np.ndarray
    tr_idx: np.ndarray
    te_ptr: np.ndarray
    te_items: np.ndarray
    te_gain: np.ndarray


class Design(NamedTuple):
    """What a unit is: ``one_relevant`` (1R, else AR), ``fresh`` (a new sample per 1R unit, else the
    user's shared one), ``user_tests`` (UT: sample the user's own non-relevant test items, else the
    pool), ``negatives_only`` (the lists without their relevant items), and the stream ``seed``."""

    one_relevant: bool
    fresh: bool
    user_tests: bool
    negatives_only: bool
    seed: np.uint64


class Plan(NamedTuple):
    """Where each of ``users`` (the indices its rows are read at) writes: the key of its random
    streams ``keys`` (its index in the fold: ``users`` itself, unless the users are some of a
    fold's numbered from 0), its first unit, its sample size ``m_per_user``, the number of items
    available to its sample ``avail``, and the output's unit offsets."""

    users: np.ndarray
    keys: np.ndarray
    first_unit: np.ndarray
    m_per_user: np.ndarray
    avail: np.ndarray
    unit_offsets: np.ndarray


class _Scratch(NamedTuple):
    """One task's buffers: exclusion flags over items, candidates and their keys, the sample, and
    the radix sort's buffer, byte counts and bit width."""

    mark: np.ndarray
    candidates: np.ndarray
    keys: np.ndarray
    sample: np.ndarray
    tmp: np.ndarray
    count: np.ndarray
    bits: int


@njit(cache=True)
def _smallest_keys(state, candidates, n_candidates, r, pool, keys, out, start):
    """Write to ``out[start:start + r]`` the ``r`` candidates of smallest key -log(U)/w."""
    for p in range(n_candidates):
        item = candidates[p]
        w = pool.weight[item] if pool.weighted else 1.0
        # int64 counters and keys everywhere (not int32 items, not literals): one compile each
        keys[p] = -np.log(uniform(state ^ _KEY_DOMAIN, np.int64(item))) / w
    order = stable_argsort(keys[:n_candidates])
    for p in range(r):
        out[start + p] = candidates[order[p]]


@njit(cache=True)
def _sample_pool(state, m, a, pool, work):
    """Write ``m`` items drawn without replacement from the unmarked pool items (``a`` of them),
    ascending, into ``work.sample[:m]``. ``work.mark`` flags the user's excluded items and is left
    as found."""
    mark, out = work.mark, work.sample
    if m == a:
        count = 0
        for item in pool.items:
            if mark[item] == 0:
                out[count] = item
                count += 1
        return
    size = len(pool.items)
    budget = 2 * m + size // 4 + 16
    kept = np.int64(0)  # not 0: a Literal[int](0) would compile _smallest_keys once more
    draw = np.int64(0)
    while kept < m and draw < budget:
        item = pool.items[_draw(state, draw, size, pool.weighted, pool.prob, pool.alias)]
        draw += 1
        if mark[item] == 0:
            mark[item] = 2
            out[kept] = item
            kept += 1
    if kept < m:  # heavy exclusions: finish the same successive sample by exponential keys
        n = np.int64(0)
        for item in pool.items:
            if mark[item] == 0:
                work.candidates[n] = item
                n += 1
        _smallest_keys(state, work.candidates, n, m - kept, pool, work.keys, out, kept)
    for p in range(kept):
        mark[out[p]] = 0
    sort_items(out, m, work.bits, work.tmp, work.count)


@njit(cache=True)
def _sample_user_tests(state, m, start, stop, data, pool, work):
    """UT: write ``m`` of the user's non-relevant test items (positive weight when weighted),
    drawn without replacement, ascending, into ``work.sample[:m]``."""
    n = np.int64(0)
    for p in range(start, stop):
        item = data.te_items[p]
        if data.te_gain[p] == 0 and (not pool.weighted or pool.weight[item] > 0):
            work.candidates[n] = item
            n += 1
    if m == n:
        for p in range(m):  # a loop: slice assignment compiles numba's shape-error message
            work.sample[p] = work.candidates[p]
        return
    _smallest_keys(state, work.candidates, n, m, pool, work.keys, work.sample, np.int64(0))
    sort_items(work.sample, m, work.bits, work.tmp, work.count)


@njit(cache=True)
def write_unit(dst, out_items, out_gain, rel_items, rel_gain, start, stop, sample, m):
    """Merge the relevant items of ``rel_items[start:stop]`` (gain > 0; others skipped) and the
    sorted sample (gain 0) into the output from position ``dst``."""
    i = start
    j = 0
    while True:
        while i < stop and rel_gain[i] <= 0:
            i += 1
        if i >= stop and j >= m:
            return
        if j >= m or (i < stop and rel_items[i] < sample[j]):
            out_items[dst] = rel_items[i]
            out_gain[dst] = rel_gain[i]
            i += 1
        else:
            out_items[dst] = sample[j]
            out_gain[dst] = 0.0
            j += 1
        dst += 1


@njit(cache=True)
def _sample(state, m, a, start, stop, design, pool, data, work):
    """``m`` non-relevant items of the user, ascending, into ``work.sample[:m]`` (UT or the pool)."""
    if m == 0:
        return
    if design.user_tests:
        _sample_user_tests(state, m, start, stop, data, pool, work)
    else:
        _sample_pool(state, m, a, pool, work)


def fill_units(plan, design, pool, data, out_items, out_gain, max_m, scratch_size, n_tasks):
    """Fill the listed target sets of the units of ``plan.users`` (:class:`Plan`, :class:`Design`,
    :class:`Pool`, :class:`UserItems`) into ``out_items``/``out_gain``, in ``n_tasks`` parallel tasks.

    AR: one unit per user, Rel(u) plus the sample. 1R: one unit per relevant item (in item order),
    that item plus the user's shared sample, or a fresh sample per unit when ``design.fresh``.
    ``design.negatives_only``: the same lists without their relevant items (the same samples).
    Blocks of users run in parallel threads; a unit's items depend only on its user, so the
    result is the same whatever the number of threads.
    """
    n_users = len(plan.users)
    n_tasks = max(1, min(n_tasks, (n_users + _MIN_BLOCK - 1) // _MIN_BLOCK))
    size = (n_users + n_tasks - 1) // n_tasks
    bounds = np.minimum(np.arange(n_tasks + 1, dtype=np.int64) * size, n_users)
    run_chunks(_fill_block, bounds, plan, design, pool, data, out_items, out_gain, max_m, scratch_size)


@njit(cache=True, nogil=True)
def _fill_block(lo, hi, plan, design, pool, data, out_items, out_gain, max_m, scratch_size):
    """The units of ``plan.users[lo:hi]``, with scratch buffers of their own."""
    n_items = len(pool.weight)
    bits = 1
    while (1 << bits) < n_items:
        bits += 1
    work = _Scratch(
        np.zeros(n_items, dtype=np.int8), np.empty(scratch_size, dtype=np.int32),
        np.empty(scratch_size, dtype=np.float64), np.empty(max_m + 1, dtype=np.int32),
        np.empty(max_m + 1, dtype=np.int32), np.zeros(257, dtype=np.int64), bits,
    )
    mark, sample = work.mark, work.sample
    te_items, te_gain = data.te_items, data.te_gain
    seed, one_relevant, negatives_only = design.seed, design.one_relevant, design.negatives_only
    for j in range(lo, hi):
        u = plan.users[j]
        key = plan.keys[j]
        m = plan.m_per_user[j]
        a = plan.avail[j]
        start, stop = data.te_ptr[u], data.te_ptr[u + 1]
        if not design.user_tests:  # exclude Tr(u) and Rel(u) from the pool
            for t in range(data.tr_ptr[u], data.tr_ptr[u + 1]):
                mark[data.tr_idx[t]] = 1
            for p in range(start, stop):
                if te_gain[p] > 0:
                    mark[te_items[p]] = 1
        if not (one_relevant and design.fresh):
            _sample(stream_state(seed, key, np.int64(-1)), m, a, start, stop, design, pool, data, work)
        if not one_relevant:
            write_unit(plan.unit_offsets[plan.first_unit[j]], out_items, out_gain, te_items, te_gain,
                        start, start if negatives_only else stop, sample, m)
        else:
            unit = plan.first_unit[j]
            for p in range(start, stop):
                if te_gain[p] <= 0:
                    continue
                if design.fresh:
                    _sample(stream_state(seed, key, np.int64(te_items[p])), m, a, start, stop, design, pool, data,
                            work)
                write_unit(plan.unit_offsets[unit], out_items, out_gain, te_items, te_gain, p,
                            p if negatives_only else p + 1, sample, m)
                unit += 1
        if not design.user_tests:
            for t in range(data.tr_ptr[u], data.tr_ptr[u + 1]):
                mark[data.tr_idx[t]] = 0
            for p in range(start, stop):
                mark[te_items[p]] = 0
