"""Wilcoxon's signed-rank test on many columns at once (docs/CONVENTIONS.md#comparing-systems).

For each column d of a users x columns matrix of paired differences, the test that
``scipy.stats.wilcoxon(d, alternative=...)`` (zero differences dropped, no continuity correction,
``method="auto"``) gives, with the same bits: the absolute non-zero differences are ranked (ties
share their average rank), R+ and R- are the sums of the ranks of the positive and the negative
differences, the statistic is min(R+, R-) when two-sided, else R+. Its p-value comes from

- the normal approximation z = (R+ - n(n+1)/4) / sqrt((n(n+1)(2n+1) - sum_t (t^3 - t) / 2) / 24),
  n the non-zero differences, t the sizes of their groups of ties, when the column has more than
  50 users or has zeros or ties;
- the exact null distribution of R+ (every sign equally likely) when it has at most 50 users and
  neither zeros nor ties;
- the exact sign-flip distribution of R+ (all 2^m sign vectors of its m users) when it has at
  most 13 users and zeros or ties, scipy's permutation test.

A column whose differences are all 0 gives statistic 0 and p = 1. Every rank sum is a sum of
half-integers below 2^53, exact in any order, so one sort of all columns replaces scipy's column
by column ranking (its cost was most of the paired tests' at a few thousand users x 50 columns).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import ndtr

#: Up to this many users (zeros included) a column without zeros or ties takes the exact null
#: distribution, as scipy's ``method="auto"`` does.
EXACT_USERS = 50
#: Up to this many users (zeros included) a column with zeros or ties takes the exact sign-flip
#: distribution (scipy's permutation test, exact below its 9,999 default resamples).
PERMUTATION_USERS = 13
#: scipy's permutation test counts a null value within this relative distance of the observed
#: statistic as equal to it (100 machine epsilons).
_TIE_TOLERANCE = np.finfo(np.float64).eps * 100


def wilcoxon_columns(diffs: np.ndarray, alternative: str) -> tuple[np.ndarray, np.ndarray]:
    """(statistic, p-value) of Wilcoxon's signed-rank test on each column of ``diffs`` (users x
    columns, no NaN), as the module docstring gives them."""
    n_users = diffs.shape[0]
    ranks = SignedRanks.of(diffs)
    count = ranks.count.astype(np.float64)
    statistic = np.minimum(ranks.plus, ranks.minus) if alternative == "two-sided" else ranks.plus.copy()
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = count * (count + 1.0) * 0.25
        variance = count * (count + 1.0) * (2.0 * count + 1.0)
        z = (ranks.plus - mean) / np.sqrt((variance - ranks.tie_sums / 2) / 24)
    pvalue = _normal_pvalues(z, alternative)
    if n_users <= EXACT_USERS:
        exact = ~ranks.tied & (ranks.count == n_users)
        if exact.any():
            pvalue[exact] = _exact_pvalues(ranks.plus[exact], n_users, alternative)
        if n_users <= PERMUTATION_USERS and (~exact).any():
            pvalue[~exact] = _sign_flip_pvalues(ranks.sorted_ranks[:, ~exact], ranks.plus[~exact], alternative)
    nothing = ranks.count == 0
    statistic[nothing], pvalue[nothing] = 0.0, 1.0
    return statistic, pvalue


@dataclass(frozen=True)
class SignedRanks:
    """The signed ranks of every column of a matrix of differences: ``plus`` and ``minus`` (R+
    and R- per column), ``count`` (non-zero differences), ``tie_sums`` (sum of t^3 - t over the
    column's groups of tied non-zero values), ``tied`` (whether it has such a group) and
    ``sorted_ranks`` (users x columns: each column's ranks in ascending order of |d|, 0 for its
    zeros)."""

    plus: np.ndarray
    minus: np.ndarray
    count: np.ndarray
    tie_sums: np.ndarray
    tied: np.ndarray
    sorted_ranks: np.ndarray

    @classmethod
    def of(cls, diffs: np.ndarray) -> SignedRanks:
        """One sort of all columns (each column's |d| ascending), then sums over its runs of ties.

        A non-negative double orders as its bit pattern, so each value is sorted as one integer key:
        the bits of |d| shifted left by one, the sign of d in the freed lowest bit. Sorting the keys
        in place sorts |d| and carries every sign along, with no argsort and no gather (the order
        within a run of equal |d|, negatives last, changes no sum below)."""
        n_users, n_cols = diffs.shape
        by_column = np.ascontiguousarray(diffs.T)
        keys = np.abs(by_column).view(np.uint64) << np.uint64(1)
        keys |= by_column < 0
        keys.sort(axis=1)
        size = keys >> np.uint64(1)
        negative = (keys & np.uint64(1)).astype(bool)
        starts_run = np.ones(size.shape, dtype=bool)
        starts_run[:, 1:] = size[:, 1:] != size[:, :-1]
        starts = np.flatnonzero(starts_run)  # runs of equal |d|, never across two columns
        lengths = np.diff(np.append(starts, size.size))
        column, first = np.divmod(starts, n_users)
        zeros = (size == 0).sum(axis=1)
        nonzero = size.ravel()[starts] != 0
        # a run's average 1-based rank among its column's non-zero values (the zeros sort first)
        rank = np.where(nonzero, first - zeros[column] + (lengths + 1) / 2, 0.0)
        flat_negative = negative.ravel()
        positives, negatives = (np.add.reduceat(side.astype(np.int64), starts) if starts.size
                                else np.zeros(0, np.int64)
                                for side in ((size.ravel() != 0) & ~flat_negative, flat_negative))
        t = lengths.astype(np.float64)
        return cls(
            plus=np.bincount(column, weights=rank * positives, minlength=n_cols),
            minus=np.bincount(column, weights=rank * negatives, minlength=n_cols),
            count=n_users - zeros,
            tie_sums=np.bincount(column, weights=np.where(nonzero, t**3 - t, 0.0), minlength=n_cols),
            tied=np.bincount(column, weights=nonzero & (lengths > 1), minlength=n_cols) > 0,
            sorted_ranks=np.repeat(rank, lengths).reshape(n_cols, n_users).T,
        )


def _normal_pvalues(z: np.ndarray, alternative: str) -> np.ndarray:
    if alternative == "less":
        return ndtr(z)
    if alternative == "greater":
        return ndtr(-z)
    return 2 * ndtr(-np.abs(z))


def _exact_pvalues(plus: np.ndarray, n: int, alternative: str) -> np.ndarray:
    """p-values of integral R+ of n untied non-zero differences from R+'s exact null distribution
    (every sign equally likely), each tail summed as scipy sums it (the smaller side directly, the
    larger as 1 minus the other), so the bits are scipy's."""
    below, above = _exact_tails(n)  # P(R+ <= k), P(R+ >= k)
    k = plus.astype(np.int64)
    if alternative == "less":
        return below[k]
    if alternative == "greater":
        return above[k]
    return np.clip(2 * np.minimum(above[k], below[k]), 0, 1)


@lru_cache(maxsize=EXACT_USERS + 1)
def _exact_tails(n: int) -> tuple[np.ndarray, np.ndarray]:
    """P(R+ <= k) and P(R+ >= k) for k = 0..n(n+1)/2 under the null, R+'s distribution built by
    adding one rank at a time (each rank's sign a fair coin)."""
    pmf = np.ones(1)
    for rank in range(1, n + 1):
        previous, pmf = pmf, np.zeros(rank * (rank + 1) // 2 + 1)
        pmf[: previous.size] = previous * 0.5
        pmf[-previous.size:] += previous * 0.5
    middle = n * (n + 1) / 4
    ks = range(pmf.size)
    below = np.array([pmf[: k + 1].sum() if k <= middle else 1 - pmf[k + 1:].sum() for k in ks])
    above = np.array([pmf[k:].sum() if k <= middle else 1 - pmf[:k].sum() for k in ks])
    for table in (below, above):
        table.setflags(write=False)
    return below, above


def _sign_flip_pvalues(ranks: np.ndarray, plus: np.ndarray, alternative: str) -> np.ndarray:
    """p-values of R+ against all 2^m sign vectors of the m rows of ``ranks`` (m x columns; a
    row's rank, 0 for a zero difference, counts in R+ where its sign is +), counted as scipy's
    exact permutation test counts them: a null value within 100 epsilons of R+ is equal to it."""
    m = ranks.shape[0]
    signs = (np.arange(2**m)[:, None] >> np.arange(m)[None, :]) & 1
    null = signs.astype(np.float64) @ ranks  # sums of half-integers: exact in any order
    gamma = np.abs(_TIE_TOLERANCE * plus)
    less = np.count_nonzero(null <= plus + gamma, axis=0).astype(np.float64) / 2**m
    greater = np.count_nonzero(null >= plus - gamma, axis=0).astype(np.float64) / 2**m
    if alternative == "less":
        return np.clip(less, 0.0, 1.0)
    if alternative == "greater":
        return np.clip(greater, 0.0, 1.0)
    return np.clip(np.minimum(less, greater) * 2, 0.0, 1.0)
