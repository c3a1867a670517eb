"""ROC and precision-recall curves per unit, and averaged over units (vertical averaging), for plots.

ROC: over the unit's whole target set, one point after every group of tied scores (so that a tie is a
diagonal segment and the area under the curve is the unit's AUC, ties one half); target items left
out of a truncated ranking form a last tied group, the segment to (1, 1). Averaged: at fixed false
positive rates, the mean over units (with both relevant and non-relevant targets) of the curve's
true positive rate (the upper one where the curve rises vertically).

PR: one point per ranked position (recall@i, precision@i), in the ranking's order. Averaged: at fixed
recall levels, the mean over units with relevant items of the interpolated precision
max{precision@i : recall@i >= level} (0 where the ranking never reaches the level).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
from numba import njit

from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.sorting import equal_range
from recsys_eval.core.units import Rankings, RelevantRanks, Targets
from recsys_eval.errors import DataError
from recsys_eval.measure.api import target_roles
from recsys_eval.measure.ties import unit_of_position


def roc_points(rankings: Rankings, targets: Targets, units: Sequence[int] | None = None) -> pl.DataFrame:
    """Per-unit ROC points ``unit, fpr, tpr`` from (0, 0) to (1, 1), for units with relevant and
    non-relevant targets (``units`` restricts to those units)."""
    role, n_rel, n_non, tied = target_roles(rankings, targets)
    last_of_group = np.ones(len(role), dtype=bool)
    last_of_group[:-1] = ~tied[1:]
    return _points(rankings, role, n_rel, n_non, last_of_group, units, "roc")


def pr_points(rankings: Rankings, targets: Targets, units: Sequence[int] | None = None) -> pl.DataFrame:
    """Per-unit PR points ``unit, rank, recall, precision`` at every ranked position."""
    role, n_rel, n_non, _ = target_roles(rankings, targets)
    return _points(rankings, role, n_rel, n_non, np.ones(len(role), dtype=bool), units, "pr")


def average_roc(rankings: Rankings, targets: Targets, n_points: int = 101) -> pl.DataFrame:
    """Vertically averaged ROC: ``fpr`` on a grid of ``n_points`` in [0, 1], mean ``tpr``, ``units``."""
    role, n_rel, n_non, tied = target_roles(rankings, targets)
    grid = np.linspace(0.0, 1.0, n_points)
    sums, used = _average_roc_kernel(rankings.offsets, role, tied, n_rel, n_non, grid,
                                     chunk_bounds(rankings.n_units))
    return pl.DataFrame({"fpr": grid, "tpr": sums.sum(0) / max(used.sum(), 1), "units": int(used.sum())})


def average_pr(rankings: Rankings, targets: Targets, n_points: int = 11) -> pl.DataFrame:
    """Vertically averaged interpolated PR: ``recall`` levels, mean ``precision``, ``units``."""
    role, n_rel, _, _ = target_roles(rankings, targets)
    grid = np.linspace(0.0, 1.0, n_points)
    sums, used = _average_pr_kernel(rankings.offsets, role, n_rel, grid, chunk_bounds(rankings.n_units))
    return pl.DataFrame(
        {"recall": grid, "precision": sums.sum(0) / max(used.sum(), 1), "units": int(used.sum())}
    )


def average_roc_one_relevant(ranks: RelevantRanks, n_points: int = 101) -> pl.DataFrame:
    """:func:`average_roc` of 1R units from their places alone (no list is ranked): a unit whose
    relevant item has ``above`` non-relevant targets scored higher and ``tied`` scored the same,
    among N, has the ROC (0, 0) - (above/N, 0) - ((above + tied)/N, 1) - (1, 1), its tie group
    one segment, as the listed path draws it."""
    grid = np.linspace(0.0, 1.0, n_points)
    keep = ranks.n_nonrelevant > 0
    n = ranks.n_nonrelevant[keep].astype(np.float64)
    start = ranks.above[keep] / n
    stop = (ranks.above[keep] + ranks.tied[keep]) / n
    used = int(keep.sum())
    return pl.DataFrame({"fpr": grid, "tpr": _roc_segment_sums(start, stop, grid) / max(used, 1), "units": used})


@njit(cache=True)
def _roc_segment_sums(start, stop, grid):
    """Sum over units of their ROC at each grid point: 0 up to ``start``, rising linearly to 1 at
    ``stop`` (a tie group), 1 after; a unit without ties steps to 1 at ``start``. The rises are
    added where they are, the steps through one difference array: O(units + points covered)."""
    n = len(grid)
    sums = np.zeros(n)
    steps = np.zeros(n + 1)
    for u in range(len(start)):
        x0, x1 = start[u], stop[u]
        left, right = equal_range(grid, x0)
        if x1 > x0:
            i = right
            while i < n and grid[i] < x1:
                sums[i] += (grid[i] - x0) / (x1 - x0)
                i += 1
        else:
            i = left
        steps[i] += 1.0
    done = 0.0  # the running sum of the steps, in a loop rather than np.cumsum (less to compile)
    for i in range(n):
        done += steps[i]
        sums[i] += done
    return sums


def average_pr_one_relevant(ranks: RelevantRanks, n_points: int = 11) -> pl.DataFrame:
    """:func:`average_pr` of 1R units from their places alone: one relevant item at rank r (ties
    broken by item index) has interpolated precision 1/r at every recall level, 0 if not ranked."""
    grid = np.linspace(0.0, 1.0, n_points)
    rank = ranks.above + ranks.before + 1
    precision = np.where(ranks.ranked, 1.0 / rank, 0.0)
    used = len(precision)
    return pl.DataFrame(
        {"recall": grid, "precision": np.full(n_points, precision.sum() / max(used, 1)), "units": used}
    )


def _points(rankings, role, n_rel, n_non, keep, units, kind) -> pl.DataFrame:
    offsets = rankings.offsets
    unit = unit_of_position(offsets)
    rel = np.cumsum(role == 1)
    non = np.cumsum(role == 0)
    start = offsets[:-1]
    before_rel = np.concatenate([[0], rel])[start]
    before_non = np.concatenate([[0], non])[start]
    tp = rel - before_rel[unit]
    fp = non - before_non[unit]
    if kind == "roc":
        wanted = (n_rel > 0) & (n_non > 0)
    else:
        wanted = n_rel > 0
    if units is not None:
        units = np.asarray(units)
        if units.size and (units.dtype.kind not in "iu" or units.min() < 0 or units.max() >= len(wanted)):
            raise DataError(
                f"{kind} points: units must be unit numbers in 0..{len(wanted) - 1}, got {units.dtype} "
                f"values{'' if units.dtype.kind not in 'iu' else f' in [{units.min()}, {units.max()}]'}"
            )
        chosen = np.zeros(len(wanted), dtype=bool)
        chosen[units.astype(np.int64)] = True
        wanted &= chosen
    at = keep & wanted[unit]
    if kind == "pr":
        rank = np.arange(len(role), dtype=np.int64) - offsets[unit] + 1
        return pl.DataFrame(
            {"unit": unit[at], "rank": rank[at], "recall": tp[at] / n_rel[unit[at]],
             "precision": tp[at] / rank[at]}
        )
    ids = np.flatnonzero(wanted)
    zero = np.zeros(len(ids))
    frame = pl.DataFrame(
        {
            "unit": np.concatenate([ids, unit[at], ids]),
            "order": np.concatenate([zero, np.arange(1, at.sum() + 1), zero + len(role) + 1]),
            "fpr": np.concatenate([zero, fp[at] / n_non[unit[at]], zero + 1.0]),
            "tpr": np.concatenate([zero, tp[at] / n_rel[unit[at]], zero + 1.0]),
        }
    )
    return frame.sort("unit", "order").drop("order")


@njit(cache=True)
def _upper_at(xs, ys, n, grid, out):
    """Add to ``out`` the polyline's (upper) y at every grid x; xs non-decreasing, from 0 to 1."""
    i = 0
    for g in range(len(grid)):
        x = grid[g]
        while i + 1 < n and xs[i + 1] <= x:
            i += 1
        if xs[i] == x or i + 1 == n:
            out[g] += ys[i]
        else:
            w = (x - xs[i]) / (xs[i + 1] - xs[i])
            out[g] += ys[i] + w * (ys[i + 1] - ys[i])


def _average_roc_kernel(offsets, role, tied, n_rel, n_non, grid, bounds):
    sums = np.zeros((len(bounds) - 1, len(grid)))
    used = np.zeros(len(bounds) - 1, np.int64)
    run_chunks(_average_roc_chunk, bounds, offsets, role, tied, n_rel, n_non, grid, sums, used, index=True)
    return sums, used


@njit(cache=True, nogil=True)
def _average_roc_chunk(chunk, first, last, offsets, role, tied, n_rel, n_non, grid, sums, used):
    """:func:`_average_roc_kernel` for the units ``first:last``, chunk ``chunk`` of ``sums`` and ``used``."""
    for u in range(first, last):
        if n_rel[u] == 0 or n_non[u] == 0:
            continue
        lo, hi = offsets[u], offsets[u + 1]
        xs = np.empty(hi - lo + 2)
        ys = np.empty(hi - lo + 2)
        xs[0] = 0.0
        ys[0] = 0.0
        n = 1
        tp = 0
        fp = 0
        for j in range(lo, hi):
            if role[j] == 1:
                tp += 1
            elif role[j] == 0:
                fp += 1
            if j + 1 == hi or not tied[j + 1]:
                xs[n] = fp / n_non[u]
                ys[n] = tp / n_rel[u]
                n += 1
        xs[n] = 1.0
        ys[n] = 1.0
        n += 1
        _upper_at(xs, ys, n, grid, sums[chunk])
        used[chunk] += 1


def _average_pr_kernel(offsets, role, n_rel, grid, bounds):
    sums = np.zeros((len(bounds) - 1, len(grid)))
    used = np.zeros(len(bounds) - 1, np.int64)
    run_chunks(_average_pr_chunk, bounds, offsets, role, n_rel, grid, sums, used, index=True)
    return sums, used


@njit(cache=True, nogil=True)
def _average_pr_chunk(chunk, first, last, offsets, role, n_rel, grid, sums, used):
    """:func:`_average_pr_kernel` for the units ``first:last``, chunk ``chunk`` of ``sums`` and ``used``."""
    for u in range(first, last):
        if n_rel[u] == 0:
            continue
        lo, hi = offsets[u], offsets[u + 1]
        recall = np.zeros(hi - lo)
        precision = np.zeros(hi - lo)
        tp = 0
        for j in range(lo, hi):
            if role[j] == 1:
                tp += 1
            recall[j - lo] = tp / n_rel[u]
            precision[j - lo] = tp / (j - lo + 1)
        # interpolated precision: best precision at any recall >= level (scan from the end)
        best = 0.0
        g = len(grid) - 1
        for j in range(hi - lo - 1, -1, -1):
            while g >= 0 and grid[g] > recall[j]:
                sums[chunk, g] += best
                g -= 1
            best = max(best, precision[j])
        while g >= 0:
            sums[chunk, g] += best
            g -= 1
        used[chunk] += 1
