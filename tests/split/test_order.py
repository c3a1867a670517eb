"""The ordering kernel: ranks within groups, by time, ties in seeded uniformly random order."""

from collections import Counter
from itertools import permutations

import numpy as np
import pytest
from scipy import stats

from recsys_eval.split.order import random_rank, rank_within


def reference_ranks_valid(groups, times, rank):
    """Within every group the ranks are 0..n-1 and follow time (the slow obvious check)."""
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        r = rank[idx]
        assert sorted(r) == list(range(len(idx)))
        if times is not None:
            by_rank = times[idx][np.argsort(r)]
            assert np.all(np.diff(by_rank) >= 0)


def test_ranks_are_permutations_within_groups_in_time_order():
    rng = np.random.default_rng(0)
    groups = rng.integers(0, 30, 2000)
    times = rng.integers(0, 15, 2000)
    for t in (None, times):
        rank = rank_within(groups, 30, np.random.default_rng(5), t)
        reference_ranks_valid(groups, t, rank)


def test_empty_groups_and_empty_input():
    assert len(rank_within(np.zeros(0, np.int32), 3, np.random.default_rng(0))) == 0
    rank = rank_within(np.array([2, 2, 0]), 5, np.random.default_rng(0), np.array([5, 1, 9]))
    assert rank.tolist() == [1, 0, 0]


def test_same_seed_same_ranks_other_seed_other_ranks():
    groups = np.repeat(np.arange(20), 50)
    times = np.tile(np.arange(10), 100)
    a = rank_within(groups, 20, np.random.default_rng(1), times)
    b = rank_within(groups, 20, np.random.default_rng(1), times)
    c = rank_within(groups, 20, np.random.default_rng(2), times)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_tied_rows_take_every_order_uniformly():
    """Four rows with one time in one group: over 2,400 seeds each of the 24 orders appears about
    100 times (chi-square), so ties are broken at random and never by input order."""
    groups = np.zeros(4, np.int32)
    times = np.full(4, 7)
    seen = Counter(
        tuple(rank_within(groups, 1, np.random.default_rng(seed), times)) for seed in range(2400)
    )
    assert set(seen) == set(permutations(range(4)))
    assert stats.chisquare(list(seen.values())).pvalue > 1e-4


def test_ties_are_shuffled_only_among_themselves():
    groups = np.zeros(6, np.int32)
    times = np.array([3, 1, 3, 2, 1, 3])
    for seed in range(50):
        rank = rank_within(groups, 1, np.random.default_rng(seed), times)
        assert set(rank[[1, 4]]) == {0, 1}
        assert rank[3] == 2
        assert set(rank[[0, 2, 5]]) == {3, 4, 5}


def test_random_rank_is_a_uniform_permutation():
    rank = random_rank(1000, np.random.default_rng(3))
    assert sorted(rank) == list(range(1000))
    first = Counter(int(np.argmin(random_rank(5, np.random.default_rng(s)))) for s in range(2000))
    assert stats.chisquare([first[i] for i in range(5)]).pvalue > 1e-4


@pytest.mark.parametrize("spread", [10_000, 2**61])
def test_distinct_times_give_the_time_order_on_both_sort_paths(spread):
    """Keys fit 64 bits for a small time range (one numpy sort) and not for 2**61 seconds (a sort
    per group); either way distinct times fix the order, equal to a per-group argsort."""
    rng = np.random.default_rng(4)
    groups = rng.integers(0, 40, 3000)
    times = rng.choice(spread, size=3000, replace=False).astype(np.int64) - spread // 2
    rank = rank_within(groups, 40, np.random.default_rng(0), times)
    expected = np.empty(3000, np.int64)
    for g in range(40):
        idx = np.flatnonzero(groups == g)
        expected[idx[np.argsort(times[idx])]] = np.arange(len(idx))
    assert np.array_equal(rank, expected)


def test_group_ids_outside_the_range_are_refused():
    with pytest.raises(ValueError, match="groups must lie in 0..1"):
        rank_within(np.array([0, 2]), 2, np.random.default_rng(0))
