"""user_disjoint, cold_items and rolling_time: their invariants on random data (hypothesis), hand
worked cases, saving and loading, and the errors."""

import datetime as dt

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from recsys_eval.core import Interactions
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.split import (
    cold_items,
    load_splits,
    make_split,
    rolling_time,
    save_splits,
    user_disjoint,
    validation_split,
)
from recsys_eval.split.rolling import window_length

from .helpers import assert_partition, interactions, per_user_counts, rows

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(0, 2**32)


@st.composite
def data_sets(draw) -> Interactions:
    pairs = draw(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 15)), min_size=4, max_size=120, unique=True))
    times = draw(st.lists(st.integers(0, 30), min_size=len(pairs), max_size=len(pairs)))
    users, items = zip(*pairs)
    frame = pl.DataFrame({"user": users, "item": items, "timestamp": pl.Series(times, dtype=pl.Int64) * 3600})
    return Interactions.from_frame(frame)


# -- user_disjoint -----------------------------------------------------------------------------
@SETTINGS
@given(data_sets(), st.floats(0.05, 0.95), st.sampled_from([0, 0.5, 0.8]), st.sampled_from(["random", "latest"]), seeds)
def test_user_disjoint_holds_test_users_out_of_fitting(data, fraction, fold_in, order, seed):
    counts = per_user_counts(data, data.n_users)
    eligible = counts >= (2 if fold_in else 1)
    m = int(eligible.sum())
    size = int(np.floor(fraction * m + 0.5))
    assume(m >= 2 and 1 <= size < m)
    split = user_disjoint(data, fraction, fold_in=fold_in, order=order, seed=seed)
    assert_partition(data, split)
    test_users = split.test_users()
    assert test_users.sum() == size == split.info["test_users"]
    # no test user in what models are fitted on; its other rows are its fold-in part
    fit = split.fit_side()
    assert not test_users[fit.users].any()
    assert len(fit) + split.info["fold_in_interactions"] == len(split.train)
    # each test user: min(round(fold_in * n_u), n_u - 1) rows of fold-in, the rest (>= 1) held out
    held = per_user_counts(split.test, data.n_users)[test_users]
    n_u = counts[test_users]
    assert np.array_equal(n_u - held, np.minimum(np.floor(fold_in * n_u + 0.5), n_u - 1))
    if order == "latest":  # fold-in is the user's past
        last = split.train.frame.group_by("user").agg(pl.col("timestamp").max().alias("last"))
        first = split.test.frame.group_by("user").agg(pl.col("timestamp").min().alias("first"))
        assert (first.join(last, on="user").select(pl.col("first") >= pl.col("last")).to_series().all())
    again = user_disjoint(data, fraction, fold_in=fold_in, order=order, seed=seed)
    assert again.test.frame.equals(split.test.frame) and again.train.frame.equals(split.train.frame)


def test_user_disjoint_by_hand():
    # users 1..4 with 5 interactions each; 2 test users, fold-in 0.6 -> 3 fold-in, 2 held out each
    users = [u for u in range(1, 5) for _ in range(5)]
    items = [10 * u + j for u in range(1, 5) for j in range(5)]
    times = [j for _ in range(1, 5) for j in range(5)]
    data = interactions(users, items, times)
    split = user_disjoint(data, n_users=2, fold_in=0.6, order="latest", seed=7)
    tested = sorted(set(split.test.frame.get_column("user").to_list()))
    assert len(tested) == 2
    for u in tested:  # the latest two of each test user are held out
        assert sorted(split.test.frame.filter(pl.col("user") == u).get_column("timestamp").to_list()) == [3, 4]
    assert len(split.fit_side()) == 10 and split.fold_in
    assert not any(u in tested for u in split.fit_side().frame.get_column("user").to_list())


def test_user_disjoint_survives_saving(tmp_path):
    data = interactions([1, 1, 1, 2, 2, 2, 3, 3, 3], [1, 2, 3, 1, 2, 4, 2, 3, 4], range(9))
    split = user_disjoint(data, n_users=1, fold_in=0.5, seed=1)
    save_splits([split], tmp_path / "s")
    (loaded,) = load_splits(tmp_path / "s")
    assert loaded.fold_in and rows(loaded.fit_side()) == rows(split.fit_side())


def test_user_disjoint_errors():
    data = interactions([1, 1, 2, 2], [1, 2, 1, 2])
    with pytest.raises(ConfigError, match="exactly one of fraction and n_users"):
        user_disjoint(data, seed=0)
    with pytest.raises(ConfigError, match="fold_in"):
        user_disjoint(data, 0.5, fold_in=1.0, seed=0)
    with pytest.raises(DataError, match="leaves one side empty"):
        user_disjoint(data, n_users=2, seed=0)


# -- cold_items ----------------------------------------------------------------------------------
@SETTINGS
@given(data_sets(), st.floats(0.05, 0.95), seeds)
def test_cold_items_never_reach_training(data, fraction, seed):
    m = int((data.item_counts() > 0).sum())
    assume(m >= 2 and 1 <= int(np.floor(fraction * m + 0.5)) < m)
    split = cold_items(data, fraction, seed=seed)
    assert_partition(data, split)
    train_items = set(split.train.items.tolist())
    test_items = set(split.test.items.tolist())
    assert not train_items & test_items
    assert len(test_items) == split.info["cold_items"] == int(np.floor(fraction * m + 0.5))
    # every interaction of a cold item is in test
    assert len(split.test) == int(np.isin(data.items, list(test_items)).sum())
    assert cold_items(data, fraction, seed=seed).test.frame.equals(split.test.frame)


def test_cold_items_refuses_to_drop_its_own_test_rows():
    data = interactions([1, 1, 2, 2], [1, 2, 1, 2])
    with pytest.raises(ConfigError, match="every test row"):
        cold_items(data, 0.5, seed=0, drop_unknown="items")


# -- rolling_time --------------------------------------------------------------------------------
@SETTINGS
@given(data_sets(), st.integers(1, 4), st.integers(1, 8))
def test_rolling_windows_train_only_on_the_past(data, n, hours):
    try:
        folds = rolling_time(data, f"{hours}h", n=n)
    except DataError:
        return  # a window without data or without a past: said, not split
    times = data.timestamps
    end = int(times.max()) + 1
    assert [f.name for f in folds] == [f"window{i}" for i in range(1, n + 1)]
    for i, fold in enumerate(folds):
        start = fold.info["window_start"]
        assert start == end - (n - i) * hours * 3600 and fold.info["window_end"] == start + hours * 3600
        assert fold.train.timestamps.max() < start  # no training interaction at or after the start
        assert start <= fold.test.timestamps.min() and fold.test.timestamps.max() < start + hours * 3600
        assert len(fold.train) == int((times < start).sum())
        assert len(fold.test) == int(((times >= start) & (times < start + hours * 3600)).sum())
    assert [f.test.frame for f in rolling_time(data, hours * 3600, n=n)][-1].equals(folds[-1].test.frame)


def test_rolling_windows_at_dates():
    day = 86_400
    base = int(dt.datetime(2020, 1, 1, tzinfo=dt.UTC).timestamp())
    data = interactions([1, 2, 1, 2, 3, 3], [1, 1, 2, 2, 3, 1], [base + d * day for d in (0, 1, 7, 8, 14, 20)])
    folds = rolling_time(data, "7d", starts=["2020-01-08", dt.date(2020, 1, 15)])
    assert [len(f.train) for f in folds] == [2, 4]
    assert [len(f.test) for f in folds] == [2, 2]  # days 7, 8; days 14, 20
    assert folds[0].info["window_start"] == base + 7 * day
    # an int start is the window's first second
    (only,) = rolling_time(data, 7 * day, starts=[base + 7 * day])
    assert only.test.frame.equals(folds[0].test.frame)


def test_validation_window_before_a_fold():
    day = 86_400
    data = interactions([1, 2, 1, 2, 3, 3, 1], [1, 1, 2, 2, 3, 1, 3], [d * day for d in (0, 1, 7, 8, 14, 20, 21)])
    fold = rolling_time(data, "7d", n=1)[0]  # window [15, 22) days
    inner = validation_split(fold, "rolling_time", length="7d", n=1)[0]
    # the validation window is the week before the fold's start, trained on what precedes it
    assert inner.test.timestamps.min() >= fold.info["window_start"] - 7 * day
    assert inner.test.timestamps.max() < fold.info["window_start"]
    assert inner.train.timestamps.max() < inner.info["window_start"]


def test_rolling_errors():
    data = interactions([1, 2], [1, 2], [0, 100])
    for bad in ("7 days", 0, "0d", True):
        with pytest.raises(ConfigError, match="length"):
            window_length(bad)
    with pytest.raises(ConfigError, match="exactly one of n"):
        rolling_time(data, 10)
    with pytest.raises(ConfigError, match="increase"):
        rolling_time(data, 10, starts=[50, 20])
    with pytest.raises(DataError, match="window 1 .* has no train interaction before it"):
        rolling_time(data, 1000, n=1)


def test_the_new_splitters_run_by_name():
    data = interactions([1, 1, 2, 2, 3, 3], [1, 2, 1, 3, 2, 3], range(6))
    assert make_split(data, "user_disjoint", n_users=1, seed=0).fold_in
    assert make_split(data, "cold_items", n_items=1, seed=0).info["cold_items"] == 1
    assert len(make_split(data, "rolling_time", length=2, n=2)) == 2
