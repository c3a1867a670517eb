"""Time-based splits: a global split point, and each user's latest interactions."""

import datetime as dt
import math
from collections import Counter

import numpy as np
import polars as pl

from recsys_eval.core import Interactions
from recsys_eval.split import time_split, user_time_split

from .helpers import (
    assert_partition,
    interactions,
    ml100k,
    per_user_counts,
    random_interactions,
)


def test_global_split_at_a_timestamp_has_no_leakage():
    data = ml100k()
    at = 885_000_000
    split = time_split(data, at)
    assert_partition(data, split)
    assert split.train.timestamps.max() <= at < split.test.timestamps.min()
    assert len(split.test) == int((data.timestamps > at).sum())
    assert split.info["split_point"] == at
    again = time_split(data, np.int64(at))
    assert again.test.frame.equals(split.test.frame) and again.info["params"]["at"] == at


def test_quantile_is_the_smallest_time_with_that_share_at_or_before_it():
    data = ml100k()
    times = np.sort(data.timestamps)
    for q in (0.1, 0.5, 0.8, 0.95):
        split = time_split(data, q)
        point = split.info["split_point"]
        # slow obvious reference: walk the sorted times
        expected = next(t for i, t in enumerate(times) if (i + 1) / len(times) >= q)
        assert point == expected
        assert split.train.timestamps.max() <= point < split.test.timestamps.min()
        assert len(split.train) >= q * len(data)


def test_a_date_puts_what_happened_before_it_in_train():
    data = interactions([1, 1, 2, 2], [1, 2, 1, 3], times=[86_399, 86_400, 86_401, 10])
    for at in ("1970-01-02", dt.date(1970, 1, 2), dt.datetime(1970, 1, 2),
               dt.datetime(1970, 1, 2, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))):
        split = time_split(data, at)
        assert sorted(split.train.timestamps.tolist()) == [10, 86_399]
        assert split.info["split_point"] == 86_399
        assert split.info["split_point_utc"] == "1970-01-01 23:59:59 UTC"


def test_time_split_keeps_small_users_and_records_its_seed():
    data = interactions([1, 1, 1, 2], [1, 2, 3, 1], times=[1, 2, 3, 4])
    split = time_split(data, 2, seed=9, min_user_interactions=2)
    assert split.test.frame.get_column("timestamp").to_list() == [3]
    assert split.info["users_kept_in_train"] == 1 and split.info["seed"] == 9


def reference_latest(data: Interactions, n_test: dict[int, int]) -> set:
    """Per user, the n latest (user, item) pairs (inputs without ties in time)."""
    out = set()
    frame = data.frame.sort("user", "timestamp")
    for (user,), part in frame.group_by("user", maintain_order=True):
        pairs = part.select("user", "item").rows()
        out.update(pairs[len(pairs) - n_test.get(user, 0):])
    return out


def no_tie_data(seed: int) -> Interactions:
    data = random_interactions(seed)
    rng = np.random.default_rng(seed)
    return data.with_frame(data.frame.with_columns(
        timestamp=pl.Series(rng.permutation(len(data)).astype(np.int64))))


def test_user_time_fraction_takes_each_users_latest_share():
    data = no_tie_data(9)
    split = user_time_split(data, fraction=0.3, seed=0)
    counts = Counter(data.users.tolist())
    n_test = {u: (min(math.floor(0.3 * n + 0.5), n - 1) if n >= 2 else 0) for u, n in counts.items()}
    assert set(split.test.frame.select("user", "item").rows()) == reference_latest(data, n_test)
    assert_partition(data, split)


def test_user_time_n_takes_each_users_latest_n():
    data = no_tie_data(10)
    split = user_time_split(data, n=3, seed=0)
    counts = Counter(data.users.tolist())
    n_test = {u: (3 if n >= 4 else 0) for u, n in counts.items()}
    assert set(split.test.frame.select("user", "item").rows()) == reference_latest(data, n_test)
    small = sum(1 for n in counts.values() if n < 4)
    assert split.info["users_kept_in_train"] == small


def test_user_time_split_has_no_leakage_with_ties():
    data = random_interactions(11, time_values=5)
    split = user_time_split(data, fraction=0.25, seed=4)
    train_last = split.train.frame.group_by("user").agg(pl.col("timestamp").max().alias("last"))
    test_first = split.test.frame.group_by("user").agg(pl.col("timestamp").min().alias("first"))
    joined = test_first.join(train_last, on="user")
    assert joined.height == split.test.frame.get_column("user").n_unique()
    assert (joined["first"] >= joined["last"]).all()


def test_ties_at_the_boundary_are_drawn_by_the_seed():
    """A user whose 5 interactions share one time: which one is left out varies with the seed and
    is not the input's last row every time."""
    data = interactions([1] * 5, [1, 2, 3, 4, 5], times=[7] * 5)
    chosen = Counter(
        user_time_split(data, n=1, seed=s).test.items[0] for s in range(200)
    )
    assert set(chosen) == {0, 1, 2, 3, 4}
    assert max(chosen.values()) < 80


def test_user_time_split_ignores_input_order_without_ties():
    data = no_tie_data(12)
    shuffled = data.with_frame(data.frame.sample(fraction=1.0, shuffle=True, seed=1))
    a = user_time_split(data, fraction=0.2, seed=3)
    b = user_time_split(shuffled, fraction=0.2, seed=99)
    assert set(a.test.frame.rows()) == set(b.test.frame.rows())


def test_user_time_split_sizes_on_ml100k():
    data = ml100k()
    split = user_time_split(data, fraction=0.2, seed=1)
    counts = per_user_counts(data, data.n_users)
    tested = per_user_counts(split.test, data.n_users)
    assert np.all(np.abs(tested - 0.2 * counts) <= 1)
