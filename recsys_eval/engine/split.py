"""Splits on Spark: the local splitters' rules, drawn by the executors, so that both engines split alike.

Per-user splits: the rows (raw ids, as read: ``user``, ``item`` and ``rating``/``timestamp`` when
there) are partitioned by user; each task marks its users' test rows with
:meth:`recsys_eval.split.keyed.PerUserRule.test_rows`, the very function the local splitters
call, keyed on the raw ids (:func:`recsys_eval.split.keyed.row_keys`): a user's split depends on
the seed and its own rows alone, so it is the local engine's whatever the partitions
(docs/CONVENTIONS.md#per-user-split-draws). ``drop_unknown`` drops test rows of a user without
a train row in the task; of an item without one, by a join with the train side's distinct items
(item-side data).

The global time split (:func:`recsys_eval.split.temporal.time_split`): a row goes to test when its
timestamp is after the split point, which is one number; a quantile's point is one order statistic
of every row's timestamp, found by a Spark sort whose partitions' counts alone reach the driver
(:func:`nth_smallest`, :func:`global_ranks`). Rolling time windows: a row is in a window, before it
or after it by its timestamp and the window's bounds. ``drop_unknown`` joins the train side's
distinct users and items.

The global keyed splits (docs/CONVENTIONS.md#global-split-draws): the executors key every row (or
distinct user, or item) as the local splitter keys it (:class:`KeyTask`), one Spark sort by key
numbers them in key order (:func:`global_ranks`), and a global holdout tests the places below its
size, global k-fold deals places to folds, the user-disjoint split and cold items take the users
or items below theirs. Per-user k-fold is a per-user draw: partitions of whole users, each task
calling :func:`recsys_eval.split.kfold.user_folds`, as the local splitter does.

:func:`write_split` writes the result as Parquet partitioned by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from recsys_eval.core.rng import id_keys
from recsys_eval.core.spark import global_ranks
from recsys_eval.errors import DataError
from recsys_eval.split.common import check_count, check_drop_unknown, check_fraction, check_seed, round_half_up
from recsys_eval.split.disjoint import fold_in_test, pick_size
from recsys_eval.split.keyed import PER_USER_SPLITTERS, PerUserRule, id_draws, row_keys, sortable
from recsys_eval.split.kfold import check_folds, check_user_folds, user_folds
from recsys_eval.split.temporal import checked_point, point_extra, point_of

TEST = "test"  # the column the split adds: whether the row goes to test
#: The column :func:`mark_split` adds, and the folders :func:`write_sides` writes: where each row
#: goes (``side=train/``, ``side=test/``), or why ``drop_unknown`` dropped a test row (its user, or
#: its item, has no train row).
SIDE, TRAIN_SIDE, TEST_SIDE, UNKNOWN_USER, UNKNOWN_ITEM = "side", "train", "test", "unknown_user", "unknown_item"
#: The side of a rolling window's rows after the window: in neither side of its fold.
LATER = "later"
#: The keyed splitters that cut one order of every row, user or item (holdout: with ``per_user``
#: false; kfold: either way, per user by partitions of whole users).
GLOBAL_SPLITTERS = ("holdout", "kfold", "user_disjoint", "cold_items")
#: The splitters drawn on Spark: the per-user ones (a user's split from the seed and its own rows),
#: the global keyed ones and the time splits (a row's side from its timestamp and the split point
#: or windows alone).
SPARK_SPLITTERS = (*PER_USER_SPLITTERS, *GLOBAL_SPLITTERS[1:], "time", "rolling_time")
KEY, RANK, FOLD = "_key", "_rank", "_fold"  # columns of the keyed splits' intermediate frames


@dataclass(frozen=True)
class SplitTask:
    """Marks the test rows of a chunk of whole users (raw ids), as the local splitter would; with
    ``drop_users`` marks the test rows of users left without a train row (column ``SIDE``)."""

    rule: PerUserRule
    seed: int
    drop_users: bool = False

    def __call__(self, chunk: pl.DataFrame) -> pl.DataFrame:
        marked = split_chunk(chunk, self.rule, self.seed)
        test = marked.get_column(TEST).to_numpy()
        side = np.where(test, TEST_SIDE, TRAIN_SIDE).astype(object)
        if self.drop_users:
            groups, n_groups = user_groups(marked)
            in_train = np.bincount(groups[~test], minlength=n_groups) > 0
            side[test & ~in_train[groups]] = UNKNOWN_USER
        return marked.drop(TEST).with_columns(pl.Series(SIDE, side, dtype=pl.String))


def user_groups(chunk: pl.DataFrame) -> tuple[np.ndarray, int]:
    """Each row's user numbered 0..n-1 in the order of the raw ids (a chunk of whole users), and n."""
    groups = (chunk.get_column("user").rank("dense") - 1).cast(pl.Int32).to_numpy()
    return groups, int(groups.max()) + 1 if len(groups) else 0


def chunk_keys(chunk: pl.DataFrame, seed: int) -> np.ndarray:
    """The :func:`~recsys_eval.split.keyed.row_keys` of the chunk's rows, from their raw ids."""
    return row_keys(seed, id_keys(chunk.get_column("user")), id_keys(chunk.get_column("item")))


def split_chunk(chunk: pl.DataFrame, rule: PerUserRule, seed: int) -> pl.DataFrame:
    """``chunk`` (every row of its users) with the boolean column ``test``."""
    groups, n_groups = user_groups(chunk)
    keys = chunk_keys(chunk, seed)
    times = chunk.get_column("timestamp").cast(pl.Int64).to_numpy() if rule.order == "latest" else None
    return chunk.with_columns(pl.Series(TEST, rule.test_rows(groups, n_groups, keys, times)))


def mark_split(frame, method: str, params: dict[str, Any], partitions: int):
    """The Spark DataFrame ``frame`` (raw ids, integer ``timestamp`` seconds where the splitter
    orders by time, any other columns kept) with the column ``SIDE`` of splitter ``method`` (one
    of :data:`SPARK_SPLITTERS`) and its config ``params`` (``seed`` among them): ``train``,
    ``test``, or, for a test row ``drop_unknown`` drops, ``unknown_user`` (its user has no train
    row; looked at first, as the local splitter counts it) or ``unknown_item`` (its item has none:
    a join with the train side's distinct items, item-side data)."""
    return split_sides(frame, method, params, partitions)[0]


def split_folds(frame, method: str, params: dict[str, Any], partitions: int, source: str = "interactions"
                ) -> list[tuple[str, Any, dict[str, Any]]]:
    """Every fold of splitter ``method`` (one of :data:`SPARK_SPLITTERS`) on ``frame``: its name,
    its rows marked as :func:`mark_split` marks them, and what its ``info`` records beyond its
    counts (a time split's point, a window's bounds); ``source`` names the data in messages."""
    if method == "rolling_time":
        return rolling_folds(frame, params, source)
    if method == "kfold":
        return kfold_folds(frame, params, partitions)
    marked, extra = split_sides(frame, method, params, partitions, source)
    return [(method, marked, extra)]


def split_sides(frame, method: str, params: dict[str, Any], partitions: int, source: str = "interactions"
                ) -> tuple[Any, dict[str, Any]]:
    """:func:`mark_split`'s rows of a splitter of one fold, with what the split's ``info`` records
    beyond its counts (a time split's point)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from recsys_eval.core.spark import task_threads
    from recsys_eval.engine.partitions import arrow_task

    drop = check_drop_unknown(params.get("drop_unknown", False))
    if method == "time":
        point = time_point(frame, params, source)
        marked = mark_time(frame, point, time_min_interactions(params))
        return _mark_dropped(marked, drop).select(*frame.columns, F.col(SIDE)), point_extra(point)
    if is_global_holdout(method, params):
        return _mark_dropped(mark_holdout(frame, params), drop).select(*frame.columns, F.col(SIDE)), {}
    if method == "cold_items":
        marked, extra = mark_cold_items(frame, params)
        return _mark_dropped(marked, drop).select(*frame.columns, F.col(SIDE)), extra
    if method == "user_disjoint":
        marked, extra = mark_user_disjoint(frame, params, partitions, source)
        return _mark_dropped(marked, drop).select(*frame.columns, F.col(SIDE)), extra
    rule = PerUserRule.of(method, params)
    seed = check_seed(params.get("seed"))
    schema = T.StructType([*frame.schema.fields, T.StructField(SIDE, T.StringType())])
    task = arrow_task(SplitTask(rule, seed, drop_users=drop in (True, "users")),
                      task_threads(frame.sparkSession), key="user")
    marked = frame.repartition(partitions, "user").sortWithinPartitions("user").mapInArrow(task, schema)
    return _mark_dropped(marked, drop, users=False).select(*frame.columns, F.col(SIDE)), {}


def _mark_dropped(marked, drop, users: bool = True):
    """``marked`` with the test rows ``drop_unknown`` = ``drop`` drops marked: of users without a
    train row first (unless ``users`` is false: the tasks marked them), then of items."""
    if users and drop in (True, "users"):
        marked = _mark_unknown(marked, "user", UNKNOWN_USER)
    if drop in (True, "items"):
        marked = _mark_unknown(marked, "item", UNKNOWN_ITEM)
    return marked


def _mark_unknown(marked, role: str, side: str):
    """``marked`` with its test rows whose ``role`` (user or item) has no train row marked ``side``
    (a join with the train side's distinct ids of that role)."""
    from pyspark.sql import functions as F

    known = marked.filter(F.col(SIDE) == TRAIN_SIDE).select(role).distinct().withColumn("_known", F.lit(True))
    unknown = (F.col(SIDE) == TEST_SIDE) & F.col("_known").isNull()
    return (marked.join(known, on=role, how="left")
            .withColumn(SIDE, F.when(unknown, F.lit(side)).otherwise(F.col(SIDE))).drop("_known"))


# -- the global time split -------------------------------------------------------------------------
def time_min_interactions(params: dict[str, Any]) -> int:
    """The time split's ``min_user_interactions`` (default 1: every user is split)."""
    value = params.get("min_user_interactions")
    return check_count("min_user_interactions", 1 if value is None else value)


def time_point(frame, params: dict[str, Any], source: str = "interactions") -> int:
    """The last second of train of a time split (:func:`recsys_eval.split.temporal.time_split`'s
    rule) of ``frame``'s rows: ``at`` read by :func:`~recsys_eval.split.temporal.point_of`, a
    quantile's order statistic found by :func:`nth_smallest`, and checked against the rows' time
    range; a DataError without rows or timestamps, as the local splitter raises."""
    if params.get("seed") is not None:
        check_seed(params["seed"])
    low, high, n_rows = time_range(frame, "time_split", source)
    at = params["at"]
    read = point_of(at, n_rows, lambda index: nth_smallest(frame, "timestamp", index))
    return checked_point(at, read, low, high)


def time_range(frame, splitter: str, source: str) -> tuple[int, int, int]:
    """The earliest and latest ``timestamp`` of ``frame`` and its number of rows; a DataError
    without rows or timestamps, as the local splitters raise."""
    from pyspark.sql import functions as F

    if "timestamp" not in frame.columns:
        raise DataError(f"{source}: {splitter} needs timestamps, and the data has none (columns {frame.columns})")
    low, high, n_rows = frame.agg(F.min("timestamp"), F.max("timestamp"), F.count("*")).first()
    if not n_rows:
        raise DataError(f"{source}: no interactions to split")
    return int(low), int(high), int(n_rows)


def mark_time(frame, point: int, min_user_interactions: int = 1):
    """``frame`` with the column ``SIDE``: ``test`` for the rows after ``point`` (of users with at
    least ``min_user_interactions`` rows, counted by a window over the user), else ``train``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    test = F.col("timestamp") > F.lit(point)
    if min_user_interactions > 1:
        test = test & (F.count("*").over(Window.partitionBy("user")) >= min_user_interactions)
    return frame.withColumn(SIDE, F.when(test, F.lit(TEST_SIDE)).otherwise(F.lit(TRAIN_SIDE)))


# -- rolling time windows --------------------------------------------------------------------------
def rolling_folds(frame, params: dict[str, Any], source: str = "interactions") -> list[tuple[str, Any, dict]]:
    """The folds of :func:`recsys_eval.split.rolling.rolling_time` on ``frame``: per window, its
    rows marked ``test`` (in the window), ``train`` (before it) or :data:`LATER` (after it: in
    neither side, as the local fold leaves them out), the windows' counts checked as the local
    splitter checks them (one Spark job for all windows)."""
    from pyspark.sql import functions as F

    from recsys_eval.split.rolling import check_window, check_window_choice, rolling_windows, window_extra, window_name

    n, starts = params.get("n"), params.get("starts")
    check_window_choice(n, starts)
    if params.get("seed") is not None:
        check_seed(params["seed"])
    drop = check_drop_unknown(params.get("drop_unknown", False))
    low, high, _ = time_range(frame, "rolling_time", source)
    seconds, begins = rolling_windows(params["length"], n, starts, high)
    time = F.col("timestamp")
    inside = [((time >= b) & (time < b + seconds), time < b) for b in begins]
    counts = frame.agg(*(F.sum(side.cast("long")) for pair in inside for side in pair)).first()
    folds = []
    for i, (begin, (test, train)) in enumerate(zip(begins, inside, strict=True), 1):
        check_window(i, begin, seconds, int(counts[2 * i - 2] or 0), int(counts[2 * i - 1] or 0), (low, high), source)
        side = F.when(test, F.lit(TEST_SIDE)).when(train, F.lit(TRAIN_SIDE)).otherwise(F.lit(LATER))
        marked = _mark_dropped(frame.withColumn(SIDE, side), drop)
        folds.append((window_name(i), marked.select(*frame.columns, F.col(SIDE)), window_extra(i, begin, seconds)))
    return folds


def nth_smallest(frame, column: str, index: int) -> int:
    """The value at 0-based place ``index`` of ``column`` in ascending order, exactly (one Spark
    sort, :func:`global_ranks`). Ties leave every place's value the same whichever tied row sits
    there."""
    from pyspark.sql import functions as F

    found = global_ranks(frame.select(column), column, name=RANK).filter(F.col(RANK) == index).first()
    if found is None:
        raise IndexError(f"place {index} beyond the {column} values")
    return found[column]


# -- the global keyed splits -----------------------------------------------------------------------
@dataclass(frozen=True)
class KeyTask:
    """Adds the column ``KEY`` to every batch: each row's key as the local splitter computes it
    (:func:`~recsys_eval.split.keyed.row_keys` of ``user`` and ``item``; with one ``role``, the
    :func:`~recsys_eval.split.keyed.id_draws` of that id), as a sortable ``long``."""

    seed: int
    role: str | None = None

    def __call__(self, batches):
        for batch in batches:
            chunk = pl.from_arrow(batch)
            if self.role is None:
                keys = chunk_keys(chunk, self.seed)
            else:
                keys = id_draws(self.seed, id_keys(chunk.get_column(self.role)))
            yield from chunk.with_columns(pl.Series(KEY, sortable(keys))).to_arrow().to_batches()


def with_keys(frame, seed: int, role: str | None = None):
    """``frame`` with :class:`KeyTask`'s column ``KEY``."""
    from pyspark.sql import types as T

    schema = T.StructType([*frame.schema.fields, T.StructField(KEY, T.LongType())])
    return frame.mapInArrow(KeyTask(seed, role), schema)


def _in_play(frame, min_user_interactions: int):
    """Whether each row's user has at least ``min_user_interactions`` rows (a window over the user)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    return F.count("*").over(Window.partitionBy("user")) >= min_user_interactions


def ranked_rows(frame, seed: int, min_user_interactions: int):
    """``frame``'s rows with ``RANK``: the place of each row of a user with at least
    ``min_user_interactions`` rows in key order (equal keys by raw user id, then item id), -1 for
    the others (:func:`recsys_eval.split.keyed.global_rank`); and the number of rows ranked."""
    from pyspark.sql import functions as F

    out = ~_in_play(frame, min_user_interactions) if min_user_interactions > 1 else F.lit(False)
    flagged = with_keys(frame, seed).withColumn("_out", out)
    ranked = global_ranks(flagged, "_out", KEY, "user", "item", name=RANK)  # the rows in play first
    n_play = int(ranked.filter(~F.col("_out")).count())
    return ranked.withColumn(RANK, F.when(F.col("_out"), F.lit(-1)).otherwise(F.col(RANK))).drop("_out", KEY), n_play


def mark_holdout(frame, params: dict[str, Any]):
    """``frame`` with ``SIDE`` of a global holdout (:func:`recsys_eval.split.holdout.holdout`): the
    ``round(fraction * n)`` rows of smallest key among the n rows in play go to test."""
    from pyspark.sql import functions as F

    recorded, least = keyed_params("holdout", params)
    ranked, n_play = ranked_rows(frame, check_seed(params.get("seed")), least)
    size = int(round_half_up(recorded["fraction"] * n_play))
    test = (F.col(RANK) >= 0) & (F.col(RANK) < size)
    return ranked.withColumn(SIDE, F.when(test, F.lit(TEST_SIDE)).otherwise(F.lit(TRAIN_SIDE))).drop(RANK)


def kfold_folds(frame, params: dict[str, Any], partitions: int) -> list[tuple[str, Any, dict[str, Any]]]:
    """The folds of :func:`recsys_eval.split.kfold.kfold` on ``frame``: each row's 0-based fold
    (global: its place in key order mod k; per user: :func:`~recsys_eval.split.kfold.user_folds`
    in partitions of whole users; -1 for users kept in train), computed once, then each fold's
    rows marked as :func:`mark_split` marks them."""
    from pyspark.sql import functions as F

    recorded, least = keyed_params("kfold", params)
    k, seed, drop = recorded["k"], check_seed(params.get("seed")), recorded["drop_unknown"]
    if recorded["per_user"]:
        largest = frame.groupBy("user").count().filter(F.col("count") >= least).agg(F.max("count")).first()[0]
        check_user_folds(k, int(largest or 0), least)
        folded = per_user_folds(frame, k, seed, least, partitions).localCheckpoint()
    else:
        ranked, n_play = ranked_rows(frame, seed, least)
        check_folds(k, n_play)
        folded = ranked.withColumn(FOLD, F.when(F.col(RANK) >= 0, F.col(RANK) % k).otherwise(F.lit(-1)))
    folds = []
    for i in range(k):
        side = F.when(F.col(FOLD) == i, F.lit(TEST_SIDE)).otherwise(F.lit(TRAIN_SIDE))
        marked = _mark_dropped(folded.withColumn(SIDE, side), drop)
        folds.append((f"fold{i + 1}", marked.select(*frame.columns, F.col(SIDE)), {"fold": i + 1}))
    return folds


@dataclass(frozen=True)
class FoldTask:
    """Adds ``FOLD`` to a chunk of whole users: per-user k-fold's fold of each row
    (:func:`recsys_eval.split.kfold.user_folds`), -1 for users with fewer than ``least`` rows."""

    k: int
    seed: int
    least: int

    def __call__(self, chunk: pl.DataFrame) -> pl.DataFrame:
        groups, n_groups = user_groups(chunk)
        user_draws = id_draws(self.seed, id_keys(chunk.get_column("user").unique().sort()))
        fold = user_folds(groups, n_groups, chunk_keys(chunk, self.seed), user_draws, self.k)
        fold[np.bincount(groups, minlength=n_groups)[groups] < self.least] = -1
        return chunk.with_columns(pl.Series(FOLD, fold, dtype=pl.Int64))


def per_user_folds(frame, k: int, seed: int, least: int, partitions: int):
    """``frame`` with :class:`FoldTask`'s ``FOLD``, drawn in ``partitions`` partitions of whole users."""
    from pyspark.sql import types as T

    from recsys_eval.core.spark import task_threads
    from recsys_eval.engine.partitions import arrow_task

    schema = T.StructType([*frame.schema.fields, T.StructField(FOLD, T.LongType())])
    task = arrow_task(FoldTask(k, seed, least), task_threads(frame.sparkSession), key="user")
    return frame.repartition(partitions, "user").sortWithinPartitions("user").mapInArrow(task, schema)


def is_keyed_global(method: str, params: dict[str, Any]) -> bool:
    """Whether splitter ``method`` with ``params`` is a global keyed split (:func:`keyed_params`
    records its parameters): one of :data:`GLOBAL_SPLITTERS`, holdout only with ``per_user`` false."""
    return method in GLOBAL_SPLITTERS and not (method == "holdout" and params.get("per_user"))


def is_global_holdout(method: str, params: dict[str, Any]) -> bool:
    return method == "holdout" and not params.get("per_user")


def keyed_params(method: str, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The parameters a global keyed split of ``method`` (one of :data:`GLOBAL_SPLITTERS`) records
    in its ``info``, checked as the local splitter checks them and its defaults filled in, and its
    ``min_user_interactions``."""
    from recsys_eval.split.disjoint import cold_items_params, user_disjoint_params

    drop = check_drop_unknown(params.get("drop_unknown", False))
    if method == "cold_items":
        share, n_items = cold_items_params(params.get("fraction"), params.get("n_items"), drop)
        return {"fraction": share, "n_items": n_items, "drop_unknown": drop}, 1
    if method == "user_disjoint":
        share, n_users, keep, order = user_disjoint_params(params.get("fraction"), params.get("n_users"),
                                                           params.get("fold_in", 0.8), params.get("order", "random"))
        own, default = {"fraction": share, "n_users": n_users, "fold_in": keep, "order": order}, 2 if keep > 0 else 1
    else:
        per_user = bool(params.get("per_user", False))
        own = ({"fraction": check_fraction("fraction", params.get("fraction")), "per_user": per_user}
               if method == "holdout" else {"k": check_count("k", params.get("k", 5), minimum=2), "per_user": per_user})
        default = 2 if per_user else 1
    least = params.get("min_user_interactions")
    least = check_count("min_user_interactions", default if least is None else least)
    return {**own, "min_user_interactions": least, "drop_unknown": drop}, least


def mark_cold_items(frame, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``frame`` with ``SIDE`` of :func:`recsys_eval.split.disjoint.cold_items`: every row of the
    items of smallest key (a sort of the distinct items, joined back: item-side data) in test."""
    from pyspark.sql import functions as F

    recorded, _ = keyed_params("cold_items", params)
    seed = check_seed(params.get("seed"))
    items = global_ranks(with_keys(frame.select("item").distinct(), seed, "item"), KEY, "item", name=RANK)
    size = pick_size(int(items.count()), recorded["fraction"], recorded["n_items"], what="items")
    cold = items.filter(F.col(RANK) < size).select("item", F.lit(True).alias("_cold"))
    marked = frame.join(F.broadcast(cold), on="item", how="left")
    side = F.when(F.col("_cold").isNotNull(), F.lit(TEST_SIDE)).otherwise(F.lit(TRAIN_SIDE))
    return marked.withColumn(SIDE, side).drop("_cold"), {"cold_items": size}


def mark_user_disjoint(frame, params: dict[str, Any], partitions: int, source: str = "interactions"
                       ) -> tuple[Any, dict[str, Any]]:
    """``frame`` with ``SIDE`` of :func:`recsys_eval.split.disjoint.user_disjoint`: the eligible
    users of smallest key (a sort of the distinct users) are test users, joined back to their rows;
    each test user's held-out rows marked in partitions of whole users (:class:`FoldInTask`)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from recsys_eval.core.spark import task_threads
    from recsys_eval.engine.partitions import arrow_task

    recorded, least = keyed_params("user_disjoint", params)
    seed = check_seed(params.get("seed"))
    if recorded["order"] == "latest" and "timestamp" not in frame.columns:
        raise DataError(f"{source}: user_disjoint with order 'latest' needs timestamps, and the data has none "
                        f"(columns {frame.columns})")
    eligible = frame.groupBy("user").count().filter(F.col("count") >= least).select("user")
    users = global_ranks(with_keys(eligible, seed, "user"), KEY, "user", name=RANK)
    size = pick_size(int(users.count()), recorded["fraction"], recorded["n_users"])
    chosen = users.filter(F.col(RANK) < size).select("user", F.lit(True).alias("_test_user"))
    joined = frame.join(chosen, on="user", how="left").withColumn("_test_user", F.col("_test_user").isNotNull())
    schema = T.StructType([*frame.schema.fields, T.StructField(SIDE, T.StringType())])
    task = arrow_task(FoldInTask(seed, recorded["fold_in"], recorded["order"] == "latest", tuple(frame.columns)),
                      task_threads(frame.sparkSession), key="user")
    marked = (joined.repartition(partitions, "user").sortWithinPartitions("user").mapInArrow(task, schema)
              .localCheckpoint())
    fold_in_rows = marked.join(chosen, on="user").filter(F.col(SIDE) == TRAIN_SIDE).count()
    return marked, {"fold_in": True, "test_users": size, "fold_in_interactions": int(fold_in_rows)}


@dataclass(frozen=True)
class FoldInTask:
    """Marks ``SIDE`` on a chunk of whole users flagged ``_test_user``: a test user's held-out rows
    test (:func:`recsys_eval.split.disjoint.fold_in_test`), every other row train; keeps ``columns``."""

    seed: int
    keep: float
    by_time: bool
    columns: tuple[str, ...]

    def __call__(self, chunk: pl.DataFrame) -> pl.DataFrame:
        groups, n_groups = user_groups(chunk)
        is_test_user = np.zeros(n_groups, dtype=bool)
        is_test_user[groups] = chunk.get_column("_test_user").to_numpy()
        keys = chunk_keys(chunk, self.seed)
        times = chunk.get_column("timestamp").cast(pl.Int64).to_numpy() if self.by_time else None
        test = fold_in_test(groups, n_groups, keys, times, is_test_user, self.keep)
        side = pl.Series(SIDE, np.where(test, TEST_SIDE, TRAIN_SIDE).astype(object), dtype=pl.String)
        return chunk.select(*self.columns).with_columns(side)


def spark_split(frame, method: str, params: dict[str, Any], partitions: int):
    """:func:`mark_split`'s rows as the split keeps them: the column ``test`` instead of ``SIDE``,
    the test rows ``drop_unknown`` drops left out."""
    from pyspark.sql import functions as F

    marked = mark_split(frame, method, params, partitions)
    return (marked.filter(F.col(SIDE).isin(TRAIN_SIDE, TEST_SIDE))
            .withColumn(TEST, F.col(SIDE) == TEST_SIDE).drop(SIDE))


def write_split(split, uri: str) -> None:
    """The split's rows (column ``test``) as Parquet partitioned by side (``side=train/``,
    ``side=test/``, raw ids, the input's columns), read back with
    ``pl.scan_parquet(uri, hive_partitioning=True)``."""
    from pyspark.sql import functions as F

    write_sides(split.withColumn(SIDE, F.when(F.col(TEST), TEST_SIDE).otherwise(TRAIN_SIDE)).drop(TEST), uri)


def write_sides(marked, uri: str) -> None:
    """Rows with the column ``SIDE`` as Parquet partitioned by it (``side=<side>/``), replacing
    what ``uri`` held (a rerun of the same split writes the same rows)."""
    marked.write.mode("overwrite").partitionBy(SIDE).parquet(uri)
