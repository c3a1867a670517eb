"""Property tests on random Interactions: partition, sizes, folds, no leakage, determinism."""

import math

import numpy as np
import polars as pl
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from recsys_eval.core import Interactions
from recsys_eval.errors import ConfigError
from recsys_eval.split import (
    all_but_n,
    given_n,
    holdout,
    kfold,
    learning_curve,
    leave_last_n,
    time_split,
    user_time_split,
)

from .helpers import assert_partition, in_test, per_user_counts

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def data_sets(draw) -> Interactions:
    pairs = draw(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 15)), min_size=1,
                          max_size=120, unique=True))
    times = draw(st.lists(st.integers(0, 6), min_size=len(pairs), max_size=len(pairs)))
    users, items = zip(*pairs)
    frame = pl.DataFrame({"user": users, "item": items, "timestamp": pl.Series(times, dtype=pl.Int64)})
    return Interactions.from_frame(frame)


seeds = st.integers(0, 2**32)
fractions = st.floats(0.01, 0.99)


def half_up(x):
    return np.floor(np.asarray(x, dtype=float) + 0.5).astype(int)


def no_leakage_per_user(split):
    last = split.train.frame.group_by("user").agg(pl.col("timestamp").max().alias("last"))
    first = split.test.frame.group_by("user").agg(pl.col("timestamp").min().alias("first"))
    joined = first.join(last, on="user")
    return bool((joined["first"] >= joined["last"]).all())


@SETTINGS
@given(data_sets(), fractions, seeds, st.booleans(), st.integers(1, 4))
def test_holdout_partitions_with_the_target_sizes(data, fraction, seed, per_user, minimum):
    split = holdout(data, fraction, per_user=per_user, seed=seed, min_user_interactions=minimum)
    assert_partition(data, split)
    counts = per_user_counts(data, data.n_users)
    eligible = counts >= minimum
    tested = per_user_counts(split.test, data.n_users)
    assert np.all(tested[~eligible] == 0)
    if per_user:
        assert np.all(np.abs(tested - fraction * counts)[eligible] <= 1)
        assert np.all(tested[eligible] <= counts[eligible] - 1)
    else:
        assert len(split.test) == half_up(fraction * counts[eligible].sum())
    again = holdout(data, fraction, per_user=per_user, seed=seed, min_user_interactions=minimum)
    assert again.test.frame.equals(split.test.frame)


@SETTINGS
@given(data_sets(), st.integers(2, 6), seeds, st.booleans())
def test_kfold_tests_every_interaction_once(data, k, seed, per_user):
    counts = per_user_counts(data, data.n_users)
    if per_user:
        assume(k <= counts.max())
    else:
        assume(k <= len(data))
    folds = kfold(data, k, per_user=per_user, seed=seed, min_user_interactions=1)
    assert np.all(sum(in_test(data, f).astype(int) for f in folds) == 1)
    per_fold = np.stack([per_user_counts(f.test, data.n_users) for f in folds])
    if per_user:
        assert np.all(per_fold.max(axis=0) - per_fold.min(axis=0) <= 1)
        assert np.all(per_fold[:, counts >= k] > 0)
    else:
        sizes = per_fold.sum(axis=1)
        assert sizes.max() - sizes.min() <= 1
    for fold in folds:
        assert_partition(data, fold)


@SETTINGS
@given(data_sets(), fractions)
def test_global_time_split_has_no_leakage(data, q):
    try:
        split = time_split(data, q)
    except ConfigError:
        times = np.sort(data.timestamps)
        assert times[max(math.ceil(q * len(times)) - 1, 0)] == times[-1]  # nothing left for test
        return
    point = split.info["split_point"]
    assert split.train.timestamps.max() <= point < split.test.timestamps.min()
    assert len(split.train) >= q * len(data)
    assert_partition(data, split)


@SETTINGS
@given(data_sets(), st.integers(1, 4), seeds, st.sampled_from(["user_time", "all_but_n", "given_n", "leave"]))
def test_per_user_time_splits_have_no_leakage(data, n, seed, kind):
    split = {
        "user_time": lambda: user_time_split(data, n=n, seed=seed),
        "all_but_n": lambda: all_but_n(data, n, order="latest", seed=seed),
        "given_n": lambda: given_n(data, n, order="latest", seed=seed),
        "leave": lambda: leave_last_n(data, n, seed=seed),
    }[kind]()
    assert_partition(data, split)
    assert no_leakage_per_user(split)
    counts = per_user_counts(data, data.n_users)
    tested = per_user_counts(split.test, data.n_users)
    if kind == "given_n":
        assert np.array_equal(tested, np.where(counts > n, counts - n, 0))
    else:
        assert np.array_equal(tested, np.where(counts > n, n, 0))


@SETTINGS
@given(data_sets(), fractions, seeds)
def test_user_time_fraction_is_within_one_of_the_target(data, fraction, seed):
    split = user_time_split(data, fraction=fraction, seed=seed)
    assert no_leakage_per_user(split)
    counts = per_user_counts(data, data.n_users)
    tested = per_user_counts(split.test, data.n_users)
    assert np.all(np.abs(tested - fraction * counts)[counts >= 2] <= 1)


@SETTINGS
@given(data_sets(), st.lists(st.floats(0.01, 1.0), min_size=1, max_size=4, unique=True), seeds,
       st.booleans())
def test_learning_curves_are_nested(data, fracs, seed, per_user):
    fracs = sorted(fracs)
    split = holdout(data, 0.3, seed=seed)
    curve = learning_curve(split, fracs, per_user=per_user, seed=seed)
    previous = set()
    for f, sub in zip(fracs, curve):
        current = set(sub.train.frame.rows())
        assert previous <= current <= set(split.train.frame.rows())
        if not per_user:
            assert len(current) == half_up(f * len(split.train))
        previous = current
