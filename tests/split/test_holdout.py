"""Random holdout, global and per user."""

import math
from collections import Counter

import numpy as np
import pytest

from recsys_eval.split import holdout

from .helpers import (
    assert_partition,
    in_test,
    interactions,
    ml100k,
    per_user_counts,
    random_interactions,
)


def half_up(x: float) -> int:
    return math.floor(x + 0.5)


def test_global_holdout_on_ml100k_is_a_partition_of_the_asked_size():
    data = ml100k()
    split = holdout(data, 0.2, seed=7)
    assert_partition(data, split)
    assert len(split.test) == 20_000
    assert split.info["splitter"] == "holdout"
    assert split.info["params"]["fraction"] == 0.2
    assert split.info["seed"] == 7


def test_per_user_holdout_sizes_follow_each_user():
    data = random_interactions(1)
    split = holdout(data, 0.3, per_user=True, seed=2)
    assert_partition(data, split)
    counts = Counter(data.users.tolist())
    tested = per_user_counts(split.test, data.n_users)
    for user, n in counts.items():
        expected = 0 if n < 2 else min(half_up(0.3 * n), n - 1)
        assert tested[user] == expected
        assert abs(tested[user] - 0.3 * n) <= 1 or n < 2


def test_same_seed_same_split_other_seed_other_split():
    data = random_interactions(2)
    for per_user in (False, True):
        a = holdout(data, 0.25, per_user=per_user, seed=11)
        b = holdout(data, 0.25, per_user=per_user, seed=11)
        c = holdout(data, 0.25, per_user=per_user, seed=12)
        assert a.test.frame.equals(b.test.frame) and a.train.frame.equals(b.train.frame)
        assert not a.test.frame.equals(c.test.frame)


def test_every_row_is_tested_with_probability_fraction():
    """Over 400 seeds each row of a 40-row input is tested ~100 times (binomial bounds)."""
    data = interactions(range(40), [1] * 40)
    hits = sum(in_test(data, holdout(data, 0.25, seed=s)).astype(int) for s in range(400))
    assert np.all(np.abs(hits - 100) < 45)  # > 5 standard deviations


def test_users_below_the_minimum_stay_in_train_and_are_counted():
    data = random_interactions(3)
    counts = per_user_counts(data, data.n_users)
    for per_user in (False, True):
        split = holdout(data, 0.5, per_user=per_user, seed=1, min_user_interactions=10)
        small = np.flatnonzero((counts > 0) & (counts < 10))
        assert split.info["users_kept_in_train"] == len(small)
        assert split.info["interactions_kept_in_train"] == counts[small].sum()
        assert not np.isin(split.test.users, small).any()
        assert np.array_equal(per_user_counts(split.train, data.n_users)[small], counts[small])
        eligible = counts[counts >= 10].sum()
        if not per_user:
            assert len(split.test) == half_up(0.5 * eligible)


@pytest.mark.parametrize("drop", [True, "users", "items"])
def test_drop_unknown_removes_and_counts_test_rows_unseen_in_train(drop):
    data = random_interactions(4, n_users=600, n_items=400)
    kept = holdout(data, 0.4, seed=3)
    split = holdout(data, 0.4, seed=3, drop_unknown=drop)
    train_users = set(kept.train.users.tolist())
    train_items = set(kept.train.items.tolist())
    expected_users = expected_items = 0
    survivors = []
    for user, item, *_ in kept.test.frame.iter_rows():
        if drop in (True, "users") and user not in train_users:
            expected_users += 1
        elif drop in (True, "items") and item not in train_items:
            expected_items += 1
        else:
            survivors.append((user, item))
    assert split.train.frame.equals(kept.train.frame)
    assert split.test.frame.select("user", "item").rows() == survivors
    assert split.info["test_dropped_unknown_users"] == expected_users
    assert split.info["test_dropped_unknown_items"] == expected_items
    assert (expected_users > 0 or drop == "items") and (expected_items > 0 or drop == "users")
    assert_partition(data, split, dropped=expected_users + expected_items)
