"""The global splits' keyed draws (docs/CONVENTIONS.md#global-split-draws): global holdout, k-fold
(global and per user), the user-disjoint split and cold items choose rows, users or items by keys
of the seed and raw ids, checked against a slow pure-Python computation of the rule, and give the
same split whatever the order of the rows."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from recsys_eval.core import Interactions
from recsys_eval.split import cold_items, holdout, kfold, user_disjoint
from recsys_eval.split.order import keyed_first, keyed_rank

from .helpers import random_interactions

GOLDEN, MASK = 0x9E3779B97F4A7C15, 2**64 - 1


def _splitmix64(x: int) -> int:
    """splitmix64's finaliser, one integer at a time (Steele, Lea & Flood 2014)."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def _id_key(seed: int, raw: int) -> int:
    return _splitmix64(_splitmix64((seed + GOLDEN) & MASK) ^ (raw & MASK))


def _row_key(seed: int, user: int, item: int) -> int:
    return _splitmix64(_id_key(seed, user) ^ (item & MASK))


def _pairs(side: Interactions) -> set[tuple]:
    return set(side.to_raw().select("user", "item").iter_rows())


def _shuffled(data: Interactions, seed: int = 5) -> Interactions:
    return Interactions.from_frame(data.to_raw().sample(fraction=1.0, shuffle=True, seed=seed))


def _in_key_order(pairs, seed: int) -> list[tuple]:
    return sorted(pairs, key=lambda p: (_row_key(seed, *p), p))


@pytest.mark.parametrize("fraction", [0.2, 0.5, 0.73])
def test_a_global_holdout_tests_the_rows_of_smallest_key(fraction):
    data = random_interactions(41)
    split = holdout(data, fraction, seed=9, min_user_interactions=3)
    counts = data.to_raw().group_by("user").len()
    eligible = set(counts.filter(pl.col("len") >= 3).get_column("user"))
    in_play = [p for p in _pairs(data) if p[0] in eligible]
    size = int(np.floor(fraction * len(in_play) + 0.5))
    assert _pairs(split.test) == set(_in_key_order(in_play, 9)[:size])
    assert _pairs(split.train) == _pairs(data) - _pairs(split.test)
    assert _pairs(holdout(_shuffled(data), fraction, seed=9, min_user_interactions=3).test) == _pairs(split.test)
    assert _pairs(holdout(data, fraction, seed=10, min_user_interactions=3).test) != _pairs(split.test)


def test_global_folds_deal_the_key_order_round_robin():
    data = random_interactions(42)
    folds = kfold(data, 4, seed=3)
    order = _in_key_order(_pairs(data), 3)
    for i, fold in enumerate(folds):
        assert _pairs(fold.test) == set(order[i::4])
        assert _pairs(fold.train) == _pairs(data) - set(order[i::4])
    again = kfold(_shuffled(data), 4, seed=3)
    assert [_pairs(f.test) for f in again] == [_pairs(f.test) for f in folds]
    assert _pairs(kfold(data, 4, seed=4)[0].test) != _pairs(folds[0].test)


def test_per_user_folds_start_at_the_users_key_and_deal_its_rows_in_key_order():
    data = random_interactions(43)
    k = 3
    folds = kfold(data, k, per_user=True, seed=8)
    fold_of = {pair: i for i, f in enumerate(folds) for pair in _pairs(f.test)}
    raw = data.to_raw()
    for user, items in raw.group_by("user").agg("item").iter_rows():
        if len(items) < 2:  # below the default minimum: in train in every fold
            assert (user, items[0]) not in fold_of
            continue
        ordered = _in_key_order([(user, i) for i in items], 8)
        start = _id_key(8, user) % k
        assert [fold_of[p] for p in ordered] == [(place + start) % k for place in range(len(ordered))]
    # a user's folds depend on its own rows alone: other users dropped, the rows shuffled
    part = Interactions.from_frame(raw.filter(pl.col("user") % 2 == 0).sample(fraction=1.0, shuffle=True, seed=2))
    again = {pair: i for i, f in enumerate(kfold(part, k, per_user=True, seed=8)) for pair in _pairs(f.test)}
    assert again == {p: i for p, i in fold_of.items() if p[0] % 2 == 0}


def test_user_disjoint_picks_the_users_of_smallest_key_and_folds_in_their_first_rows():
    data = random_interactions(44)
    split = user_disjoint(data, 0.3, fold_in=0.5, seed=6)
    raw = data.to_raw()
    users = sorted(raw.filter(pl.len().over("user") >= 2).get_column("user").unique().to_list(),
                   key=lambda u: (_id_key(6, u), u))
    chosen = set(users[: int(np.floor(0.3 * len(users) + 0.5))])
    test = set()
    for user, items in raw.group_by("user").agg("item").iter_rows():
        if user in chosen:
            ordered = _in_key_order([(user, i) for i in items], 6)
            test |= set(ordered[min(int(np.floor(0.5 * len(items) + 0.5)), len(items) - 1):])
    assert _pairs(split.test) == test
    assert split.info["test_users"] == len(chosen)
    assert _pairs(user_disjoint(_shuffled(data), 0.3, fold_in=0.5, seed=6).test) == test
    assert _pairs(user_disjoint(data, 0.3, fold_in=0.5, seed=7).test) != test


def test_cold_items_are_the_items_of_smallest_key():
    data = random_interactions(45)
    split = cold_items(data, n_items=20, seed=2)
    items = sorted(data.to_raw().get_column("item").unique().to_list(), key=lambda i: (_id_key(2, i), i))
    assert set(split.test.to_raw().get_column("item")) == set(items[:20])
    assert _pairs(cold_items(_shuffled(data), n_items=20, seed=2).test) == _pairs(split.test)
    assert _pairs(cold_items(data, n_items=20, seed=3).test) != _pairs(split.test)


def test_keyed_rank_breaks_equal_keys_by_the_ties_in_turn():
    keys = np.array([7, 3, 7, 7, 1], dtype=np.uint64)
    users = np.array([2, 0, 1, 1, 5])
    items = np.array([0, 0, 9, 4, 0])
    # key 1 (row 4), key 3 (row 1), then key 7: user 1 item 4 (row 3), user 1 item 9 (row 2), user 2 (row 0)
    assert keyed_rank(keys, users, items).tolist() == [4, 1, 3, 2, 0]
    assert keyed_rank(np.array([5, 2, 9], dtype=np.uint64)).tolist() == [1, 0, 2]


def test_the_first_entries_in_key_order_are_those_keyed_rank_puts_first():
    rng = np.random.default_rng(4)
    keys = rng.integers(0, 6, 40).astype(np.uint64)  # many equal keys: the ties decide
    users, items = rng.integers(0, 5, 40), rng.permutation(40)
    rank = keyed_rank(keys, users, items)
    for size in (0, 1, 7, 20, 39, 40):
        assert np.array_equal(keyed_first(keys, size, users, items), rank < size), size
