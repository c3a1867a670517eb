"""Numba kernels: every ranking metric at every cutoff, in one pass over each unit's ranking.

The kernels work on the CSR arrays of :class:`~recsys_eval.core.units.Rankings` and
:class:`~recsys_eval.core.units.Targets` (docs/CONVENTIONS.md#ties). Units are split into chunks
run in parallel; each chunk keeps one item-indexed tag array stamped with the unit number, so that
marking a unit's targets and looking up a ranked item are O(1), one memory access, with no reset
between units, and small buffers every unit of the chunk reuses (no allocation per unit).

Ties. A ranking is walked in *score groups* (maximal runs of equal scores, from ``tied``). AUC always
counts a tied (relevant, non-relevant) pair one half. The other metrics walk *blocks*: single
positions (``ties="first"``), or whole score groups (``ties="average"``), where every metric is the
expectation over all orderings of the block (McSherry & Najork 2008), exactly:
a block of n items holding r relevant items with gain sum G, after ``h`` relevant items, gives
position t (0-based in the block, rank i overall) the expected gain G/n and expected hits
h + (t+1) r/n; AP gains E[rel_i hits_i]/i = ((r/n)(h+1) + t r(r-1)/(n(n-1)))/i; when h = 0 the
first relevant item sits at offset t with probability C(n-1-t, r-1)/C(n, r), which gives RR and hit.
With n = 1 these reduce to the deterministic formulas.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numba import njit, types

from recsys_eval.core.chunks import run_chunks
from recsys_eval.core.sorting import insertion_sort, stable_argsort
from recsys_eval.measure.metrics import KERNEL_CUTOFF_SLOTS, METRICS

GAIN_CODES = {"graded": 0, "binary": 1, "exp": 2}

#: Status codes a kernel reports per unit (0: fine).
DUPLICATE_ITEM, TOO_MANY_NON_RELEVANT = 1, 2


class RankingArrays(NamedTuple):
    """A Rankings' CSR arrays: ``offsets[int64]``, ``items[int32]``, and ``tied[bool]`` (a
    position's score equals the previous one's in the same unit)."""

    offsets: np.ndarray
    items: np.ndarray
    tied: np.ndarray


class TargetArrays(NamedTuple):
    """A Targets' CSR arrays (``gain[float32]``, 0 for non-relevant) and, under full ranking
    (``all_candidates``), every unit's candidate count (an empty array otherwise)."""

    offsets: np.ndarray
    items: np.ndarray
    gain: np.ndarray
    n_candidates: np.ndarray
    all_candidates: bool


class Options(NamedTuple):
    """The metric options: ``cutoffs`` ascending, the nDCG gain code (:data:`GAIN_CODES`), AP over
    min(R, k), half-life h and neutral gain d, expected values over tied blocks, and whether the
    nDCG and half-life ideals are needed."""

    cutoffs: np.ndarray
    gain_mode: int
    ap_min_rk: bool
    half_life: float
    neutral: float
    average_ties: bool
    want_ndcg: bool
    want_hl: bool


class Slots(NamedTuple):
    """Each ranking metric's slot in the output matrix (from the metric registry); passed as an
    argument rather than read as globals so that a compiled kernel in numba's cache never keeps
    an old layout."""

    precision: int
    recall: int
    f1: int
    ap: int
    ndcg: int
    rr: int
    hit: int
    half_life: int
    auc: int
    n_cutoff_slots: int


SLOTS = Slots(*(METRICS[name].slot for name in Slots._fields[:-1]), KERNEL_CUTOFF_SLOTS)


#: A tag packs (unit << 32) | (target index + 1) << 1 | listed: the unit that last touched the item,
#: the item's index in that unit's target list plus one (0: not a target), and whether that unit's
#: ranking has listed it yet (duplicates). One int64 per item, so that a ranked item costs one
#: random memory access, where three arrays (stamp, seen, gain) cost three.
_UNIT_SHIFT = 32
_INDEX_MASK = (1 << 31) - 1
#: Ideal gains up to this many are sorted by insertion.
_INSERTION_SORT_MAX = 64


class _Scratch(NamedTuple):
    """A chunk's scratch: the item-indexed tags and the buffers every unit of the chunk reuses."""

    tag: np.ndarray  # int64 per item, packed as above
    gain: np.ndarray  # per ranked position, the item's target gain (0 if not a target)
    ideal: np.ndarray  # the gains an ideal ranking sorts (as long as the chunk's largest target set)
    idcg: np.ndarray  # per cutoff, the ideal DCG
    hl_max: np.ndarray  # per cutoff, the best half-life utility
    row: np.ndarray  # the unit's values at every kernel column, before the output keeps some


@njit(cache=True)
def _transformed_gain(g: float, mode: int) -> float:
    if g <= 0.0:
        return 0.0
    if mode == 1:
        return 1.0
    if mode == 2:
        return 2.0**g - 1.0
    return g


@njit(cache=True)
def _ideal_at_cutoffs(values, weights, cutoffs, out):
    """out[c] = sum of the largest values, best first, times weights, over the top cutoffs[c].
    Sorts ``values`` (a scratch buffer) in place: by insertion when short, as a unit's relevant
    items mostly are (no call, no buffer)."""
    if len(values) <= _INSERTION_SORT_MAX:
        insertion_sort(values, len(values))
    else:  # copied in loops: fancy indexing and slice assignment compile much more code
        order = stable_argsort(values)
        ordered = np.empty(len(values))
        for i in range(len(values)):
            ordered[i] = values[order[i]]
        for i in range(len(values)):
            values[i] = ordered[i]
    last = len(values) - 1
    total = 0.0
    c = 0
    n_cut = len(cutoffs)
    for i in range(len(values)):
        while c < n_cut and cutoffs[c] <= i:
            out[c] = total
            c += 1
        if c == n_cut:
            return
        total += values[last - i] * weights[i]
    while c < n_cut:
        out[c] = total
        c += 1


@njit(cache=True)
def _score_unit(u, rankings, targets, options, slots, discount, decay, scratch, status):
    """Write unit ``u``'s values at every kernel column into ``scratch.row`` (NaN where undefined)
    and its status."""
    cutoffs = options.cutoffs
    n_cut = len(cutoffs)
    kmax = cutoffs[n_cut - 1]
    rs, re_ = rankings.offsets[u], rankings.offsets[u + 1]
    ts, te = targets.offsets[u], targets.offsets[u + 1]
    all_candidates = targets.all_candidates
    n_target = targets.n_candidates[u] if all_candidates else te - ts
    r_items, t_items, t_gain = rankings.items, targets.items, targets.gain
    tag, pos_gain, row = scratch.tag, scratch.gain, scratch.row
    idcg, hl_max = scratch.idcg, scratch.hl_max
    gain_mode, neutral, want_hl = options.gain_mode, options.neutral, options.want_hl
    row[:] = np.nan
    unit_tag = u << _UNIT_SHIFT
    # Mark the unit's targets; count its relevant items.
    # Counters passed to kernels start as np.int64(0), not 0: numba types a literal 0 as
    # Literal[int](0) while it infers the loop and compiles the callee once more for it.
    n_rel = np.int64(0)
    for j in range(ts, te):
        tag[t_items[j]] = unit_tag | ((j - ts + 1) << 1)
        if t_gain[j] > 0.0:
            n_rel += 1
    n_non = n_target - n_rel
    idcg[:] = 0.0
    hl_max[:] = 0.0
    if n_rel > 0 and options.want_ndcg:
        m = 0
        for j in range(ts, te):
            if t_gain[j] > 0.0:
                scratch.ideal[m] = _transformed_gain(t_gain[j], gain_mode)
                m += 1
        _ideal_at_cutoffs(scratch.ideal[:m], discount, cutoffs, idcg)
    if want_hl:
        for j in range(ts, te):
            scratch.ideal[j - ts] = max(t_gain[j] - neutral, 0.0)
        _ideal_at_cutoffs(scratch.ideal[: te - ts], decay, cutoffs, hl_max)

    length = re_ - rs
    hits = 0.0  # relevant items in the blocks walked so far (exact: blocks are whole)
    found = 0.0  # probability that a relevant item was met so far (hit)
    rr = 0.0
    ap = 0.0
    dcg = 0.0
    hl = 0.0
    c = np.int64(0)
    rel_ranked = 0  # AUC: relevant and non-relevant target items met so far
    non_ranked = 0
    correct = 0.0  # AUC: (relevant, non-relevant) pairs ordered right, ties one half
    p = 0
    while p < length:
        q = p + 1
        while q < length and rankings.tied[rs + q]:
            q += 1
        group_rel = 0
        group_non = 0
        for j in range(rs + p, rs + q):
            item = r_items[j]
            w = tag[item]
            g = 0.0  # a ranked item that is not a target counts as gain 0 in every block sum
            if w >> _UNIT_SHIFT == u:
                if w & 1:
                    status[u] = DUPLICATE_ITEM
                tag[item] = w | 1
                index = (w >> 1) & _INDEX_MASK
                if index > 0:
                    g = t_gain[ts + index - 1]
                    if g > 0.0:
                        group_rel += 1
                    else:
                        group_non += 1
                elif all_candidates:
                    group_non += 1
            else:
                tag[item] = unit_tag | 1
                if all_candidates:
                    group_non += 1
            if p < kmax:  # the blocks walked below: every group that starts in the top kmax
                pos_gain[j - rs] = g
        correct += group_rel * (n_non - non_ranked - group_non) + 0.5 * group_rel * group_non
        rel_ranked += group_rel
        non_ranked += group_non
        # Ranking metrics over the blocks of this score group that start within the top kmax.
        a = p
        while a < q and a < kmax:
            b = q if options.average_ties else a + 1
            n = b - a
            r = 0
            g_dcg = 0.0
            g_hl = 0.0
            for t in range(a, b):
                g = pos_gain[t]
                if g > 0.0:
                    r += 1
                    g_dcg += _transformed_gain(g, gain_mode)
                if want_hl:
                    g_hl += max(g - neutral, 0.0)
            if r == 0 and g_hl == 0.0:  # no gain in the block: every sum would add exact zeros
                end = min(b, kmax)
                while c < n_cut and cutoffs[c] <= end:
                    _record(row, slots, c, n_cut, cutoffs[c], n_rel, options.ap_min_rk,
                            (hits, ap, dcg, rr, found, hl), (idcg[c], hl_max[c]))
                    c += 1
                a = b
                continue
            share = r / n
            pairs = r * (r - 1) / (n * (n - 1)) if n > 1 else 0.0
            first = share if (hits == 0.0 and r > 0) else 0.0  # P(first relevant at offset t)
            for t in range(n):
                i = a + t + 1
                if i > kmax:
                    break
                dcg += g_dcg / n * discount[i - 1]
                if want_hl:
                    hl += g_hl / n * decay[i - 1]
                if r > 0:
                    ap += (share * (hits + 1.0) + t * pairs) / i
                if first > 0.0:
                    rr += first / i
                    found += first
                    first = first * (n - t - r) / (n - 1 - t) if n - 1 - t > 0 else 0.0
                while c < n_cut and cutoffs[c] == i:
                    _record(row, slots, c, n_cut, cutoffs[c], n_rel, options.ap_min_rk,
                            (hits + (t + 1) * share, ap, dcg, rr, found, hl), (idcg[c], hl_max[c]))
                    c += 1
            hits += r
            a = b
        p = q
    while c < n_cut:
        _record(row, slots, c, n_cut, cutoffs[c], n_rel, options.ap_min_rk,
                (hits, ap, dcg, rr, found, hl), (idcg[c], hl_max[c]))
        c += 1
    if n_rel > 0 and n_non > 0:
        rel_left = n_rel - rel_ranked
        non_left = n_non - non_ranked
        if non_left < 0:
            status[u] = TOO_MANY_NON_RELEVANT
        correct += 0.5 * rel_left * non_left  # unranked targets tie below the last ranked item
        row[slots.n_cutoff_slots * n_cut + slots.auc] = correct / (n_rel * n_non)


@njit(cache=True)
def _record(row, slots, c, n_cut, k, n_rel, ap_min_rk, sums, ideal):
    """Write the cutoff metrics at cutoff index ``c`` (k) into a unit's ``row``: ``sums`` are the
    running (hits, AP sum, DCG, RR, hit probability, half-life utility) at rank k, ``ideal`` the
    (IDCG, best half-life utility) at k."""
    hits, ap, dcg, rr, found, hl = sums
    idcg, hl_max = ideal
    row[slots.precision * n_cut + c] = hits / k
    if n_rel > 0:
        row[slots.recall * n_cut + c] = hits / n_rel
        row[slots.f1 * n_cut + c] = 2.0 * hits / (k + n_rel)
        row[slots.ap * n_cut + c] = ap / (min(n_rel, k) if ap_min_rk else n_rel)
        if idcg > 0.0:
            row[slots.ndcg * n_cut + c] = dcg / idcg
        row[slots.rr * n_cut + c] = rr
        row[slots.hit * n_cut + c] = found
    else:
        row[slots.hit * n_cut + c] = 0.0
    if hl_max > 0.0:
        row[slots.half_life * n_cut + c] = hl / hl_max


@njit(cache=True)
def keep_columns(row, columns, out, u):
    """out[j, u] = row[columns[j]]: a unit's kept values into the metric-major output."""
    for j in range(len(columns)):
        out[j, u] = row[columns[j]]


def ranking_kernel(rankings, targets, options, slots, width, columns, n_items, bounds):
    """Per unit, every ranking metric: the cutoff metrics at every cutoff, then the whole-list ones,
    at the kernel columns ``slots`` give (:func:`~recsys_eval.measure.metrics.kernel_column`), of
    which the output keeps ``columns``, in that order; the chunks of units ``bounds`` gives run in
    parallel (:func:`~recsys_eval.core.chunks.run_chunks`).

    Returns ``(values[len(columns), n_units], status[n_units])``: metric-major, so that each kept
    column is one contiguous run, as the long per-unit table stacks them
    (:func:`~recsys_eval.measure.frames.long_frame` wraps it without a copy); NaN marks undefined
    values.
    """
    n_units = len(targets.offsets) - 1
    out = np.empty((len(columns), n_units))
    status = np.zeros(n_units, np.int8)
    run_chunks(_ranking_chunk, bounds, rankings, targets, options, slots, width, columns, n_items, out, status)
    return out, status


#: Read-only arrays, which numba's explicit signatures below take writable arrays for too (the
#: caller's may be read-only: polars' zero-copy columns are).
_FLOATS = types.Array(types.float64, 1, "C", readonly=True)
_INTS = types.Array(types.int64, 1, "C", readonly=True)
#: What numba compiles a spec's own kernel for (:attr:`~recsys_eval.measure.metrics.MetricSpec.kernel`):
#: ``kernel(rel, n_rel, n_non, k, params) -> value``, ``rel`` and ``params`` read-only.
OWN_KERNEL_SIGNATURE = types.float64(_FLOATS, types.int64, types.int64, types.int64, _FLOATS)


def own_kernel(kernel, offsets, rel, n_rel, n_non, cutoffs, params, bounds):
    """A spec's own kernel (a plain function) on every unit at every cutoff: ``kernel(rel[unit's
    positions], n_rel[u], n_non[u], cutoffs[c], params)``. Returns ``values[len(cutoffs), n_units]``,
    metric-major as :func:`ranking_kernel`'s; the chunks of units ``bounds`` gives run in parallel.

    One compiled driver serves every spec's kernel, passed to it as a first-class function of
    :data:`OWN_KERNEL_SIGNATURE`: a kernel passed as a plain dispatcher makes numba compile the
    driver again per kernel, and in every process (its type never matches the on-disk cache)."""
    out = np.empty((len(cutoffs), len(n_rel)))
    run_chunks(_own_driver(), bounds, _compiled(kernel), offsets, rel, n_rel, n_non, cutoffs, params, out)
    return out


@functools.cache
def _compiled(kernel):
    """A spec's kernel compiled for :data:`OWN_KERNEL_SIGNATURE`, cached on disk like every kernel."""
    return njit(OWN_KERNEL_SIGNATURE, cache=True, nogil=True)(kernel)


@functools.cache
def _own_driver():
    """:func:`_own_chunk` compiled once, on first use (an explicit signature compiles at once)."""
    signature = types.void(types.int64, types.int64, types.FunctionType(OWN_KERNEL_SIGNATURE), _INTS, _FLOATS,
                           _INTS, _INTS, _INTS, _FLOATS, types.float64[:, ::1])
    return njit(signature, cache=True, nogil=True)(_own_chunk)


def _own_chunk(lo, hi, kernel, offsets, rel, n_rel, n_non, cutoffs, params, out):  # pragma: no cover - compiled
    """:func:`own_kernel` for the units ``lo:hi``."""
    for u in range(lo, hi):
        positions = rel[offsets[u]:offsets[u + 1]]
        for c in range(len(cutoffs)):
            out[c, u] = kernel(positions, n_rel[u], n_non[u], cutoffs[c], params)


@njit(cache=True, nogil=True)
def rank_weights(kmax, half_life):  # pragma: no cover - compiled
    """The weights of ranks 1..kmax: nDCG's discount 1 / log2(r + 1) and the half-life utility's
    decay 2^(-(r - 1) / (h - 1)) (docs/CONVENTIONS.md). A loop of scalars: array expressions would
    compile a loop of their own in every kernel that wrote them."""
    discount = np.empty(kmax)
    decay = np.empty(kmax)
    for i in range(kmax):
        r = i + 1.0
        discount[i] = 1.0 / np.log2(r + 1.0)
        decay[i] = 2.0 ** (-(r - 1.0) / (half_life - 1.0))
    return discount, decay


@njit(cache=True, nogil=True)
def _ranking_chunk(lo, hi, rankings, targets, options, slots, width, columns, n_items, out, status):
    """:func:`ranking_kernel` for the units ``lo:hi``."""
    cutoffs = options.cutoffs
    discount, decay = rank_weights(cutoffs[len(cutoffs) - 1], options.half_life)
    longest_ranking = 0
    longest_targets = 0
    for u in range(lo, hi):
        longest_ranking = max(longest_ranking, rankings.offsets[u + 1] - rankings.offsets[u])
        longest_targets = max(longest_targets, targets.offsets[u + 1] - targets.offsets[u])
    scratch = _Scratch(np.full(n_items, -1, np.int64), np.zeros(longest_ranking), np.empty(longest_targets),
                       np.zeros(len(cutoffs)), np.zeros(len(cutoffs)), np.empty(width))
    for u in range(lo, hi):
        _score_unit(u, rankings, targets, options, slots, discount, decay, scratch, status)
        keep_columns(scratch.row, columns, out, u)


def label_kernel(rankings, targets, n_items, bounds):
    """Per ranked item its gain and role (1 relevant, 0 non-relevant target, -1 not a target);
    per unit its relevant count R and non-relevant count N over the whole target set; the chunks
    of units ``bounds`` gives run in parallel."""
    n_units = len(targets.offsets) - 1
    gain = np.zeros(len(rankings.items))
    role = np.full(len(rankings.items), -1, np.int8)
    n_rel = np.zeros(n_units, np.int64)
    n_non = np.zeros(n_units, np.int64)
    run_chunks(_label_chunk, bounds, rankings, targets, n_items, gain, role, n_rel, n_non)
    return gain, role, n_rel, n_non


@njit(cache=True, nogil=True)
def _label_chunk(lo, hi, rankings, targets, n_items, gain, role, n_rel, n_non):
    """:func:`label_kernel` for the units ``lo:hi``."""
    r_offsets, r_items = rankings.offsets, rankings.items
    t_offsets, t_items, t_gain = targets.offsets, targets.items, targets.gain
    stamp = np.full(n_items, -1, np.int64)
    gain_at = np.zeros(n_items)
    for u in range(lo, hi):
        rel = 0
        for j in range(t_offsets[u], t_offsets[u + 1]):
            stamp[t_items[j]] = u
            gain_at[t_items[j]] = t_gain[j]
            if t_gain[j] > 0.0:
                rel += 1
        n_rel[u] = rel
        size = targets.n_candidates[u] if targets.all_candidates else t_offsets[u + 1] - t_offsets[u]
        n_non[u] = size - rel
        for j in range(r_offsets[u], r_offsets[u + 1]):
            item = r_items[j]
            if stamp[item] == u:
                gain[j] = gain_at[item]
                role[j] = 1 if gain_at[item] > 0.0 else 0
            elif targets.all_candidates:
                role[j] = 0
