"""The analysis's paired tests as a Spark job over a run's per-unit files: the driver receives the
tests' rows (one per protocol x fold x metric x k x pair x test), never a user's value
(docs/SPARK.md#paired-tests, docs/CONVENTIONS.md#comparing-systems).

Spark reads the per-unit files and reduces them to per-user values with the local engine's code
(:func:`recsys_eval.engine.stats.per_user_table`), then gathers each *part*, one (fold, protocol,
metric) with every system and cutoff, into one task, which tests it with the local analysis's own
function (:func:`recsys_eval.compare.study.part_paired_tests`). The part is the unit the local
analysis tests: its draws (the sign flips of the permutation test, the relative difference's
bootstrap) are seeded by its fold and protocol and run over its users in user order, and its
p-values are corrected within it. A part's tests depend on its users' values alone (the matrix of
:func:`recsys_eval.compare.frames.partitions` orders users by id, whatever order they arrive in), so
the table is the local analysis's to the last bit on any number of partitions.

What this does not distribute: one part's users are tested by one task, which holds them as a
users x (systems x cutoffs) matrix of doubles (e.g. 162,541 users x 5 systems x 6 cutoffs: 39 MB;
100M users: 24 GB); see docs/SPARK.md#paired-tests for why, and what would split a part.
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from recsys_eval.compare.frames import PER_USER_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from recsys_eval.core.results import ResultsFolder

#: The columns that name a part: the local analysis tests one (fold, protocol, metric) at a time.
PART = ["protocol", "fold", "metric"]


def paired_tests_on_spark(spark: SparkSession, files: list[str], *, undefined: str, options: dict,
                          definitions: dict, partitions: int) -> pl.DataFrame | None:
    """The paired tests of every part of the per-unit ``files`` (``options`` and ``definitions``
    as :func:`recsys_eval.compare.study.analyse` passes them to
    :func:`~recsys_eval.compare.study.part_paired_tests`), the parts' rows concatenated in no
    particular order; None when no part has two comparable systems."""
    from recsys_eval.core.spark import job_error, spark_failures
    from recsys_eval.engine.stats import per_user_table

    users = per_user_table(spark, files, undefined, partitions).drop("block")
    parts = users.repartition(partitions, *PART).sortWithinPartitions(*PART)
    try:
        frames = [pl.read_ipc(io.BytesIO(row["table"]))
                  for row in parts.mapInArrow(_part_tests(options, definitions), "table binary").toLocalIterator()]
    except spark_failures() as exc:
        raise job_error(exc) from None
    return pl.concat(frames) if frames else None


def _part_tests(options: dict, definitions: dict):
    """A task testing each whole part of its partition (rows sorted by part), handing back each
    part's rows as Arrow IPC bytes."""

    def task(batches: Iterable) -> Iterator:
        import pyarrow as pa

        from recsys_eval.compare.study import part_paired_tests
        from recsys_eval.engine.partitions import user_chunks

        for chunk in user_chunks(batches, key=PART):
            for users in chunk.partition_by(PART, maintain_order=True):
                tested = part_paired_tests(users.select(PER_USER_COLUMNS), options, definitions)
                if tested:
                    buffer = io.BytesIO()
                    pl.concat(tested).write_ipc(buffer)
                    yield pa.RecordBatch.from_pydict({"table": [buffer.getvalue()]})

    return task


@dataclass(frozen=True)
class SparkPairedTests:
    """The ``paired_runner`` of :func:`recsys_eval.compare.study.analyse` for a run on the Spark
    engine: its paired tests as a Spark job on ``master`` over the folder's per-unit files, in
    ``partitions`` partitions (default: 4 x Spark's parallelism, as the run's folds)."""

    master: str
    partitions: int | None = None

    @classmethod
    def of(cls, engine: dict) -> SparkPairedTests | None:
        """The runner of a run whose engine is ``engine`` (a manifest's ``engine``, or an
        ``EngineConfig`` dumped); None for the local engine, or where PySpark is not installed
        (a Spark run's folder analysed on a laptop: the local analysis gives the same table)."""
        if engine.get("name") != "spark" or importlib.util.find_spec("pyspark") is None:
            return None
        return cls(engine.get("master", "local[2]"), engine.get("partitions"))

    def __call__(self, folder: ResultsFolder, options: dict, undefined: str) -> pl.DataFrame | None:
        from recsys_eval.core.spark import spark_session
        from recsys_eval.core.uris import file_uri

        spark = spark_session(self.master)
        n_parts = self.partitions or 4 * spark.sparkContext.defaultParallelism
        files = [file_uri(path) for path in folder.per_unit_files()]  # the driver's files, whatever the default file system
        if not files:
            return None
        return paired_tests_on_spark(spark, files, undefined=undefined, options=options,
                                     definitions=folder.manifest.protocol_definitions, partitions=n_parts)
