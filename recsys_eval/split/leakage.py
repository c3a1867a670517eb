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

import numpy as np
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
            n_test, n_train_after_test_start, n_train_after_user_test, n_test_future_items, leaking
            (a lazy frame of files when made on Spark, :mod:`recsys_eval.engine.leakage`).
        threshold: the share above which a measure is flagged.
    """

    folds: pl.DataFrame
    users: pl.DataFrame | pl.LazyFrame
    threshold: float = DEFAULT_THRESHOLD


def leakage_audit(splits: list[Split], threshold: float = DEFAULT_THRESHOLD) -> LeakageAudit:
    """The leakage shares of every fold (module docstring), from the splits alone.

    Raises a DataError naming the fold when its data has no timestamps.
    """
    check_threshold(threshold)
    counted = [_counts(split) for split in splits]
    folds = pl.concat([_fold_row(split, counts) for split, counts in zip(splits, counted, strict=True)])
    users = pl.concat([_user_table(split, counts) for split, counts in zip(splits, counted, strict=True)])
    return LeakageAudit(flagged(folds, threshold), users, threshold)


def check_threshold(threshold: float) -> None:
    if not 0 <= threshold <= 1:
        raise DataError(f"leakage threshold {threshold}: expected a share in [0, 1]")


def flagged(folds: pl.DataFrame, threshold: float) -> pl.DataFrame:
    """The folds' rows (:func:`fold_row`) with ``threshold`` and the shares above it, ``flagged``."""
    flags = pl.concat_list([pl.when(pl.col(s) > threshold).then(pl.lit(s)) for s in SHARES]).list.drop_nulls()
    return folds.with_columns(pl.lit(threshold).alias("threshold"), flags.alias("flagged"))


def user_leakage(split: Split) -> pl.DataFrame:
    """One row per test user of ``split`` with the counts behind the shares (:class:`LeakageAudit`)."""
    return _user_table(split, _counts(split))


@dataclass(frozen=True)
class _Counts:
    """Per user index: the first test time tau_u (``NEVER`` without a test row) and the counts
    behind the shares; ``start`` is T0 and ``after_start`` the fold's training rows after it."""

    tau: np.ndarray
    n_train: np.ndarray
    n_test: np.ndarray
    after_start: np.ndarray
    after_user: np.ndarray
    future_items: np.ndarray
    start: int
    n_train_after_start: int


#: The time of an event that never happens: later than any timestamp.
NEVER = np.iinfo(np.int64).max


def _counts(split: Split) -> _Counts:
    """Every count of the audit in a few passes over index arrays (bincount and a running
    minimum per user and per item): no join or hash of the 25M rows of an ML-25M split."""
    train_users, train_items, train_time = _timed(split, "train")
    test_users, test_items, test_time = _timed(split, "test")
    n_users = max(split.train.n_users, split.test.n_users)
    tau = np.full(n_users, NEVER)
    np.minimum.at(tau, test_users, test_time)
    first_seen = np.full(max(split.train.n_items, split.test.n_items), NEVER)
    np.minimum.at(first_seen, train_items, train_time)
    start = int(test_time.min())
    late = train_time > start
    item_first = first_seen[test_items]
    future = (item_first != NEVER) & (item_first > tau[test_users])  # an item never trained on is not known early

    def per_user(users: np.ndarray) -> np.ndarray:
        return np.bincount(users, minlength=n_users).astype(np.int64)

    return _Counts(tau, per_user(train_users), per_user(test_users), per_user(train_users[late]),
                   per_user(train_users[train_time > tau[train_users]]), per_user(test_users[future]),
                   start, int(late.sum()))


def _user_table(split: Split, counts: _Counts) -> pl.DataFrame:
    users = np.flatnonzero(counts.n_test)
    after_user = counts.after_user[users]
    return pl.DataFrame({
        "fold": split.name, "user": split.train.user_ids.gather(users), "test_start": counts.tau[users],
        "n_train": counts.n_train[users], "n_test": counts.n_test[users],
        "n_train_after_test_start": counts.after_start[users], "n_train_after_user_test": after_user,
        "n_test_future_items": counts.future_items[users], "leaking": after_user > 0,
    })


def _fold_row(split: Split, counts: _Counts) -> pl.DataFrame:
    """The fold's shares: training rows of every user count in the first denominator, so the
    train side's rows of users without a test interaction are counted here, not per user."""
    return fold_row(split.name, counts.start, len(split.train), len(split.test), int((counts.n_test > 0).sum()),
                    counts.n_train_after_start, int(counts.after_user.sum()), int(counts.future_items.sum()),
                    int((counts.after_user > 0).sum()))


def fold_row(fold: str, start: int, n_train: int, n_test: int, n_users: int, after_start: int, after_user: int,
             future: int, leaking: int) -> pl.DataFrame:
    """A fold's row of the audit from its counts: T0 (``start``), its train and test rows, its test
    users, the train rows after T0, those after their user's tau_u, the test rows of future items
    and the test users leaking."""
    return pl.DataFrame({
        "fold": [fold], "test_start": [start], "n_train": [n_train], "n_test": [n_test],
        "n_test_users": [n_users],
        "n_train_after_test_start": [after_start],
        "n_train_after_user_test": [after_user],
        "n_test_future_items": [future],
        "n_users_leaking": [leaking],
        "share_after_test_start": [_share(after_start, n_train)],
        "share_after_user_test": [_share(after_user, n_train)],
        "share_future_items": [_share(future, n_test)],
        "share_users_leaking": [_share(leaking, n_users)],
    }, schema_overrides={"test_start": pl.Int64})


def _share(count: int, total: int) -> float:
    return count / total if total else float("nan")


def _timed(split: Split, side: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The user, item and timestamp arrays of one side, or a DataError naming the fold."""
    data = getattr(split, side)
    if not data.has_timestamp:
        raise DataError(f"split {split.name!r}: the leakage audit needs timestamps, and the {side} side has none")
    return data.users, data.items, data.timestamps.astype(np.int64)
