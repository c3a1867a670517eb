"""Every bad input of issue 4 gets a clear error naming the value at fault."""

import pytest

from recsys_eval.errors import ConfigError, DataError
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

from .helpers import interactions, random_interactions

DATA = random_interactions(60)
NO_TIME = interactions([1, 1, 2, 2], [1, 2, 1, 2])


@pytest.mark.parametrize("fraction", [0, 0.0, 1, 1.0, -0.2, 1.5, float("nan")])
def test_fraction_outside_the_open_unit_interval(fraction):
    with pytest.raises(ConfigError, match=r"fraction must lie in \(0, 1\)"):
        holdout(DATA, fraction, seed=0)
    with pytest.raises(ConfigError, match=r"fraction must lie in \(0, 1\)"):
        holdout(DATA, fraction, per_user=True, seed=0)
    with pytest.raises(ConfigError, match=r"fraction must lie in \(0, 1\)"):
        user_time_split(DATA, fraction=fraction, seed=0)


@pytest.mark.parametrize("fraction", ["0.2", True, None])
def test_fraction_of_the_wrong_type(fraction):
    with pytest.raises(ConfigError, match="fraction must be a number"):
        holdout(DATA, fraction, seed=0)


@pytest.mark.parametrize("n", [0, -1])
def test_n_below_one(n):
    for call in (lambda: all_but_n(DATA, n, seed=0), lambda: given_n(DATA, n, seed=0),
                 lambda: leave_last_n(DATA, n, seed=0), lambda: user_time_split(DATA, n=n, seed=0)):
        with pytest.raises(ConfigError, match=f"n must be >= 1, got {n}"):
            call()


def test_n_of_the_wrong_type():
    with pytest.raises(ConfigError, match="n must be an integer >= 1, got 1.5"):
        all_but_n(DATA, 1.5, seed=0)


def test_k_below_two_or_above_the_largest_profile():
    for k in (1, 0):
        with pytest.raises(ConfigError, match=f"k must be >= 2, got {k}"):
            kfold(DATA, k, seed=0)
    with pytest.raises(ConfigError, match="k = 3 folds per user, but the largest user profile has 2"):
        kfold(NO_TIME, 3, per_user=True, seed=0)
    with pytest.raises(ConfigError, match="k = 5 folds, but only 4 interactions"):
        kfold(NO_TIME, 5, seed=0)


def test_time_splits_need_timestamps():
    for call, name in (
        (lambda: time_split(NO_TIME, 0.5), "time_split"),
        (lambda: user_time_split(NO_TIME, n=1, seed=0), "user_time_split"),
        (lambda: leave_last_n(NO_TIME, seed=0, min_user_interactions=1), "leave_last_n"),
        (lambda: all_but_n(NO_TIME, 1, order="latest", seed=0), "all_but_n with order 'latest'"),
        (lambda: given_n(NO_TIME, 1, order="latest", seed=0), "given_n with order 'latest'"),
    ):
        with pytest.raises(DataError, match=f"test: {name} needs timestamps, and the data has none"):
            call()


def test_split_point_outside_the_time_range():
    data = interactions([1, 1, 2], [1, 2, 1], times=[100, 200, 300])
    expected = r"outside the data's time range 100 \(1970-01-01 00:01:40 UTC\) \.\. 300"
    for at in (99, 300, 10**12, "1960-01-01", "2100-01-01"):
        with pytest.raises(ConfigError, match=expected):
            time_split(data, at)
    time_split(data, 100)
    time_split(data, 299)
    with pytest.raises(ConfigError, match=r"quantile must lie in \(0, 1\), got 1.5"):
        time_split(data, 1.5)
    tied_end = interactions([1, 1, 2], [1, 2, 1], times=[100, 300, 300])
    with pytest.raises(ConfigError, match="quantile 0.9"):
        time_split(tied_end, 0.9)  # every interaction would stay in train


@pytest.mark.parametrize("at", [True, [1], "yesterday", "1998-13-01"])
def test_unreadable_split_points(at):
    with pytest.raises(ConfigError, match="split point"):
        time_split(DATA, at)


@pytest.mark.parametrize(
    ("fractions", "message"),
    [
        ([0.5, 0.5], "must increase strictly, got 0.5 then 0.5"),
        ([0.6, 0.3], "must increase strictly, got 0.6 then 0.3"),
        ([0.0, 0.5], r"learning-curve fraction must lie in \(0, 1\], got 0.0"),
        ([0.5, 1.2], r"learning-curve fraction must lie in \(0, 1\], got 1.2"),
        ([], "must be a non-empty list"),
        (0.5, "must be a non-empty list"),
    ],
)
def test_learning_curve_fractions(fractions, message):
    split = holdout(DATA, 0.2, seed=0)
    with pytest.raises(ConfigError, match=message):
        learning_curve(split, fractions, seed=0)


def test_other_bad_arguments():
    with pytest.raises(ConfigError, match="give exactly one of fraction and n"):
        user_time_split(DATA, fraction=0.2, n=2, seed=0)
    with pytest.raises(ConfigError, match="give exactly one of fraction and n"):
        user_time_split(DATA, seed=0)
    with pytest.raises(ConfigError, match="order must be one of 'random', 'latest'; got 'last'"):
        all_but_n(DATA, 1, order="last", seed=0)
    with pytest.raises(ConfigError, match="drop_unknown must be one of"):
        holdout(DATA, 0.2, seed=0, drop_unknown="both")
    for seed in (-1, 1.5, "1", None):
        with pytest.raises(ConfigError, match="seed must be a non-negative integer"):
            holdout(DATA, 0.2, seed=seed)
    with pytest.raises(ConfigError, match="expected Interactions to split, got DataFrame"):
        holdout(DATA.frame, 0.2, seed=0)
    empty = DATA.with_frame(DATA.frame.head(0))
    with pytest.raises(DataError, match="no interactions to split"):
        holdout(empty, 0.2, seed=0)
    with pytest.raises(ConfigError, match="min_user_interactions must be >= 1"):
        holdout(DATA, 0.2, seed=0, min_user_interactions=0)
