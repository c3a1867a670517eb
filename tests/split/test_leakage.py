"""The leakage audit against a slow reference written from its definition (Ji et al., TOIS 2023;
docs/CONVENTIONS.md#leakage), on hand-built timelines and random data under real splitters."""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.core import Split
from recsys_eval.errors import DataError
from recsys_eval.split import holdout, kfold, leakage_audit, time_split, user_time_split
from tests.split.helpers import interactions, random_interactions


def reference(split: Split) -> dict[str, float]:
    """The four shares by loops over the rows, one definition at a time."""
    train = split.train.frame.rows(named=True)
    test = split.test.frame.rows(named=True)
    start = min(r["timestamp"] for r in test)
    tau: dict[int, int] = {}
    for r in test:
        tau[r["user"]] = min(tau.get(r["user"], r["timestamp"]), r["timestamp"])
    first_seen: dict[int, int] = {}
    for r in train:
        first_seen[r["item"]] = min(first_seen.get(r["item"], r["timestamp"]), r["timestamp"])
    after_start = sum(r["timestamp"] > start for r in train)
    after_user = sum(r["user"] in tau and r["timestamp"] > tau[r["user"]] for r in train)
    future = sum(r["item"] in first_seen and first_seen[r["item"]] > tau[r["user"]] for r in test)
    leaking = {r["user"] for r in train if r["user"] in tau and r["timestamp"] > tau[r["user"]]}
    return {"share_after_test_start": after_start / len(train), "share_after_user_test": after_user / len(train),
            "share_future_items": future / len(test), "share_users_leaking": len(leaking) / len(tau)}


def _split(train_rows, test_rows) -> Split:
    """A split from (user, item, time) rows over one index."""
    data = interactions(*zip(*(train_rows + test_rows), strict=True))
    n = len(train_rows)
    frame = data.frame.with_row_index()
    return Split(data.with_frame(frame.filter(pl.col("index") < n)), data.with_frame(frame.filter(pl.col("index") >= n)),
                 name="hand")


def test_a_hand_built_timeline():
    # user 1 trains at 1, 5, 9 and is tested at 4; user 2 trains at 2 and is tested at 6 and 7 on
    # item 30, first trained on (by user 1) at 9; T0 = 4.
    split = _split([(1, 10, 1), (1, 20, 5), (1, 30, 9), (2, 10, 2)], [(1, 40, 4), (2, 30, 6), (2, 20, 7)])
    row = leakage_audit([split]).folds.row(0, named=True)
    assert row["test_start"] == 4
    assert row["share_after_test_start"] == 2 / 4  # times 5 and 9
    assert row["share_after_user_test"] == 2 / 4  # user 1's 5 and 9; user 2 has none after 6
    assert row["share_future_items"] == 1 / 3  # item 30 first trained at 9 > 6; item 20 at 5 < 6
    assert row["share_users_leaking"] == 1 / 2
    users = leakage_audit([split]).users
    assert users.get_column("user").to_list() == [1, 2]
    assert users.get_column("leaking").to_list() == [True, False]
    assert users.get_column("n_test_future_items").to_list() == [0, 1]


def test_equal_times_are_not_leakage():
    split = _split([(1, 10, 5), (2, 10, 5)], [(1, 20, 5), (2, 30, 5)])
    row = leakage_audit([split]).folds.row(0, named=True)
    assert [row[s] for s in ("share_after_test_start", "share_after_user_test", "share_future_items",
                             "share_users_leaking")] == [0, 0, 0, 0]
    assert row["flagged"] == []


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), method=st.sampled_from(["holdout", "per_user", "user_time", "kfold"]))
def test_the_audit_equals_the_reference(seed, method):
    data = random_interactions(seed, n=400)
    splits = {"holdout": lambda: [holdout(data, 0.3, seed=seed)],
              "per_user": lambda: [holdout(data, 0.3, per_user=True, seed=seed)],
              "user_time": lambda: [user_time_split(data, fraction=0.3, seed=seed)],
              "kfold": lambda: kfold(data, 3, seed=seed)}[method]()
    folds = leakage_audit(splits).folds
    for split, row in zip(splits, folds.iter_rows(named=True), strict=True):
        for share, value in reference(split).items():
            assert math.isclose(row[share], value), (share, row[share], value)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), at=st.floats(0.3, 0.8))
def test_a_global_time_split_leaks_nothing_and_a_random_split_does(seed, at):
    data = random_interactions(seed, n=400, time_values=200)
    timed = leakage_audit([time_split(data, at, seed=seed)]).folds.row(0, named=True)
    assert all(timed[s] == 0 for s in ("share_after_test_start", "share_after_user_test", "share_future_items",
                                       "share_users_leaking"))
    random = leakage_audit([holdout(data, 0.3, seed=seed)]).folds.row(0, named=True)
    assert random["share_after_test_start"] > 0 and random["share_users_leaking"] > 0
    assert "share_after_test_start" in random["flagged"]


def test_the_per_user_table_sums_to_the_fold_counts():
    splits = kfold(random_interactions(3), 4, seed=3)
    audit = leakage_audit(splits)
    sums = audit.users.group_by("fold").agg(pl.col("n_test", "n_train_after_user_test", "n_test_future_items").sum(),
                                            pl.col("leaking").sum().alias("n_users_leaking"),
                                            pl.len().alias("n_test_users"))
    joined = audit.folds.join(sums, on="fold", suffix="_by_user")
    assert joined.height == 4
    for column in ("n_test", "n_test_users", "n_train_after_user_test", "n_test_future_items", "n_users_leaking"):
        assert (joined[column] == joined[f"{column}_by_user"]).all(), column


def test_data_without_timestamps_is_an_error_naming_the_fold():
    data = interactions([1, 1, 2, 2], [1, 2, 1, 2])
    with pytest.raises(DataError, match="fold1.*timestamps"):
        leakage_audit([kfold(data, 2, seed=0)[0]])
