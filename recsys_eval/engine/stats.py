"""Bootstrap intervals as Spark jobs over a fold's per-unit files: the driver holds each (system,
protocol)'s per-block counts and, one (system, protocol) at a time, its replicates' sums, never a
user's value (docs/CONVENTIONS.md#bootstrap-intervals, docs/SPARK.md).

The per-unit files are read by Spark, keyed by (system, protocol, fold, block of users) and sorted,
and each task reduces its users' units to per-user values with the local engine's own code
(:class:`~recsys_eval.measure.aggregate.PartitionState`), in the local unit order, so the values are
the local engine's bits. That per-user table is kept (``persist``) for two passes of
:mod:`recsys_eval.compare.bootstrap`, each task handing back the states of its blocks:

1. per block, the users with a defined value per column (:class:`BlockCounts`), merged on the driver;
2. with those counts broadcast, per block every replicate's exact sum (:class:`Resampled`), merged
   by ``reduceByKey`` per (system, protocol, fold), so the driver receives one state per key.

The blocks are the local engine's (``user // BLOCK_USERS``; text ids by their rank among the
key's users, a window per key), their draws depend on the seed, the block and the counts alone,
and their sums merge exactly: the intervals are the local engine's to the last bit, whatever the
number of partitions.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from recsys_eval.compare.bootstrap import BLOCK_USERS, BlockCounts, Resampled, ResamplePlan, bounds
from recsys_eval.compare.frames import partitions
from recsys_eval.core.results import PER_UNIT_COLUMNS, PER_UNIT_LABELS
from recsys_eval.engine.partitions import user_chunks
from recsys_eval.measure.aggregate import PartitionState

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_KEY = ["system", "protocol", "fold"]
_BLOCK = "block"
_INTERVAL_SCHEMA = {"system": pl.String, "protocol": pl.String, "fold": pl.String, "metric": pl.String,
                    "k": pl.Int32, "mean": pl.Float64, "lower": pl.Float64, "upper": pl.Float64}


def bootstrap_intervals(spark: SparkSession, files: list[str], *, undefined: str, n_resamples: int,
                        seeds: dict[tuple[str, str], int], partitions: int, level: float = 0.95,
                        method: str = "bca", block_users: int = BLOCK_USERS) -> pl.DataFrame:
    """The bootstrap interval of every (system, protocol, fold, metric, k) of the per-unit
    ``files``, as :func:`recsys_eval.compare.confidence_intervals` gives it locally: the resamples
    of a (fold, protocol) seeded by ``seeds[(fold, protocol)]``. Columns: system, protocol, fold,
    metric, k, mean, lower, upper."""
    from pyspark import StorageLevel

    from recsys_eval.core.spark import job_error, spark_failures

    users = per_user_table(spark, files, undefined, partitions, block_users).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        counted: dict[tuple, list[tuple[tuple, BlockCounts]]] = {}
        for row in users.mapInArrow(_states(_Counting), _STATE_SCHEMA).toLocalIterator():
            key, labels, counts = pickle.loads(row["state"])
            counted.setdefault(key, []).append((labels, counts))
        plans = {key: _plan(parts, n_resamples, seeds[(key[2], key[1])]) for key, parts in counted.items()}
        shipped = spark.sparkContext.broadcast(plans)
        merged = (users.mapInArrow(_states(lambda: _Resampling(shipped)), _STATE_SCHEMA).rdd
                  .map(lambda row: pickle.loads(row["state"])).reduceByKey(_merge_resampled))
        rows = []
        for key, resampled in merged.toLocalIterator():
            labels, plan = plans[key]
            mean, lower, upper = bounds(plan.counts, resampled, level=level, method=method)
            rows += [(*key, metric, k, *values) for (metric, k), *values in zip(labels, mean, lower, upper, strict=True)]
        shipped.unpersist()
    except spark_failures() as exc:
        raise job_error(exc) from None
    finally:
        users.unpersist()
    return pl.DataFrame(rows, schema=_INTERVAL_SCHEMA, orient="row")


def per_user_table(spark: SparkSession, files: list[str], undefined: str, partitions: int,
                   block_users: int = BLOCK_USERS) -> DataFrame:
    """The per-user values of the per-unit ``files`` (columns system, protocol, fold, block,
    user, metric, k, value), partitioned by (system, protocol, fold, block) and sorted by them and
    the user: each partition holds whole blocks."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    # every metric, the auxiliary ones too: the per-user reduction reads what it needs (f1's relevant counts)
    frame = read_per_unit_spark(spark, files).where(F.col("user").isNotNull())
    text = isinstance(frame.schema["user"].dataType, T.StringType)
    if text:  # the rank among the key's users, as the local engine numbers text ids
        rank = F.dense_rank().over(Window.partitionBy(*_KEY).orderBy("user")) - 1
        block = F.floor(rank / block_users).cast("long")
    else:  # floor division, exact for any 64-bit id
        block = F.expr(f"(user - pmod(user, {block_users})) div {block_users}").cast("long")
    ordered = (frame.withColumn(_BLOCK, block).repartition(partitions, *_KEY, _BLOCK)
               .sortWithinPartitions(*_KEY, _BLOCK, "user", "metric", "k", "unit"))
    schema = T.StructType([*(T.StructField(c, T.StringType()) for c in _KEY), T.StructField(_BLOCK, T.LongType()),
                           T.StructField("user", T.StringType() if text else T.LongType()),
                           T.StructField("metric", T.StringType()), T.StructField("k", T.IntegerType()),
                           T.StructField("value", T.DoubleType())])
    return ordered.mapInArrow(_user_values(undefined), schema)


def read_per_unit_spark(spark: SparkSession, files: list[str]) -> DataFrame:
    """The per-unit table of ``files`` (a results folder's per-unit files) read by Spark, with the
    columns of the local reader (:func:`recsys_eval.core.results.read_per_unit`): Spark's partition
    discovery gives each file the labels its folders name, from the per-unit folder (``basePath``),
    decoded as Spark escapes them, and typed as text by the schema, never inferred (a fold ``1``
    stays ``"1"``)."""
    from pyspark.sql import types as T

    from recsys_eval.engine.runs import per_unit_schema

    root = files[0].rsplit("/", len(PER_UNIT_LABELS) + 1)[0]
    text = isinstance(spark.read.parquet(files[0]).schema["user"].dataType, T.StringType)
    return (spark.read.schema(per_unit_schema(text)).option("basePath", root).parquet(*files)
            .select(*PER_UNIT_COLUMNS))


def _user_values(undefined: str):
    """A partition's per-unit rows as per-user values (the local engine's per-user reduction, over
    chunks of whole users), each with its block, in (system, protocol, fold, block, user) order."""

    def task(batches: Iterable) -> Iterator:
        for chunk in user_chunks(batches, key=[*_KEY, "user"]):
            blocks = chunk.select(*_KEY, "user", _BLOCK).unique(maintain_order=True)
            users = PartitionState.of(chunk.drop(_BLOCK), undefined=undefined).user_values()
            out = users.join(blocks, on=[*_KEY, "user"], how="left", maintain_order="left")
            yield from (out.select(*_KEY, _BLOCK, "user", "metric", "k", "value")
                        .sort([*_KEY, _BLOCK, "user", "metric", "k"]).to_arrow().to_batches())

    return task


_STATE_SCHEMA = "state binary"


def _states(make):
    """A task handing back, pickled, the states a fresh ``make()`` (one per task) makes of the blocks
    of its partition: ``add(key, block, labels, values)`` per block (``labels``: its (metric, k)
    columns; ``values``: its users x columns, NaN where undefined), then ``finish()``."""

    def task(batches: Iterable) -> Iterator:
        import pyarrow as pa

        handler = make()
        for chunk in user_chunks(batches, key=[*_KEY, _BLOCK]):
            for (*key, block), group in chunk.partition_by([*_KEY, _BLOCK], as_dict=True, maintain_order=True).items():
                part = partitions(group.drop(_BLOCK))[0]
                handler.add(tuple(key), int(block), tuple((m, k) for _, m, k in part.columns.iter_rows()), part.values)
        states = handler.finish()
        if states:
            yield pa.RecordBatch.from_pydict({"state": [pickle.dumps(s) for s in states]})

    return task


class _Counting:
    """Pass 1 of a task: its blocks' counts, merged per key (and columns)."""

    def __init__(self) -> None:
        self.parts: dict[tuple, list[BlockCounts]] = {}

    def add(self, key: tuple, block: int, labels: tuple, values: np.ndarray) -> None:
        self.parts.setdefault((key, labels), []).append(BlockCounts.of(values, block))

    def finish(self) -> list:
        return [(key, labels, BlockCounts.merge(parts)) for (key, labels), parts in self.parts.items()]


class _Resampling:
    """Pass 2 of a task: each block resampled by its key's plan (its values set in the plan's
    columns), the blocks of a key merged."""

    def __init__(self, plans) -> None:
        self.plans, self.merged = plans.value, {}

    def add(self, key: tuple, block: int, labels: tuple, values: np.ndarray) -> None:
        columns, plan = self.plans[key]
        if list(labels) != columns:
            position = {label: i for i, label in enumerate(labels)}
            aligned = np.full((values.shape[0], len(columns)), np.nan)
            for i, label in enumerate(columns):
                if label in position:
                    aligned[:, i] = values[:, position[label]]
            values = aligned
        state = plan.resample(values, block)
        self.merged[key] = Resampled.merge([self.merged[key], state]) if key in self.merged else state

    def finish(self) -> list:
        return list(self.merged.items())


def _plan(parts: list[tuple[tuple, BlockCounts]], n_resamples: int, seed: int) -> tuple[list, ResamplePlan]:
    """A key's columns (every (metric, k) any block has, sorted as the local partitions sort them)
    and the plan of its resamples from its blocks' merged counts."""
    columns = sorted({label for labels, _ in parts for label in labels},
                     key=lambda mk: (mk[0], mk[1] is None, mk[1] or 0))
    aligned = [_widened(counts, labels, columns) for labels, counts in parts]
    return columns, ResamplePlan(BlockCounts.merge(aligned), n_resamples, seed)


def _widened(counts: BlockCounts, labels: tuple, columns: list) -> BlockCounts:
    """``counts`` over ``columns`` (a column the block lacks: no user, an empty sum)."""
    if list(labels) == columns:
        return counts
    where = [labels.index(c) if c in labels else -1 for c in columns]
    defined = np.array([[row[i] if i >= 0 else 0 for i in where] for row in counts.defined], dtype=np.int64)
    return BlockCounts(counts.blocks, defined.reshape(len(counts.blocks), len(columns)),
                       [counts.totals[i] if i >= 0 else 0 for i in where],
                       np.array([counts.low[i] if i >= 0 else np.inf for i in where]),
                       np.array([counts.high[i] if i >= 0 else -np.inf for i in where]))


def _merge_resampled(a: Resampled, b: Resampled) -> Resampled:
    return Resampled.merge([a, b])
