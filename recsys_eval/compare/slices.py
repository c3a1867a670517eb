"""Metrics per slice of users: who the winner wins for (docs/CONVENTIONS.md#slices).

The slices (``activity:4``, ``cold:5``, ``time:3``) are each fold's test users in groups, made from
the split alone (:mod:`recsys_eval.split.slices`). Per slice group: every metric's mean over the
group's users with a defined value and its t-interval, and the paired tests of every system against
the baseline on the group's users, p-values corrected within each group.
"""

from __future__ import annotations

import polars as pl

from recsys_eval.compare.distributions import with_fold_means
from recsys_eval.compare.intervals import t_interval_rows

SLICE_KEYS = ["slice", "group", "order"]
_KEYS = ["system", "protocol", "fold", "metric", "k"]


def _sliced(per_user_frame: pl.DataFrame, slices: pl.DataFrame) -> pl.DataFrame:
    """The per-user rows of the users of each slice group (a user appears once per slice)."""
    return per_user_frame.join(slices.select("fold", "user", *SLICE_KEYS), on=["fold", "user"], how="inner")


def slice_means(per_user_frame: pl.DataFrame, slices: pl.DataFrame, *, level: float = 0.95) -> pl.DataFrame:
    """Per (system, protocol, fold, metric, k, slice, group): mean, lower, upper (t-interval at
    ``level``), n (users with a defined value) and n_undefined, ordered by slice and group."""
    rows = t_interval_rows(_sliced(per_user_frame, slices), [*_KEYS, *SLICE_KEYS], level)
    return rows.select(*_KEYS, *SLICE_KEYS, "mean", "lower", "upper", "n", "n_undefined")


def slice_fold_means(means: pl.DataFrame) -> pl.DataFrame:
    """With several folds, rows of fold ``all``: the mean of the fold means, users summed, no
    interval (the folds' groups hold different users)."""
    return with_fold_means(means, [*_KEYS, *SLICE_KEYS], summed=("n", "n_undefined"), blank=("lower", "upper"))


def slice_tests(per_user_frame: pl.DataFrame, slices: pl.DataFrame, **options) -> pl.DataFrame:
    """:func:`recsys_eval.compare.paired_tests` (with ``options``) on the users of each slice group,
    with its slice, group and order; a group with fewer than two users is left out."""
    from recsys_eval.compare.paired import paired_tests

    sliced = _sliced(per_user_frame, slices)
    frames = []
    for (name, group, order), part in sliced.group_by(SLICE_KEYS, maintain_order=True):
        if part.get_column("user").n_unique() >= 2:
            frames.append(paired_tests(part.drop(SLICE_KEYS), **options).with_columns(
                slice=pl.lit(name), group=pl.lit(group), order=pl.lit(order, pl.Int32)))
    return pl.concat(frames) if frames else pl.DataFrame()
