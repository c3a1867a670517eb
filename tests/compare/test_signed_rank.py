"""Wilcoxon's signed-rank test over many columns at once against scipy.stats.wilcoxon one column at a
time (zero differences dropped, docs/CONVENTIONS.md#comparing-systems): the same statistic and the
same p-value bits, through each of scipy's three distributions (normal, exact, exact sign flips)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from recsys_eval.compare.signed_rank import EXACT_USERS, PERMUTATION_USERS, SignedRanks, wilcoxon_columns

ALTERNATIVES = ("two-sided", "greater", "less")


def _scipy(column: np.ndarray, alternative: str) -> tuple[float, float]:
    if not np.any(column != 0):
        return 0.0, 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stats.wilcoxon(column, alternative=alternative)
    return float(result.statistic), float(result.pvalue)


def _differences(rng: np.random.Generator, n: int, cols: int, decimals: int | None) -> np.ndarray:
    """Differences of per-user metric values: a share at exactly 0, rounded for ties (or not)."""
    values = rng.normal(rng.normal(0, 0.3), 1.0, (n, cols))
    if decimals is not None:
        values = np.round(values, decimals)
    values[rng.random((n, cols)) < rng.uniform(0, 0.4)] = 0.0
    return values


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 90), cols=st.integers(1, 6),
       decimals=st.sampled_from([None, 0, 1, 2]), alternative=st.sampled_from(ALTERNATIVES))
def test_every_column_equals_scipy_one_column_at_a_time(seed, n, cols, decimals, alternative):
    diffs = _differences(np.random.default_rng(seed), n, cols, decimals)
    statistic, pvalue = wilcoxon_columns(diffs, alternative)
    for j in range(cols):
        assert (statistic[j], pvalue[j]) == _scipy(diffs[:, j], alternative)


@pytest.mark.parametrize("n", [PERMUTATION_USERS, PERMUTATION_USERS + 1, EXACT_USERS, EXACT_USERS + 1])
@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_each_distribution_at_its_boundary(n, alternative):
    """Untied non-zero columns (exact up to 50 users), tied ones and ones with zeros (sign flips up
    to 13 users, then normal), side by side in one matrix."""
    rng = np.random.default_rng(n)
    untied = rng.normal(0.2, 1.0, n)
    tied = np.round(rng.normal(0.2, 1.0, n))
    tied[tied == 0] = 1.0
    zeros = rng.normal(0.2, 1.0, n)
    zeros[:2] = 0.0
    diffs = np.column_stack([untied, tied, zeros, np.zeros(n), -untied])
    statistic, pvalue = wilcoxon_columns(diffs, alternative)
    for j in range(diffs.shape[1]):
        assert (statistic[j], pvalue[j]) == _scipy(diffs[:, j], alternative)


def test_signed_ranks_on_a_column_worked_by_hand():
    """d = (0, 1, -1, 2, 0, -3): non-zero |d| 1, 1, 2, 3 rank 1.5, 1.5, 3, 4; R+ = 1.5 + 3, R- = 1.5
    + 4; one pair of ties (2^3 - 2 = 6); a second column without ties or zeros."""
    diffs = np.array([[0, 1, -1, 2, 0, -3], [4, -5, 6, 1, 2, 3]], dtype=np.float64).T
    ranks = SignedRanks.of(diffs)
    assert ranks.plus.tolist() == [4.5, 16.0] and ranks.minus.tolist() == [5.5, 5.0]
    assert ranks.count.tolist() == [4, 6] and ranks.tie_sums.tolist() == [6.0, 0.0]
    assert ranks.tied.tolist() == [True, False]
    assert ranks.sorted_ranks[:, 0].tolist() == [0, 0, 1.5, 1.5, 3, 4]
