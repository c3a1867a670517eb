"""Preparation: threshold, minimum counts and k-core against hand-worked and brute-force references."""

from __future__ import annotations

import itertools
from collections import Counter

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.core import Interactions
from recsys_eval.data import apply_threshold, k_core, min_counts
from recsys_eval.errors import ConfigError, DataError


def _data(pairs, ratings=None) -> Interactions:
    frame = {"user": [100 + u for u, _ in pairs], "item": [f"i{i}" for _, i in pairs]}
    if ratings is not None:
        frame["rating"] = ratings
    return Interactions.from_frame(pl.DataFrame(frame))


def _pairs(data: Interactions) -> set[tuple[int, int]]:
    raw = data.to_raw()
    return {(u - 100, int(i[1:])) for u, i in zip(raw["user"], raw["item"], strict=True)}


def _removed_reference(before: set, after: set) -> tuple[int, int, int]:
    users = {u for u, _ in before} - {u for u, _ in after}
    items = {i for _, i in before} - {i for _, i in after}
    return len(users), len(items), len(before) - len(after)


def test_threshold_keeps_or_binarises():
    data = _data([(0, 0), (0, 1), (1, 1), (2, 2)], ratings=[5.0, 3.0, 4.0, 1.0])
    kept, removed = apply_threshold(data, 4)
    assert kept.to_raw().select("user", "item", "rating").rows() == [(100, "i0", 5.0), (101, "i1", 4.0)]
    assert (removed.users, removed.items, removed.interactions) == (1, 1, 2)
    assert removed.step == "threshold rating >= 4"
    binary, _ = apply_threshold(data, 4, binarize=True)
    assert binary.ratings.tolist() == [1.0, 1.0]
    assert kept.n_users == data.n_users and kept.item_ids.equals(data.item_ids)  # index kept
    with pytest.raises(DataError, match="no rating column"):
        apply_threshold(_data([(0, 0)]), 1)
    with pytest.raises(ConfigError, match="threshold must be a number"):
        apply_threshold(data, "high")


def test_min_counts_is_one_pass_on_the_input_counts():
    # user 0: 3 rows, user 1: 1 row, user 2: 2 rows; item 0: 3 rows, item 1: 2, item 2: 1
    pairs = [(0, 0), (0, 1), (0, 2), (1, 0), (2, 0), (2, 1)]
    kept, removed = min_counts(_data(pairs), min_user=2, min_item=2)
    assert _pairs(kept) == {(0, 0), (0, 1), (2, 0), (2, 1)}
    assert (removed.users, removed.items, removed.interactions) == (1, 1, 2)
    with pytest.raises(ConfigError, match="min_user must be a non-negative integer"):
        min_counts(_data(pairs), min_user=-1)


def test_k_core_by_hand():
    # a 2x2 block (2-core) plus a tail user 2 -> item 1 -> ... that peels in two rounds
    pairs = [(0, 0), (0, 1), (1, 0), (1, 1), (2, 1), (2, 2), (3, 2)]
    kept, removed = k_core(_data(pairs), 2)
    assert _pairs(kept) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert (removed.users, removed.items, removed.interactions) == (2, 1, 3)
    assert str(removed) == "2-core: removed 3 interactions, 2 users, 1 items"


def _slow_peel(pairs: set, k: int) -> set:
    """Remove one offending interaction at a time, recounting from scratch each time."""
    edges = set(pairs)
    while True:
        users, items = Counter(u for u, _ in edges), Counter(i for _, i in edges)
        bad = next((e for e in sorted(edges) if users[e[0]] < k or items[e[1]] < k), None)
        if bad is None:
            return edges
        edges.remove(bad)


def _largest_valid_subset(pairs: set, k: int) -> set:
    """Brute force over all user and item subsets: the biggest set of interactions in which every
    user and item present has at least k (the best subset is always induced by its users and items)."""
    users = sorted({u for u, _ in pairs})
    items = sorted({i for _, i in pairs})
    best: set = set()
    for nu in range(len(users) + 1):
        for us in itertools.combinations(users, nu):
            for ni in range(len(items) + 1):
                for its in itertools.combinations(items, ni):
                    edges = {(u, i) for u, i in pairs if u in us and i in its}
                    uc, ic = Counter(u for u, _ in edges), Counter(i for _, i in edges)
                    if all(uc[u] >= k for u in uc) and all(ic[i] >= k for i in ic) and len(edges) > len(best):
                        best = edges
    return best


pair_sets = st.sets(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(pairs=pair_sets, k=st.integers(1, 4))
def test_k_core_is_the_largest_fixed_point(pairs, k):
    data = _data(sorted(pairs))
    kept, removed = k_core(data, k)
    got = _pairs(kept)
    # fixed point: every remaining user and item has at least k, and another round changes nothing
    assert all(c >= k for c in Counter(u for u, _ in got).values())
    assert all(c >= k for c in Counter(i for _, i in got).values())
    again, none = k_core(kept, k)
    assert _pairs(again) == got and none.interactions == 0
    # largest: equal to brute force and to slow peeling
    assert got == _largest_valid_subset(pairs, k) == _slow_peel(pairs, k)
    assert (removed.users, removed.items, removed.interactions) == _removed_reference(pairs, got)
    assert kept.n_users == data.n_users  # the index is kept


@settings(max_examples=40, deadline=None)
@given(
    pairs=st.sets(st.tuples(st.integers(0, 30), st.integers(0, 30)), min_size=1, max_size=300),
    k=st.integers(1, 6),
)
def test_k_core_matches_slow_peeling_on_larger_inputs(pairs, k):
    assert _pairs(k_core(_data(sorted(pairs)), k)[0]) == _slow_peel(pairs, k)


@settings(max_examples=40, deadline=None)
@given(pairs=pair_sets, min_user=st.integers(0, 4), min_item=st.integers(0, 4))
def test_min_counts_matches_a_counter(pairs, min_user, min_item):
    uc, ic = Counter(u for u, _ in pairs), Counter(i for _, i in pairs)
    expected = {(u, i) for u, i in pairs if uc[u] >= min_user and ic[i] >= min_item}
    kept, removed = min_counts(_data(sorted(pairs)), min_user=min_user, min_item=min_item)
    assert _pairs(kept) == expected
    assert (removed.users, removed.items, removed.interactions) == _removed_reference(pairs, expected)
