"""Leakage audit: how much of the future a split lets a recommender see (docs/CONVENTIONS.md#leakage).

Ji, Sun, Zhang & Li ("A Critical Study on Data Leakage in Recommender System Offline Evaluation",
ACM TOIS 41(3), 2023) show that splits which ignore the global timeline (random holdout, leave
last one out per user) train models on interactions that happened after the test interactions they
are scored on, and that this changes the values and the ordering of systems. The audit measures it
from the splits alone, before any recommender runs. For one fold, with T0 the earliest test
timestamp and tau_u user u's earliest test timestamp:

- ``share_after_test_start``: training interactions with t > T0, over all training interactions;
- ``share_after_user_test``: training interactions of a test user u with t > tau_u, over all
  training interactions;
- ``share_future_items``: test interactions of u whose item's first training interaction comes
  after tau_u (the model knows the item only from its future), over all test interactions;
- ``share_users_leaking``: test users with a training interaction after tau_u, over test users.

All comparisons are strict, so interactions at the same second are not leakage; a global time
split (train at or before a point, test after it) therefore shows zero on all four.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from recsys_eval.core import Split
from recsys_eval.errors import DataError

#: The four shares of a fold, in the order the tables show them.
SHARES = ("share_after_test_start", "share_after_user_test", "share_future_items", "share_users_leaking")
#: A share above this is flagged in the report: 1% of the data seen from the future.
DEFAULT_THRESHOLD = 0.01


@dataclass(frozen=True)
class LeakageAudit:
    """The audit of a run's folds.

    Attributes:
        folds: one row per fold: fold, test_start (T0, seconds), n_train, n_test, n_test_users,
            the counts behind each share, the four :data:`SHARES`, ``threshold`` and ``flagged``, the
            shares above it (a list of their names).
        users: one row per (fold, test user): fold, user (raw id), test_start (tau_u), n_train,
            n_test, n_train_after_test_start, n_train_after_user_test, n_test_future_items, leaking.
        threshold: the share above which a measure is flagged.
    """

    folds: pl.DataFrame
    users: pl.DataFrame
    threshold: float = DEFAULT_THRESHOLD


def leakage_audit(splits: list[Split], threshold: float = DEFAULT_THRESHOLD) -> LeakageAudit:
    """The leakage shares of every fold (module docstring), from the splits alone.

    Raises a DataError naming the fold when its data has no timestamps.
    """
    if not 0 <= threshold <= 1:
        raise DataError(f"leakage threshold {threshold}: expected a share in [0, 1]")
    users = [user_leakage(split) for split in splits]
    folds = pl.concat([_fold_row(split, table) for split, table in zip(splits, users, strict=True)])
    flags = pl.concat_list([pl.when(pl.col(s) > threshold).then(pl.lit(s)) for s in SHARES]).list.drop_nulls()
    folds = folds.with_columns(pl.lit(threshold).alias("threshold"), flags.alias("flagged"))
    return LeakageAudit(folds, pl.concat(users), threshold)


def user_leakage(split: Split) -> pl.DataFrame:
    """One row per test user of ``split`` with the counts behind the shares (:class:`LeakageAudit`)."""
    train, test = _timed(split, "train"), _timed(split, "test")
    start = test.get_column("timestamp").min()
    per_user = test.group_by("user").agg(pl.col("timestamp").min().alias("test_start"), pl.len().alias("n_test"))
    first_seen = train.group_by("item").agg(pl.col("timestamp").min().alias("first_seen"))
    future_items = (
        test.join(per_user.select("user", "test_start"), on="user")
        .join(first_seen, on="item", how="left")
        .group_by("user").agg((pl.col("first_seen") > pl.col("test_start")).sum().alias("n_test_future_items"))
    )
    train_counts = (
        train.join(per_user.select("user", "test_start"), on="user")
        .group_by("user").agg(
            pl.len().alias("n_train"),
            (pl.col("timestamp") > start).sum().alias("n_train_after_test_start"),
            (pl.col("timestamp") > pl.col("test_start")).sum().alias("n_train_after_user_test"),
        )
    )
    counts = ("n_train", "n_train_after_test_start", "n_train_after_user_test", "n_test_future_items")
    table = (
        per_user.join(train_counts, on="user", how="left").join(future_items, on="user", how="left")
        .with_columns(pl.col(c).fill_null(0).cast(pl.Int64) for c in counts)
        .with_columns(pl.col("n_test").cast(pl.Int64), (pl.col("n_train_after_user_test") > 0).alias("leaking"))
        .sort("user")
    )
    raw = split.train.user_ids.gather(table.get_column("user"))
    return table.select(
        pl.lit(split.name).alias("fold"), raw.alias("user"), "test_start", "n_train", "n_test",
        "n_train_after_test_start", "n_train_after_user_test", "n_test_future_items", "leaking",
    )


def _fold_row(split: Split, users: pl.DataFrame) -> pl.DataFrame:
    """The fold's shares: training rows of every user count in the first denominator, so the
    train side's rows of users without a test interaction are counted here, not per user."""
    train = _timed(split, "train")
    start = _timed(split, "test").get_column("timestamp").min()
    n_train, n_test = train.height, len(split.test)
    after_start = int(train.filter(pl.col("timestamp") > start).height)
    sums = users.select(pl.col("n_train_after_user_test", "n_test_future_items").sum(),
                        pl.col("leaking").sum().alias("n_users_leaking"), pl.len().alias("n_test_users")).row(0, named=True)
    return pl.DataFrame({
        "fold": [split.name], "test_start": [start], "n_train": [n_train], "n_test": [n_test],
        "n_test_users": [sums["n_test_users"]],
        "n_train_after_test_start": [after_start],
        "n_train_after_user_test": [int(sums["n_train_after_user_test"] or 0)],
        "n_test_future_items": [int(sums["n_test_future_items"] or 0)],
        "n_users_leaking": [int(sums["n_users_leaking"] or 0)],
        "share_after_test_start": [_share(after_start, n_train)],
        "share_after_user_test": [_share(sums["n_train_after_user_test"] or 0, n_train)],
        "share_future_items": [_share(sums["n_test_future_items"] or 0, n_test)],
        "share_users_leaking": [_share(sums["n_users_leaking"] or 0, sums["n_test_users"])],
    }, schema_overrides={"test_start": pl.Int64})


def _share(count: int, total: int) -> float:
    return count / total if total else float("nan")


def _timed(split: Split, side: str) -> pl.DataFrame:
    """The user, item and timestamp columns of one side, or a DataError naming the fold."""
    frame = getattr(split, side).frame
    if "timestamp" not in frame.columns:
        raise DataError(f"split {split.name!r}: the leakage audit needs timestamps, and the {side} side has none")
    return frame.select("user", "item", "timestamp")
