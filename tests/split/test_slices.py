"""Slices of the test users (docs/CONVENTIONS.md#slices) against hand computations: activity groups
at numpy's quantiles of the training counts, cold/warm by a count, equal time windows."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.errors import ConfigError, DataError
from recsys_eval.split import holdout
from recsys_eval.split.slices import parse_slice, read_user_attributes, user_slices
from tests.split.helpers import random_interactions


def _counts(split) -> dict[int, int]:
    raw = split.train.user_ids
    counts = split.train.frame.group_by("user").len()
    return {int(raw[u]): n for u, n in counts.iter_rows()}


def test_cold_and_activity_groups_follow_the_training_counts():
    split = holdout(random_interactions(2), 0.3, seed=2)
    table = user_slices([split], ["cold:8", "activity:3"])
    counts = _counts(split)
    test_users = sorted(int(split.test.user_ids[u]) for u in split.test.frame.get_column("user").unique())
    cold = table.filter(pl.col("slice") == "cold:8")
    assert sorted(cold.get_column("user").to_list()) == test_users
    for user, group in cold.select("user", "group").iter_rows():
        assert group == ("cold (< 8 train)" if counts.get(user, 0) < 8 else "warm (>= 8 train)")
    activity = table.filter(pl.col("slice") == "activity:3")
    n = np.array([counts.get(u, 0) for u in activity.get_column("user")])
    edges = np.unique(np.quantile(n, [1 / 3, 2 / 3]))
    expected = [sum(c >= e for e in edges) for c in n]
    assert activity.get_column("order").to_list() == expected
    for order, group in activity.select("order", "group").unique().iter_rows():
        members = n[np.asarray(activity.get_column("order")) == order]
        assert group == f"Q{order + 1} ({members.min()}-{members.max()} train)"


def test_time_windows_are_equal_lengths_of_the_first_test_times():
    split = holdout(random_interactions(4, time_values=300), 0.3, seed=4)
    table = user_slices([split], ["time:4"])
    first = split.test.frame.group_by("user").agg(pl.col("timestamp").min())
    tau = {int(split.test.user_ids[u]): t for u, t in first.iter_rows()}
    low, high = min(tau.values()), max(tau.values())
    width = (high - low) / 4
    for user, order in table.select("user", "order").iter_rows():
        assert order == min(3, int((tau[user] - low) // width))


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 1000), n=st.integers(2, 6))
def test_every_test_user_is_in_exactly_one_group_of_each_slice(seed, n):
    split = holdout(random_interactions(seed), 0.3, seed=seed)
    table = user_slices([split], [f"activity:{n}", f"cold:{n}", f"time:{n}"])
    users = split.test.frame.get_column("user").n_unique()
    for name in (f"activity:{n}", f"cold:{n}", f"time:{n}"):
        part = table.filter(pl.col("slice") == name)
        assert part.height == users and part.get_column("user").n_unique() == users
        assert part.get_column("order").max() < n


@pytest.mark.parametrize(("text", "message"), [
    ("activity", "expected one of activity:N"), ("age:3", "expected one of"), ("activity:x", "whole number"),
    ("activity:1", "at least 2"), ("cold:0", "at least 1"), ("attribute:", "name the attribute column"),
])
def test_bad_slices_are_named(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_slice(text)


def test_attribute_groups_are_the_values_of_the_column_and_unknown(tmp_path):
    split = holdout(random_interactions(5), 0.3, seed=5)
    test_users = sorted(int(split.test.user_ids[u]) for u in split.test.frame.get_column("user").unique())
    known = test_users[:-3]  # the last three have no row: unknown
    path = tmp_path / "users.csv"
    pl.DataFrame({"user": known, "gender": ["F" if u % 2 else "M" for u in known],
                  "age": list(range(len(known)))}).write_csv(path)
    table = user_slices([split], ["attribute:gender"], read_user_attributes(path))
    groups = dict(table.select("user", "group").iter_rows())
    assert sorted(groups) == test_users
    assert all(groups[u] == ("F" if u % 2 else "M") for u in known)
    assert all(groups[u] == "unknown" for u in test_users[-3:])
    assert dict(table.select("group", "order").unique().iter_rows()) == {"F": 0, "M": 1, "unknown": 2}
    with pytest.raises(ConfigError, match="no column 'sex'.*gender"):
        user_slices([split], ["attribute:sex"], read_user_attributes(path))
    with pytest.raises(ConfigError, match="more than 50 distinct values"):
        user_slices([split], ["attribute:age"], read_user_attributes(path))
    with pytest.raises(ConfigError, match="needs \\[analysis\\] user_attributes"):
        user_slices([split], ["attribute:gender"])


def test_a_bad_attributes_file_is_named(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        read_user_attributes(tmp_path / "absent.csv")
    path = tmp_path / "users.csv"
    pl.DataFrame({"id": [1], "gender": ["F"]}).write_csv(path)
    with pytest.raises(DataError, match="no 'user' column"):
        read_user_attributes(path)
