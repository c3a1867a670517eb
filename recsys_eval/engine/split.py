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


@dataclass(frozen=True)
class SplitTask:
    """Marks the test rows of a chunk of whole users (raw ids), as the local splitter would; with
    ``drop_users`` drops the test rows of users left without a train row."""

    rule: PerUserRule
    seed: int
    drop_users: bool = False

    def __call__(self, chunk: pl.DataFrame) -> pl.DataFrame:
        return split_chunk(chunk, self.rule, self.seed, self.drop_users)


def split_chunk(chunk: pl.DataFrame, rule: PerUserRule, seed: int, drop_users: bool = False) -> pl.DataFrame:
    """``chunk`` (every row of its users) with the boolean column ``test``."""
    users = chunk.get_column("user")
    groups = (users.rank("dense") - 1).cast(pl.Int32).to_numpy()
    n_groups = int(groups.max()) + 1 if len(groups) else 0
    keys = row_keys(seed, id_keys(users), id_keys(chunk.get_column("item")))
    times = chunk.get_column("timestamp").cast(pl.Int64).to_numpy() if rule.order == "latest" else None
    test = rule.test_rows(groups, n_groups, keys, times)
    if drop_users:
        in_train = np.bincount(groups[~test], minlength=n_groups) > 0
        return chunk.with_columns(pl.Series(TEST, test)).filter(pl.Series(in_train[groups] | ~test))
    return chunk.with_columns(pl.Series(TEST, test))


def spark_split(frame, method: str, params: dict[str, Any], partitions: int):
    """The Spark DataFrame ``frame`` (raw ids, integer ``timestamp`` seconds where the splitter
    orders by time) with the column ``test`` of splitter ``method`` and its config ``params``
    (``seed`` among them), test rows ``drop_unknown`` drops left out."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from recsys_eval.core.spark import task_threads
    from recsys_eval.engine.partitions import arrow_task

    rule = PerUserRule.of(method, params)
    seed = check_seed(params.get("seed"))
    drop = check_drop_unknown(params.get("drop_unknown", False))
    schema = T.StructType([*frame.schema.fields, T.StructField(TEST, T.BooleanType())])
    task = arrow_task(SplitTask(rule, seed, drop_users=drop in (True, "users")),
                      task_threads(frame.sparkSession), key="user")
    split = frame.repartition(partitions, "user").sortWithinPartitions("user").mapInArrow(task, schema)
    if drop in (True, "items"):
        known = split.filter(~F.col(TEST)).select("item").distinct().withColumn("_known", F.lit(True))
        split = (split.join(known, on="item", how="left").filter(~F.col(TEST) | F.col("_known").isNotNull())
                 .select(*frame.columns, TEST))
    return split


def write_split(split, uri: str) -> None:
    """The split's rows as Parquet partitioned by side (``side=train/``, ``side=test/``, raw ids,
    the input's columns), read back with ``pl.scan_parquet(uri, hive_partitioning=True)``."""
    from pyspark.sql import functions as F

    sides = split.withColumn("side", F.when(F.col(TEST), "test").otherwise("train")).drop(TEST)
    sides.write.mode("errorifexists").partitionBy("side").parquet(uri)
