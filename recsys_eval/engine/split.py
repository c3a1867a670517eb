"""Per-user splits on Spark: the local splitters' rule, drawn by the executors on whole users.

The rows (raw ids, as read: ``user``, ``item`` and ``rating``/``timestamp`` when there) are
partitioned by user; each task marks its users' test rows with
:meth:`recsys_eval.split.keyed.PerUserRule.test_rows`, the very function the local splitters
call, keyed on the raw ids (:func:`recsys_eval.split.keyed.row_keys`): a user's split depends on
the seed and its own rows alone, so it is the local engine's whatever the partitions
(docs/CONVENTIONS.md#per-user-split-draws). ``drop_unknown`` drops test rows of a user without
a train row in the task; of an item without one, by a join with the train side's distinct items
(item-side data). :func:`write_split` writes the result as Parquet partitioned by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from recsys_eval.core.rng import id_keys
from recsys_eval.split.common import check_drop_unknown, check_seed
from recsys_eval.split.keyed import PerUserRule, row_keys

TEST = "test"  # the column the split adds: whether the row goes to test
#: The column :func:`mark_split` adds, and the folders :func:`write_sides` writes: where each row
#: goes (``side=train/``, ``side=test/``), or why ``drop_unknown`` dropped a test row (its user, or
#: its item, has no train row).
SIDE, TRAIN_SIDE, TEST_SIDE, UNKNOWN_USER, UNKNOWN_ITEM = "side", "train", "test", "unknown_user", "unknown_item"


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
    orders by time, any other columns kept) with the column ``SIDE`` of splitter ``method`` and
    its config ``params`` (``seed`` among them): ``train``, ``test``, or, for a test row
    ``drop_unknown`` drops, ``unknown_user`` (its user has no train row; looked at first, as the
    local splitter counts it) or ``unknown_item`` (its item has none: a join with the train
    side's distinct items, item-side data)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from recsys_eval.core.spark import task_threads
    from recsys_eval.engine.partitions import arrow_task

    rule = PerUserRule.of(method, params)
    seed = check_seed(params.get("seed"))
    drop = check_drop_unknown(params.get("drop_unknown", False))
    schema = T.StructType([*frame.schema.fields, T.StructField(SIDE, T.StringType())])
    task = arrow_task(SplitTask(rule, seed, drop_users=drop in (True, "users")),
                      task_threads(frame.sparkSession), key="user")
    marked = frame.repartition(partitions, "user").sortWithinPartitions("user").mapInArrow(task, schema)
    if drop in (True, "items"):
        known = (marked.filter(F.col(SIDE) == TRAIN_SIDE).select("item").distinct()
                 .withColumn("_known", F.lit(True)))
        unknown = (F.col(SIDE) == TEST_SIDE) & F.col("_known").isNull()
        marked = (marked.join(known, on="item", how="left")
                  .withColumn(SIDE, F.when(unknown, F.lit(UNKNOWN_ITEM)).otherwise(F.col(SIDE)))
                  .select(*frame.columns, SIDE))
    return marked


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
