"""Metrics per slice of users: who the winner wins for (docs/CONVENTIONS.md#slices).

The slices (``activity:4``, ``cold:5``, ``time:3``) are each fold's test users in groups, made from
the split alone (:mod:`recsys_eval.split.slices`). Per slice group: every metric's mean over the
group's users with a defined value and its t-interval, and the paired tests of every system against
the baseline on the group's users, p-values corrected within each group.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from recsys_eval.compare.distributions import with_fold_means
from recsys_eval.compare.frames import Partition, partitions
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
    with its slice, group and order; a group with fewer than two users is left out.

    The rows equal ``paired_tests`` of the group's rows filtered by hand (the same seed, so the
    same draws), but the per-user frame is laid out as matrices once and each group tests the
    rows of its users (:meth:`~recsys_eval.compare.frames.Partition.subset`), instead of joining
    and laying out every group's rows again."""
    from recsys_eval.compare.paired import TEST_SCHEMA, correct, test_columns

    options = dict(options)
    correction, alpha = options.pop("correction", "holm"), options.pop("alpha", 0.05)
    columns: dict[str, list] = {name: [] for name in [*TEST_SCHEMA, "_at", *SLICE_KEYS]}
    for at, ((name, group, order), parts) in enumerate(_group_partitions(partitions(per_user_frame), slices).items()):
        if max(len(part.users) for part in parts) < 2 and len({u for part in parts for u in part.users}) < 2:
            continue  # (a group's users differ between folds: the set is taken only when each has one)
        rows = test_columns(parts, correction=correction, **options)
        for column, values in rows.items():
            columns[column] += values
        for column, value in zip(("_at", *SLICE_KEYS), (at, name, group, order), strict=True):
            columns[column] += [value] * len(rows["test"])
    if not columns["test"]:
        return pl.DataFrame()
    frame = pl.DataFrame(columns, schema={**TEST_SCHEMA, "_at": pl.Int64, "slice": pl.String, "group": pl.String,
                                          "order": pl.Int32})
    return correct(frame, correction, alpha, labels=("_at", *SLICE_KEYS)).drop("_at")


def _group_partitions(parts: list[Partition], slices: pl.DataFrame) -> dict[tuple, list[Partition]]:
    """Per slice group (slice, group, order; slices as first listed, groups in order), the
    sub-partition of its users in every partition of its fold that has some."""
    keys = slices.select(SLICE_KEYS).unique(maintain_order=True).rows()
    first = {name: i for i, name in reversed(list(enumerate(k[0] for k in keys)))}
    groups: dict[tuple, list[Partition]] = {key: [] for key in sorted(keys, key=lambda k: (first[k[0]], k[2]))}
    for part in parts:
        members = (pl.DataFrame({"user": part.users}).with_row_index("row")
                   .join(slices.filter(pl.col("fold") == part.fold).select("user", *SLICE_KEYS), on="user")
                   .group_by(SLICE_KEYS).agg("row"))
        for name, group, order, rows in members.iter_rows():
            mask = np.zeros(len(part.users), dtype=bool)
            mask[rows] = True
            groups[name, group, order].append(part.subset(mask))
    return {key: found for key, found in groups.items() if found}
