"""Metrics of 1R units in closed form, from where the one relevant item falls (see docs/CONVENTIONS.md).

Under 1R a unit holds one relevant item (gain g) and N non-relevant targets, so every metric is a
function of the relevant item's place: ``above`` targets score higher, ``tied`` the same,
``before`` of those have a smaller item index (:class:`~recsys_eval.core.units.RelevantRanks`).

- ``ties="first"``: the item sits at rank rho = above + before + 1, and at a cutoff k >= rho
  P = 1/k, R = hit = 1, F1 = 2/(k + 1), AP = RR = 1/rho, nDCG = 1/log2(rho + 1), half-life
  utility = 2^(-(rho - 1)/(h - 1)); all 0 for k < rho.
- ``ties="average"``: the expectation over the n = tied + 1 equally likely positions above + t + 1
  (t = 0..n-1) of the tied group (McSherry & Najork 2008): each position contributes its value
  with weight 1/n (the expected hits at position i of the group are (t + 1)/n).
- AUC = (N - above - tied/2) / N, ties one half either way; undefined for N = 0.
- A relevant item scored ``-inf`` is not ranked: every cutoff metric is 0 and AUC counts it tied
  with the ``-inf`` targets.

A metric outside the fused kernel gives its values from its spec's closed form
(:attr:`~recsys_eval.measure.metrics.MetricSpec.at_rank`, :func:`closed_form_values`), by the same
rules. The fused kernel's metrics are computed in the same floating-point steps as the general
ranking kernel (:mod:`recsys_eval.measure.kernels`) takes walking the relevant item's block of the same ranking
(the loop below mirrors its block walk on purpose, and both write a cutoff's values with the one
``kernels._record``), so the two agree bit for bit; the cost is
O(cutoffs) per unit (O(tied) more under average ties) instead of a pass over N + 1 items.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.units import RelevantRanks, Targets
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.measure.kernels import (
    GAIN_CODES,
    SLOTS,
    _record,
    _transformed_gain,
    keep_columns,
    rank_weights,
)
from recsys_eval.measure.metrics import MetricSpec, kernel_width


def one_relevant_kernel(above, tied, before, n_non, gain, ranked, cutoffs, gain_mode, ap_min_rk, half_life,
                        neutral, average_ties, slots, width, columns, bounds):
    """Per unit the 8 cutoff metrics at every cutoff, then AUC, written by the ranking kernel's
    ``_record`` at the kernel columns ``slots`` give, of which the output keeps ``columns``: the
    metric-major ``values[len(columns), n_units]`` of :func:`recsys_eval.measure.kernels.ranking_kernel`;
    NaN marks undefined values. The chunks of units ``bounds`` gives run in parallel."""
    out = np.empty((len(columns), len(above)))
    run_chunks(_one_relevant_chunk, bounds, above, tied, before, n_non, gain, ranked, cutoffs, gain_mode, ap_min_rk,
               half_life, neutral, average_ties, slots, width, columns, out)
    return out


@njit(cache=True, nogil=True)
def _one_relevant_chunk(lo, hi, above, tied, before, n_non, gain, ranked, cutoffs, gain_mode, ap_min_rk, half_life,
                        neutral, average_ties, slots, width, columns, out):
    """:func:`one_relevant_kernel` for the units ``lo:hi``."""
    n_cut = len(cutoffs)
    kmax = cutoffs[n_cut - 1]
    discount, decay = rank_weights(kmax, half_life)
    row = np.empty(width)
    for u in range(lo, hi):
        row[:] = np.nan
        g = np.float64(gain[u])
        g_dcg = _transformed_gain(g, gain_mode)
        g_hl = max(g - neutral, 0.0)
        idcg = 0.0 + g_dcg * discount[0]
        hl_max = 0.0 + g_hl * decay[0]
        hits = 0.0
        found = 0.0
        rr = 0.0
        ap = 0.0
        dcg = 0.0
        hl = 0.0
        c = np.int64(0)  # not literals (0 here, 1 below): each would compile _record once more
        if ranked[u]:
            a = above[u] if average_ties else above[u] + before[u]  # positions before the block
            n = tied[u] + 1 if average_ties else 1
            while c < n_cut and cutoffs[c] <= a:
                _record(row, slots, c, n_cut, cutoffs[c], np.int64(1), ap_min_rk, (hits, ap, dcg, rr, found, hl),
                        (idcg, hl_max))
                c += 1
            if a < kmax:
                share = 1 / n
                first = share  # P(the relevant item at offset t of the block)
                for t in range(n):
                    i = a + t + 1
                    if i > kmax:
                        break
                    dcg += g_dcg / n * discount[i - 1]
                    hl += g_hl / n * decay[i - 1]
                    ap += share * (hits + 1.0) / i
                    if first > 0.0:
                        rr += first / i
                        found += first
                        first = first * (n - t - 1) / (n - 1 - t) if n - 1 - t > 0 else 0.0
                    while c < n_cut and cutoffs[c] == i:
                        _record(row, slots, c, n_cut, cutoffs[c], np.int64(1), ap_min_rk,
                                (hits + (t + 1) * share, ap, dcg, rr, found, hl), (idcg, hl_max))
                        c += 1
                hits += 1
        while c < n_cut:
            _record(row, slots, c, n_cut, cutoffs[c], np.int64(1), ap_min_rk, (hits, ap, dcg, rr, found, hl),
                    (idcg, hl_max))
            c += 1
        if n_non[u] > 0:
            correct = 0.0
            correct += (n_non[u] - above[u] - tied[u]) + 0.5 * tied[u]
            row[slots.n_cutoff_slots * n_cut + slots.auc] = correct / n_non[u]
        keep_columns(row, columns, out, u)


def check_one_relevant(ranks: RelevantRanks, targets: Targets, metrics: list[str], beyond: tuple[str, ...]) -> None:
    """RelevantRanks must be made for these targets, and measured by ranking metrics only."""
    if ranks.n_units != targets.n_units or np.any(ranks.unit_user != targets.unit_user):
        raise DataError(
            f"relevant ranks hold {ranks.n_units:,} units, targets {targets.n_units:,} ({targets.protocol}): "
            "expected the ranks made for these targets, with the same units in the same order"
        )
    asked = [m for m in metrics if m in beyond]
    if asked:
        raise ConfigError(
            f"{asked[0]!r} describes ranked lists, and 1R units measured from their relevant item's rank "
            "have none: measure beyond-accuracy metrics on rankings (rank_targets or recommend_top_k)"
        )


def one_relevant_values(
    ranks: RelevantRanks,
    cutoffs: list[int],
    columns: np.ndarray,
    *,
    gain: str = "graded",
    ties: str = "first",
    ap_denominator: str = "relevant",
    half_life: float = 5.0,
    neutral: float = 0.0,
) -> np.ndarray:
    """The values of :func:`recsys_eval.measure.api.ranking_values` for 1R units (all metrics:
    each costs a few operations per cutoff): per unit, the kernel columns ``columns``."""
    return one_relevant_kernel(
        ranks.above, ranks.tied, ranks.before, ranks.n_nonrelevant, ranks.gain, ranks.ranked,
        np.asarray(cutoffs, dtype=np.int64), GAIN_CODES[gain], ap_denominator == "min_rk", float(half_life),
        float(neutral), ties == "average", SLOTS, kernel_width(len(cutoffs)), columns, chunk_bounds(len(ranks.above)),
    ).T


def closed_form_values(ranks: RelevantRanks, spec: MetricSpec, cutoffs: list[int], ties: str,
                       params: np.ndarray) -> np.ndarray:
    """Per unit (row), metric ``spec`` at every cutoff (one column without one) from its closed
    form ``spec.at_rank`` with ``params``: at the relevant item's rank rho = above + before + 1
    (``ties="first"``); under ``ties="average"`` the mean of at_rank over the ranks above + 1 ..
    above + n of its tied group of n = tied + 1 items, where it sits with probability 1/n each (the
    expectation, exact for any metric). 0 where the item was not ranked: no relevant item is
    listed. Only the ranks the metric reads (``spec.depth``) are evaluated, beyond which it is 0,
    so that a large tied group costs no more than the cutoff."""
    average = ties == "average"
    start = ranks.above if average else ranks.above + ranks.before  # ranks before the item's block
    size = ranks.tied + 1 if average else np.ones_like(ranks.above)
    n_candidates = ranks.n_nonrelevant + 1
    at = cutoffs if spec.cutoff else [None]
    out = np.empty((ranks.n_units, len(at)))
    for c, k in enumerate(at):
        reach = spec.depth.reach(k, 1)
        read = np.where(ranks.ranked, size if reach is None else np.clip(reach - start, 0, size), 0)
        unit = np.repeat(np.arange(ranks.n_units), read)
        offset = np.arange(len(unit)) - np.repeat(np.cumsum(read) - read, read)
        values = spec.at_rank((start[unit] + offset + 1).astype(np.float64), k, n_candidates[unit], params)
        out[:, c] = np.bincount(unit, weights=values, minlength=ranks.n_units) / size
    return out
