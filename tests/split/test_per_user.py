"""All-but-n, given-n and leave-last-n."""

from collections import Counter

import numpy as np
import polars as pl
import pytest

from recsys_eval.split import all_but_n, given_n, leave_last_n

from .helpers import (
    assert_partition,
    interactions,
    ml100k,
    per_user_counts,
    random_interactions,
)


@pytest.mark.parametrize("order", ["random", "latest"])
def test_all_but_n_tests_n_per_user(order):
    data = random_interactions(20)
    split = all_but_n(data, 2, order=order, seed=1)
    assert_partition(data, split)
    counts = per_user_counts(data, data.n_users)
    tested = per_user_counts(split.test, data.n_users)
    assert np.array_equal(tested, np.where(counts >= 3, 2, 0))
    assert split.info["users_kept_in_train"] == int(((counts > 0) & (counts < 3)).sum())


@pytest.mark.parametrize("order", ["random", "latest"])
def test_given_n_keeps_n_per_user_in_train(order):
    data = random_interactions(21)
    split = given_n(data, 3, order=order, seed=1)
    assert_partition(data, split)
    counts = per_user_counts(data, data.n_users)
    trained = per_user_counts(split.train, data.n_users)
    assert np.array_equal(trained, np.where(counts >= 4, 3, counts))


def test_latest_orders_test_after_train_for_every_user():
    data = random_interactions(22, time_values=8)
    for split in (all_but_n(data, 2, order="latest", seed=0), given_n(data, 2, order="latest", seed=0),
                  leave_last_n(data, 3, seed=0)):
        last = split.train.frame.group_by("user").agg(pl.col("timestamp").max().alias("last"))
        first = split.test.frame.group_by("user").agg(pl.col("timestamp").min().alias("first"))
        joined = first.join(last, on="user")
        assert (joined["first"] >= joined["last"]).all()


def test_leave_one_out_on_ml100k_leaves_each_users_latest():
    data = ml100k()
    split = leave_last_n(data, seed=0)
    assert len(split.test) == data.n_users
    latest = data.frame.group_by("user").agg(pl.col("timestamp").max())
    tested = split.test.frame.select("user", "timestamp").sort("user")
    assert tested.equals(latest.sort("user"))


def test_random_order_picks_every_interaction_over_seeds():
    data = interactions([1] * 6 + [2] * 2, list(range(6)) + [0, 1], times=list(range(8)))
    picked = Counter()
    for seed in range(300):
        split = all_but_n(data, 1, seed=seed)
        picked.update(split.test.frame.filter(pl.col("user") == 0).get_column("item").to_list())
    assert set(picked) == set(range(6)) and min(picked.values()) > 20


def test_leave_last_n_equals_all_but_n_latest():
    data = random_interactions(23, time_values=6)
    a = leave_last_n(data, 2, seed=5)
    b = all_but_n(data, 2, order="latest", seed=5)
    assert a.test.frame.equals(b.test.frame)
    assert a.info["splitter"] == "leave_last_n" and b.info["params"]["order"] == "latest"
