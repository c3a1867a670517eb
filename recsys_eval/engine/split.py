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
(:func:`nth_smallest`). Rolling time windows: a row is in a window, before it or after it by its
timestamp and the window's bounds. ``drop_unknown`` joins the train side's distinct users and items.

:func:`write_split` writes the result as Parquet partitioned by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from recsys_eval.core.rng import id_keys
from recsys_eval.errors import DataError
from recsys_eval.split.common import check_count, check_drop_unknown, check_seed
from recsys_eval.split.keyed import PER_USER_SPLITTERS, PerUserRule, row_keys
from recsys_eval.split.temporal import checked_point, point_extra, point_of

TEST = "test"  # the column the split adds: whether the row goes to test
#: The column :func:`mark_split` adds, and the folders :func:`write_sides` writes: where each row
#: goes (``side=train/``, ``side=test/``), or why ``drop_unknown`` dropped a test row (its user, or
#: its item, has no train row).
SIDE, TRAIN_SIDE, TEST_SIDE, UNKNOWN_USER, UNKNOWN_ITEM = "side", "train", "test", "unknown_user", "unknown_item"
#: The side of a rolling window's rows after the window: in neither side of its fold.
LATER = "later"
#: The splitters drawn on Spark: the per-user ones (a user's split from the seed and its own rows)
#: and the time splits (a row's side from its timestamp and the split point or windows alone).
SPARK_SPLITTERS = (*PER_USER_SPLITTERS, "time", "rolling_time")


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
            users = marked.get_column("user")
            groups = (users.rank("dense") - 1).cast(pl.Int32).to_numpy()
            in_train = np.bincount(groups[~test], minlength=int(groups.max()) + 1 if len(groups) else 0) > 0
            side[test & ~in_train[groups]] = UNKNOWN_USER
        return marked.drop(TEST).with_columns(pl.Series(SIDE, side, dtype=pl.String))


def split_chunk(chunk: pl.DataFrame, rule: PerUserRule, seed: int) -> pl.DataFrame:
    """``chunk`` (every row of its users) with the boolean column ``test``."""
    users = chunk.get_column("user")
    groups = (users.rank("dense") - 1).cast(pl.Int32).to_numpy()
    n_groups = int(groups.max()) + 1 if len(groups) else 0
    keys = row_keys(seed, id_keys(users), id_keys(chunk.get_column("item")))
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
    """The value at 0-based place ``index`` of ``column`` in ascending order, exactly: Spark sorts
    the column (range partitions, in order) and numbers each row within its partition
    (``monotonically_increasing_id``: the partition in the bits from 33 up, the place below),
    the driver reads one count per partition, finds the partition and place ``index`` falls on,
    and reads that one row. Ties leave every place's value the same whichever tied row sits there."""
    from pyspark.sql import functions as F

    ordered = (frame.select(column).orderBy(column)
               .select(column, F.monotonically_increasing_id().alias("_place")).localCheckpoint())
    counts = sorted(ordered.groupBy(F.shiftright("_place", 33).alias("_part")).count().collect())
    before = 0
    for part, count in counts:
        if index < before + count:
            return ordered.filter(F.col("_place") == (int(part) << 33) + index - before).first()[column]
        before += count
    raise IndexError(f"place {index} of {before} values")


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
