"""``evaluate`` on Spark: TEST, RUN and TRAIN read by Spark, measured per user partition.

The files are read by Spark (local paths, ``file://``, ``s3a://``, ``hdfs://``; Parquet by the
suffix ``.parquet``/``.pq`` or a folder of Parquet files, ``.tsv`` tab-separated, else CSV with a
header), with the rules of the local reader (``recsys-eval evaluate``): TEST ``user, item[,
rating]``, relevant rows rating >= threshold (every row without one), graded gain = the rating;
RUN ``user, item`` and ``score`` and/or ``rank``; TRAIN ``user, item``; ids integer or text
(compared as text when the files disagree); the catalogue is every item of the three files. Every
TEST user is a unit, numbered by its rank among the sorted TEST user ids, as locally.

The three tables become one long table (``kind`` 0 TEST, 1 RUN, 2 TRAIN), repartitioned by a
hash of the user id (Spark's Murmur3 partitioner: deterministic) and sorted by unit within each
partition; each task measures whole users with :mod:`recsys_eval.engine.partitions`. Per-unit
values are written by the executors as a folder of Parquet files, ``per_unit.parquet/``, inside a
temporary sibling of the output folder that is renamed into place only once the summary is written
too: a failed job never leaves per-unit results looking complete. The summary is
:func:`recsys_eval.measure.summarize` of that per-unit table, as locally.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from recsys_eval.core.results import PER_UNIT_SCHEMA
from recsys_eval.engine.partitions import (
    RUN,
    TEST,
    TRAIN,
    MeasureOptions,
    RunMeasure,
    arrow_task,
)
from recsys_eval.engine.spark import SparkError, spark_failures, task_threads
from recsys_eval.errors import ConfigError, DataError, RecsysEvalError, check_choice
from recsys_eval.measure import summarize
from recsys_eval.measure.names import (
    GAINS,
    N_RELEVANT,
    RANKING_METRICS,
    TIES,
    UNDEFINED_POLICIES,
    check_cutoffs,
    check_metrics,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

PER_UNIT_DIR = "per_unit.parquet"
SUMMARY_FILE = "summary.csv"
_INTEGER_TYPES = ("ByteType", "ShortType", "IntegerType", "LongType")
_REMOTE = re.compile(r"^(s3a|s3|s3n|hdfs|viewfs|gs|abfs|abfss|wasb|wasbs):/(?!/)")
_ERROR = re.compile(r"recsys_eval\.\w+(?:\.\w+)*\.(\w+Error): (.*)")


@dataclass
class SparkRunResult:
    """Where ``evaluate_spark`` wrote, its summary, and notes for the user (as the local reader's)."""

    out: str
    summary: pl.DataFrame
    notes: list[str] = field(default_factory=list)


def evaluate_spark(
    spark: SparkSession,
    test: str,
    run: str,
    out: str,
    *,
    train: str | None = None,
    threshold: float | None = None,
    metrics: list[str] | tuple[str, ...] = ("precision", "recall", "f1", "ap", "ndcg", "rr", "hit", "auc"),
    k: list[int] | tuple[int, ...] = (1, 5, 10),
    gain: str = "graded",
    ties: str = "first",
    undefined: str = "skip",
    partitions: int | None = None,
    force: bool = False,
    system: str | None = None,
) -> SparkRunResult:
    """Score a run against test interactions on Spark; write ``per_unit.parquet/`` (a folder of
    Parquet files) and ``summary.csv`` into the folder ``out`` (any Hadoop URI), and return the
    summary. ``partitions``: user partitions (default: Spark's default parallelism x 4).

    Ranking metrics only (per unit, the values are the local engine's to the last bit); the
    whole-run beyond-accuracy metrics and rating metrics are for the local engine.
    """
    names = check_metrics(list(metrics), RANKING_METRICS + (N_RELEVANT,))
    cutoffs = check_cutoffs(list(k))
    check_choice("gain", gain, GAINS)
    check_choice("ties policy", ties, TIES)
    check_choice("undefined-value policy", undefined, UNDEFINED_POLICIES)
    if partitions is not None and partitions < 1:
        raise ConfigError(f"partitions must be a positive integer, got {partitions}")
    fs = HadoopFolder(spark, out)
    if fs.exists() and not force:
        raise ConfigError(f"output folder {out!r} exists; choose another or pass --force to replace it")
    test_name, run_name = f"TEST {test!r}", f"RUN {run!r}"
    test_df = _ids(read_table(spark, test, "TEST"), test_name)
    run_df = _ids(read_table(spark, run, "RUN"), run_name)
    train_df = _ids(read_table(spark, train, "TRAIN"), f"TRAIN {train!r}") if train is not None else None
    test_df = _test_gains(test_df, test_name, threshold, gain)
    run_df, has_score, has_rank = _run_columns(run_df, run_name)
    frames = _common_id_types([test_df, run_df] + ([train_df] if train_df is not None else []))
    test_df, run_df = frames[0], frames[1]
    train_df = frames[2] if train_df is not None else None

    long, n_items, notes = _long_table(spark, test_df, run_df, train_df, test_name, run_name)
    n_parts = partitions or 4 * spark.sparkContext.defaultParallelism
    spec = RunMeasure(
        n_items=n_items, options=MeasureOptions(tuple(names), tuple(cutoffs), gain, ties),
        system=system or _stem(run), test_name=test_name, run_name=run_name,
        has_score=has_score, has_rank=has_rank,
    )
    ordered = long.repartition(n_parts, "user").sortWithinPartitions("unit", "kind")
    text_users = type(long.schema["user"].dataType).__name__ == "StringType"
    per_unit = ordered.mapInArrow(arrow_task(spec, task_threads(spark)), per_unit_schema(text_users))
    summary = write_atomically(fs, per_unit, undefined, force)
    return SparkRunResult(out, summary, notes)


def per_unit_schema(text_users: bool):
    """The Spark schema of per-unit rows; raw user ids are text or integers (long)."""
    from pyspark.sql import types as T

    spark_type = {pl.String: T.StringType(), pl.Int64: T.LongType(), pl.Int32: T.IntegerType(),
                  pl.Float64: T.DoubleType()}
    user = T.StringType() if text_users else T.LongType()
    fields = [T.StructField(c, user if c == "user" else spark_type[t], True) for c, t in PER_UNIT_SCHEMA.items()]
    return T.StructType(fields)


def read_table(spark: SparkSession, path: str, role: str) -> DataFrame:
    """A table read by Spark: Parquet (``.parquet``/``.pq`` or a folder), ``.tsv``, else CSV with a
    header (types inferred from every row, as the local reader)."""
    from pyspark.errors import AnalysisException

    lower = path.lower().rstrip("/")
    try:
        if lower.endswith((".parquet", ".pq")) or _is_folder(spark, path):
            return spark.read.parquet(path)
        separator = "\t" if lower.endswith(".tsv") else ","
        return spark.read.csv(path, header=True, inferSchema=True, sep=separator)
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
            raise DataError(f"{role} file {path!r} does not exist") from None
        raise DataError(f"{role} file {path!r} could not be read: {str(exc).splitlines()[0]}") from None


def _is_folder(spark: SparkSession, path: str) -> bool:
    folder = HadoopFolder(spark, path)
    return folder.exists() and folder.is_folder()


def _ids(frame: DataFrame, name: str) -> DataFrame:
    """Columns user and item present, integer or text, never empty."""
    from pyspark.sql import functions as F

    missing = [c for c in ("user", "item") if c not in frame.columns]
    if missing:
        raise DataError(f"{name}: missing columns {missing}; the columns are {frame.columns}")
    for col in ("user", "item"):
        dtype = type(frame.schema[col].dataType).__name__
        if dtype not in _INTEGER_TYPES and dtype != "StringType":
            raise DataError(f"{name}: column {col!r} has type {frame.schema[col].dataType.simpleString()}; "
                            "expected integer or string ids")
    nulls = frame.select([F.sum(F.col(c).isNull().cast("long")).alias(c) for c in ("user", "item")]).first()
    for col in ("user", "item"):
        if nulls[col]:
            raise DataError(f"{name}: column {col!r} has {nulls[col]:,} empty values")
    return frame


def _numeric(frame: DataFrame, column: str, name: str) -> Column:
    """``column`` as a double; text that is no number, empty, NaN or infinite values are errors
    naming the count and the first (user, item) at fault."""
    from pyspark.sql import functions as F

    raw = F.col(column)
    if type(frame.schema[column].dataType).__name__ == "StringType":
        raw = F.trim(raw)
    value = raw.try_cast("double") if hasattr(raw, "try_cast") else raw.cast("double")
    bad = value.isNull() | F.isnan(value) | F.abs(value).eqNullSafe(float("inf"))
    flagged = frame.select("user", "item", bad.alias("bad")).filter("bad")
    first = flagged.first()
    if first is not None:
        raise DataError(
            f"{name}: column {column!r} has {flagged.count():,} values that are empty, NaN, infinite "
            f"or not numbers (e.g. user {first['user']!r}, item {first['item']!r}); expected finite numbers"
        )
    return value


def _test_gains(test: DataFrame, name: str, threshold: float | None, gain: str) -> DataFrame:
    """TEST with its ``gain``: the rating (1 when binary or without ratings) for relevant rows, 0
    for the others; no relevant row, or a relevant rating <= 0 as a graded gain, is an error."""
    from pyspark.sql import functions as F

    has_rating = "rating" in test.columns
    if threshold is not None and not has_rating:
        raise ConfigError(f"a threshold needs ratings, but {name} has no 'rating' column")
    rating = _numeric(test, "rating", name) if has_rating else F.lit(None).cast("double")
    relevant = rating >= F.lit(threshold) if threshold is not None else F.lit(True)
    value = rating if has_rating and gain != "binary" else F.lit(1.0)
    test = test.select("user", "item", F.when(relevant, value).otherwise(F.lit(0.0)).alias("gain"),
                       relevant.alias("relevant"))
    counts = test.agg(
        F.sum(F.col("relevant").cast("long")).alias("relevant"),
        F.sum((F.col("relevant") & (F.col("gain") <= 0)).cast("long")).alias("bad"),
    ).first()
    if counts["bad"]:
        row = test.filter(F.col("relevant") & (F.col("gain") <= 0)).first()
        raise DataError(
            f"{name}: {counts['bad']:,} relevant rows have a rating <= 0, which cannot be a graded gain "
            f"(e.g. user {row['user']!r}, item {row['item']!r}); use --gain binary or a threshold"
        )
    if not counts["relevant"]:
        raise DataError(f"{name}: no relevant row (rating >= {threshold}): nothing to evaluate")
    return test.select("user", "item", "gain")


def _run_columns(run: DataFrame, name: str) -> tuple[DataFrame, bool, bool]:
    """RUN with ``score`` (double) and ``rank`` (long) where given; ranks must be integers."""
    from pyspark.sql import functions as F

    has_score, has_rank = "score" in run.columns, "rank" in run.columns
    if not (has_score or has_rank):
        raise DataError(
            f"{name}: missing column 'score' or 'rank'; expected user, item and score (higher is "
            f"better) or rank (1 is best); the columns are {run.columns}"
        )
    score = _numeric(run, "score", name) if has_score else F.lit(None).cast("double")
    rank = F.lit(None).cast("long")
    if has_rank:
        value = _numeric(run, "rank", name)
        if run.filter(value != F.round(value)).first() is not None:
            raise DataError(f"{name}: column 'rank' holds non-integer values; expected ranks 1..L per user")
        rank = value.cast("long")
    return run.select("user", "item", score.alias("score"), rank.alias("rank")), has_score, has_rank


def _common_id_types(frames: list[DataFrame]) -> list[DataFrame]:
    """Ids compare across files as integers (long) or, when any file has text ids, as text."""
    from pyspark.sql import functions as F

    for col in ("user", "item"):
        text = any(type(f.schema[col].dataType).__name__ == "StringType" for f in frames)
        target = "string" if text else "long"
        frames = [f.withColumn(col, F.col(col).cast(target)) for f in frames]
    return frames


def _long_table(spark: SparkSession, test: DataFrame, run: DataFrame, train: DataFrame | None,
                test_name: str, run_name: str) -> tuple[DataFrame, int, list[str]]:
    """One table of TEST, RUN (of TEST users) and TRAIN (of TEST users) rows with each user's unit
    (its rank among the sorted TEST user ids); the catalogue size; notes on ignored users."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    users = test.select("user").distinct().orderBy("user")
    user_type = test.schema["user"].dataType
    ranked = users.rdd.zipWithIndex().map(lambda pair: (pair[0][0], pair[1]))
    units = spark.createDataFrame(ranked, T.StructType([T.StructField("user", user_type, False),
                                                        T.StructField("unit", T.LongType(), False)]))
    units = units.cache()
    n_users = units.count()
    run_users = run.select("user").distinct()
    only_run = run_users.join(units, "user", "left_anti")
    counts = run_users.agg(F.count("*").alias("all")).first()["all"], only_run.count()
    notes = []
    if counts[0] == counts[1]:
        raise DataError(
            f"{run_name} and {test_name} share no user: nothing to evaluate "
            f"(e.g. RUN user {run_users.orderBy('user').first()['user']!r}, "
            f"TEST user {users.first()['user']!r})"
        )
    if counts[1]:
        example = only_run.orderBy("user").first()["user"]
        notes.append(f"{counts[1]:,} RUN users are not in TEST and were ignored (e.g. {example!r})")
    if n_users > counts[0] - counts[1]:
        notes.append(f"{n_users - (counts[0] - counts[1]):,} TEST users have no ranked list in RUN: "
                     "they count as empty lists")
    parts = [test.select("user", "item", F.lit(TEST).alias("kind"), "gain",
                         F.lit(None).cast("long").alias("rank"), F.lit(None).cast("double").alias("score")),
             run.select("user", "item", F.lit(RUN).alias("kind"), F.lit(None).cast("double").alias("gain"),
                        "rank", "score")]
    items = [test.select("item"), run.select("item")]
    if train is not None:
        parts.append(train.select("user", "item", F.lit(TRAIN).alias("kind"),
                                  F.lit(None).cast("double").alias("gain"), F.lit(None).cast("long").alias("rank"),
                                  F.lit(None).cast("double").alias("score")))
        items.append(train.select("item"))
    catalogue = items[0]
    for more in items[1:]:
        catalogue = catalogue.unionByName(more)
    n_items = catalogue.distinct().count()
    long = parts[0]
    for more in parts[1:]:
        long = long.unionByName(more)
    long = long.withColumn("kind", F.col("kind").cast("byte")).join(units, "user", "inner")
    return long.select("user", "unit", "kind", "item", "gain", "rank", "score"), n_items, notes


def uri(path: str | Path) -> str:
    """A file name or URI as Spark takes it. A URI that went through ``pathlib.Path`` (as CLI options
    do) lost a slash, ``s3a://bucket/key`` -> ``s3a:/bucket/key``: it is given back (a URI without
    an authority, ``hdfs:/path``, must then be written in full, ``hdfs://namenode/path``)."""
    text = str(path)
    scheme = _REMOTE.match(text)
    return f"{scheme.group(1)}://{text[scheme.end():]}" if scheme else text


def _stem(path: str) -> str:
    """The file name without its suffix, the system's name (as the local ``Path(run).stem``)."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0] if "." in name[1:] else name


class HadoopFolder:
    """A folder on any file system Spark's Hadoop client reaches (local, file://, hdfs://, s3a://),
    through the JVM: exists, delete, rename, write a small text file."""

    def __init__(self, spark: SparkSession, uri: str) -> None:
        jvm = spark.sparkContext._jvm
        self.uri = uri
        self._jvm = jvm
        self.path = jvm.org.apache.hadoop.fs.Path(uri)
        self.fs = self.path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        self.local = self.fs.getUri().getScheme() == "file"

    def child(self, name: str) -> str:
        return self.path.suffix(f"/{name}").toString()

    def sibling(self, prefix: str) -> HadoopFolder:
        name = f".{self.path.getName()}.{prefix}-{uuid.uuid4().hex[:8]}"
        other = object.__new__(HadoopFolder)
        other.__dict__.update(self.__dict__)
        other.path = self._jvm.org.apache.hadoop.fs.Path(self.path.getParent(), name)
        other.uri = other.path.toString()
        return other

    def exists(self) -> bool:
        return bool(self.fs.exists(self.path))

    def is_folder(self) -> bool:
        return bool(self.fs.getFileStatus(self.path).isDirectory())

    def delete(self) -> None:
        if self.exists():
            self.fs.delete(self.path, True)

    def rename(self, target: HadoopFolder) -> None:
        if not self.fs.rename(self.path, target.path):
            raise SparkError(f"could not rename {self.uri!r} to {target.uri!r}")

    def write_text(self, name: str, text: str) -> None:
        stream = self.fs.create(self._jvm.org.apache.hadoop.fs.Path(self.path, name), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()


def write_atomically(out: HadoopFolder, per_unit: DataFrame, undefined: str, force: bool) -> pl.DataFrame:
    """Run the job into a temporary sibling of ``out``, summarise it, then move it into place; on
    any failure the temporary folder is removed and ``out`` is left as it was."""
    temp = out.sibling("tmp")
    try:
        try:
            per_unit.write.parquet(temp.child(PER_UNIT_DIR))
        except spark_failures() as exc:
            raise job_error(exc) from None
        summary = summarize(read_per_unit(per_unit.sparkSession, temp.child(PER_UNIT_DIR), temp.local),
                            undefined=undefined)
        temp.write_text(SUMMARY_FILE, summary.write_csv())
        if out.exists():
            if not force:
                raise ConfigError(f"output folder {out.uri!r} exists; pass --force to replace it")
            old = out.sibling("old")
            out.rename(old)
            temp.rename(out)
            old.delete()
        else:
            temp.rename(out)
        return summary
    finally:
        temp.delete()


def read_per_unit(spark: SparkSession, uri: str, local: bool) -> pl.DataFrame:
    """The per-unit table a job wrote: scanned by polars from a local folder, else through Spark."""
    if local:
        path = uri.removeprefix("file:")
        return pl.scan_parquet(f"{path}/*.parquet").collect()
    return pl.from_arrow(spark.read.parquet(uri).toArrow())


def job_error(exc: BaseException) -> RecsysEvalError:
    """A failed Spark job as a RecsysEvalError: the executor's own error (bad data found in a
    partition) when there is one, with its message, else a SparkError with Spark's first line."""
    text = str(exc)
    found = _ERROR.findall(text)
    if found:
        kind, message = found[-1]
        cls = {"DataError": DataError, "ConfigError": ConfigError}.get(kind, RecsysEvalError)
        return cls(message.strip())
    return SparkError(f"the Spark job failed: {text.strip().splitlines()[0] if text.strip() else type(exc).__name__}")
