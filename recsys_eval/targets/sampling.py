"""Seeded sampling of non-relevant items without replacement, and the kernel that fills the units.

Randomness is counter-based: every random number is a splitmix64 hash of ``(seed, user, stream key,
counter)``, where the stream key is -1 for a user's shared sample and the relevant item for a fresh
per-unit sample (1R). A unit's targets therefore depend only on the seed and the user's own data,
never on the order or the chunk in which users are processed.

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

import numpy as np
from numba import njit, prange

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_KEY_DOMAIN = np.uint64(0xD1B54A32D192ED03)  # separates the explicit keys from the draw stream
_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53
_MIN_BLOCK = 1024  # users per parallel task, at the least (each task has O(items) scratch)


@njit(cache=True, inline="always")
def _mix(x):
    """splitmix64 finaliser: a bijective, well-mixed hash of a uint64."""
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


@njit(cache=True, inline="always")
def stream_state(seed, user, key):
    """The random stream of (seed, user, key): key -1 for a shared sample, else an item index."""
    state = _mix(np.uint64(seed) + _GOLDEN)
    state = _mix(state ^ np.uint64(user))
    return _mix(state ^ np.uint64(key + 1))


@njit(cache=True, inline="always")
def uniform(state, counter):
    """The counter-th uniform number of a stream, in the open interval (0, 1)."""
    x = _mix(np.uint64(state) + np.uint64(counter + 1) * _GOLDEN)
    return (np.float64(x >> np.uint64(11)) + 0.5) * _TO_UNIT



@njit(cache=True)
def _insertion_sort(a, n):
    for i in range(1, n):
        x = a[i]
        j = i - 1
        while j >= 0 and a[j] > x:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = x


@njit(cache=True)
def sort_items(a, n, bits, tmp, count):
    """Sort ``a[:n]`` (non-negative ints below ``2**bits``) in place: LSD radix sort by bytes.

    A short sample is otherwise sorted with a comparison sort that mispredicts on every other
    branch; radix passes are branch-free and several times faster at n = 100.
    """
    if n < 24:
        _insertion_sort(a, n)
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
        a[:n] = tmp[:n]


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


@njit(cache=True, inline="always")
def _draw(state, counter, size, weighted, prob, alias):
    """A pool position: uniform, or by the alias table (the fraction of the scaled draw is the coin)."""
    x = uniform(state, counter) * size
    idx = np.int64(x)
    if idx >= size:
        idx = size - 1
    if weighted and x - idx >= prob[idx]:
        idx = alias[idx]
    return idx


@njit(cache=True)
def _smallest_keys(state, candidates, n_candidates, r, weighted, weight, keys, out, start):
    """Write to ``out[start:start + r]`` the ``r`` candidates of smallest key -log(U)/w."""
    for p in range(n_candidates):
        item = candidates[p]
        w = weight[item] if weighted else 1.0
        keys[p] = -np.log(uniform(state ^ _KEY_DOMAIN, item)) / w
    order = np.argsort(keys[:n_candidates])
    for p in range(r):
        out[start + p] = candidates[order[p]]


@njit(cache=True)
def _sample_pool(state, m, a, pool_items, weighted, prob, alias, weight, mark, scratch, keys, out,
                 bits, tmp, count):
    """Write ``m`` items drawn without replacement from the unmarked pool items (``a`` of them),
    ascending, into ``out[:m]``. ``mark`` flags the user's excluded items and is left as found."""
    if m == a:
        count = 0
        for item in pool_items:
            if mark[item] == 0:
                out[count] = item
                count += 1
        return
    size = len(pool_items)
    budget = 2 * m + size // 4 + 16
    kept = 0
    draw = 0
    while kept < m and draw < budget:
        item = pool_items[_draw(state, draw, size, weighted, prob, alias)]
        draw += 1
        if mark[item] == 0:
            mark[item] = 2
            out[kept] = item
            kept += 1
    if kept < m:  # heavy exclusions: finish the same successive sample by exponential keys
        n = 0
        for item in pool_items:
            if mark[item] == 0:
                scratch[n] = item
                n += 1
        _smallest_keys(state, scratch, n, m - kept, weighted, weight, keys, out, kept)
    for p in range(kept):
        mark[out[p]] = 0
    sort_items(out, m, bits, tmp, count)


@njit(cache=True)
def _sample_user_tests(state, m, start, stop, te_items, te_gain, weighted, weight, scratch, keys, out,
                       bits, tmp, count):
    """UT: write ``m`` of the user's non-relevant test items (positive weight when weighted),
    drawn without replacement, ascending, into ``out[:m]``."""
    n = 0
    for p in range(start, stop):
        item = te_items[p]
        if te_gain[p] == 0 and (not weighted or weight[item] > 0):
            scratch[n] = item
            n += 1
    if m == n:
        out[:m] = scratch[:m]
        return
    _smallest_keys(state, scratch, n, m, weighted, weight, keys, out, 0)
    sort_items(out, m, bits, tmp, count)


@njit(cache=True, inline="always")
def _write_unit(dst, out_items, out_gain, rel_items, rel_gain, start, stop, sample, m):
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
def _sample(state, m, a, user_tests, start, stop, te_items, te_gain, pool_items, weighted, prob,
            alias, weight, mark, scratch, keys, out, bits, tmp, count):
    """``m`` non-relevant items of the user, ascending, into ``out[:m]`` (UT or a global pool)."""
    if m == 0:
        return
    if user_tests:
        _sample_user_tests(state, m, start, stop, te_items, te_gain, weighted, weight, scratch, keys,
                           out, bits, tmp, count)
    else:
        _sample_pool(state, m, a, pool_items, weighted, prob, alias, weight, mark, scratch, keys, out,
                     bits, tmp, count)


@njit(cache=True, parallel=True)
def fill_units(
    users, first_unit, m_per_user, avail, one_relevant, fresh, user_tests, seed,
    pool_items, weighted, prob, alias, weight, tr_ptr, tr_idx, te_ptr, te_items, te_gain,
    unit_offsets, out_items, out_gain, max_m, scratch_size, n_tasks, negatives_only,
):
    """Fill the listed target sets of the units of ``users``, in ``n_tasks`` parallel tasks.

    AR: one unit per user, Rel(u) plus the sample. 1R: one unit per relevant item (in item order),
    that item plus the user's shared sample, or a fresh sample per unit when ``fresh``.
    ``negatives_only``: the same lists without their relevant items (the same samples).
    Blocks of users run in parallel threads; a unit's items depend only on its user, so the
    result is the same whatever the number of threads.
    """
    n_tasks = max(1, min(n_tasks, (len(users) + _MIN_BLOCK - 1) // _MIN_BLOCK))
    size = (len(users) + n_tasks - 1) // n_tasks
    for b in prange(n_tasks):
        _fill_block(
            b * size, min((b + 1) * size, len(users)), users, first_unit, m_per_user, avail,
            one_relevant, fresh, user_tests, seed, pool_items, weighted, prob, alias, weight,
            tr_ptr, tr_idx, te_ptr, te_items, te_gain, unit_offsets, out_items, out_gain, max_m,
            scratch_size, negatives_only,
        )


@njit(cache=True)
def _fill_block(
    lo, hi, users, first_unit, m_per_user, avail, one_relevant, fresh, user_tests, seed,
    pool_items, weighted, prob, alias, weight, tr_ptr, tr_idx, te_ptr, te_items, te_gain,
    unit_offsets, out_items, out_gain, max_m, scratch_size, negatives_only,
):
    """The units of ``users[lo:hi]``, with scratch buffers of their own."""
    mark = np.zeros(len(weight), dtype=np.int8)
    scratch = np.empty(scratch_size, dtype=np.int32)
    keys = np.empty(scratch_size, dtype=np.float64)
    sample = np.empty(max_m + 1, dtype=np.int32)
    tmp = np.empty(max_m + 1, dtype=np.int32)
    count = np.zeros(257, dtype=np.int64)
    bits = 1
    while (1 << bits) < len(weight):
        bits += 1
    for j in range(lo, hi):
        u = users[j]
        m = m_per_user[j]
        a = avail[j]
        start, stop = te_ptr[u], te_ptr[u + 1]
        if not user_tests:  # exclude Tr(u) and Rel(u) from the pool
            for t in range(tr_ptr[u], tr_ptr[u + 1]):
                mark[tr_idx[t]] = 1
            for p in range(start, stop):
                if te_gain[p] > 0:
                    mark[te_items[p]] = 1
        if not (one_relevant and fresh):
            _sample(stream_state(seed, u, -1), m, a, user_tests, start, stop, te_items, te_gain,
                    pool_items, weighted, prob, alias, weight, mark, scratch, keys, sample, bits, tmp,
                    count)
        if not one_relevant:
            _write_unit(unit_offsets[first_unit[j]], out_items, out_gain, te_items, te_gain, start,
                        start if negatives_only else stop, sample, m)
        else:
            unit = first_unit[j]
            for p in range(start, stop):
                if te_gain[p] <= 0:
                    continue
                if fresh:
                    _sample(stream_state(seed, u, te_items[p]), m, a, user_tests, start, stop,
                            te_items, te_gain, pool_items, weighted, prob, alias, weight, mark,
                            scratch, keys, sample, bits, tmp, count)
                _write_unit(unit_offsets[unit], out_items, out_gain, te_items, te_gain, p,
                            p if negatives_only else p + 1, sample, m)
                unit += 1
        if not user_tests:
            for t in range(tr_ptr[u], tr_ptr[u + 1]):
                mark[tr_idx[t]] = 0
            for p in range(start, stop):
                mark[te_items[p]] = 0
