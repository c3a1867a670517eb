"""``evaluate`` on Spark: TEST, RUN and TRAIN read by Spark, measured per user partition.

The files are read by Spark (local paths, ``file://``, ``s3a://``, ``hdfs://``; Parquet by the
suffix ``.parquet``/``.pq`` or a folder of Parquet files, ``.tsv`` tab-separated, else CSV with a
header) and measured with the rules of the local reader, :func:`recsys_eval.data.runs.load_run`:
every chunk of users is checked and turned into Targets and Rankings by that reader's own functions
(:mod:`recsys_eval.engine.partitions`), so the same bad row gets the same message. What needs the
whole input is done by Spark first: the id types (a file's text ids that are all integers are
integers; ids are compared as text when some file has text ids, as the local index does), the units
(every TEST user, numbered by its rank among the sorted TEST user ids), the catalogue (every item of
the three files), the notes on users only one file has, and the two checks on the whole input (a
relevant row, a user TEST and RUN share).

The three tables become one long table (``kind`` 0 TEST, 1 RUN, 2 TRAIN), repartitioned by a
hash of the user id (Spark's Murmur3 partitioner: deterministic) and sorted by unit within each
partition. The executors write the per-unit values in the local engine's results-folder layout
(``per_unit/fold=0/protocol=<protocol>/system=<system>/part-<partition>.parquet``, no checksum or
marker files beside them, the labels in the folders' names and not in the files), and reduce
their users to the summary's exact sums (:class:`~recsys_eval.measure.aggregate.SummaryState`),
which reach the driver through an accumulator: the driver never reads a per-unit row, and its
summary is the local engine's to the last bit. ``summary.csv``/``.parquet`` and the manifest are
written beside them, in a temporary sibling of the output folder renamed into place only once
everything is written: a failed job never leaves results looking complete, and the folder opens
with ``recsys-eval report`` and ``compare`` like the local engine's.

Rating metrics are measured per user on the judged pairs RUN scores (TEST needs ratings and RUN
scores), each user numbered by its rank among the users with such a pair (a Spark job, as the units);
the micro MAE and RMSE, values of the whole run, are made on the driver from the partitions' exact
error sums and written as the last per-unit file (``part-<partitions>.parquet``).

Beyond-accuracy metrics read the whole input's items: Spark jobs index the catalogue (every item of
the three files, its raw ids collected and sorted as the local index sorts them) and count TRAIN
(each item's TRAIN users, the TRAIN users), and the genres file is read; these item-sized arrays
(:class:`~recsys_eval.engine.partitions.Catalogue`, with TRAIN's item side made of the counts by
:func:`~recsys_eval.measure.beyond.counted_item_side`) are broadcast. Each chunk measures its users
over that catalogue, each user's profile from its own TRAIN rows, which its partition holds with its
TEST and RUN rows. The run-level values (coverage, Gini, entropy, PopRSP, PopREO) come from the
chunks' counts, summed on the driver as they arrive (:class:`~recsys_eval.engine.beyond.RunLevel`)
and written with the rating ones as the last per-unit file.
"""

from __future__ import annotations

import io
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from recsys_eval.core.results import (
    MANIFEST,
    PER_UNIT_FILE_COLUMNS,
    PER_UNIT_LABELS,
    PER_UNIT_SCHEMA,
    SUMMARY,
    Manifest,
    partition_labels,
    per_unit_file,
    per_unit_folder,
)
from recsys_eval.data.runs import FULL_RANKING, GRADED_FORMATS, read_table
from recsys_eval.engine.formats import LINE_FORMATS, SPARK_FORMATS, read_lines, spark_format
from recsys_eval.engine.partitions import (
    RUN,
    MERGED,
    TEST,
    TRAIN,
    Catalogue,
    RunMeasure,
    SummedPartitions,
    arrow_task,
)
from recsys_eval.pipeline.options import MeasureOptions
from recsys_eval.core.spark import SparkError, job_error, ranked, spark_failures, task_threads
from recsys_eval.core.uris import file_uri
from recsys_eval.errors import ConfigError, DataError, check_choice
from recsys_eval.measure.metrics import (
    ALL_METRICS,
    BEYOND_METRICS,
    GAINS,
    N_RELEVANT,
    RATING_METRICS,
    TIES,
    UNDEFINED_POLICIES,
    check_cutoffs,
    check_metrics,
    metric_params,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Rows of each file the driver reads first, to check columns and types with the local reader.
SAMPLE_ROWS = 1000
_FLOAT = re.compile(r"^(Float|Double|Decimal)Type$")
_WHOLE_TEXT = "^[+-]?[0-9]+$"  # text polars reads as an integer id (no blanks, no exponent)
_PART = re.compile(r"^part-(\d+)-.*\.parquet$")


@dataclass
class SparkRunResult:
    """Where ``evaluate_spark`` wrote, its summary, and notes for the user (as the local reader's)."""

    out: str
    summary: pl.DataFrame
    notes: list[str] = field(default_factory=list)


@dataclass
class _File:
    """One input file as Spark read it, with its name for messages and its role."""

    frame: DataFrame
    name: str
    kind: int
    values: tuple[str, ...]
    format: str


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
    params: dict[str, float] | None = None,
    run_format: str | None = None,
    test_format: str | None = None,
    genres: str | None = None,
) -> SparkRunResult:
    """Score a run against test interactions on Spark; write ``per_unit/`` (the local engine's
    layout) and ``summary.csv`` into the folder ``out`` (any Hadoop URI), and return the
    summary. ``partitions``: user partitions (default: Spark's default parallelism x 4);
    ``params``: metric parameters (``rbp_persistence``), their defaults where absent;
    ``run_format`` and ``test_format`` (TEST and TRAIN): the files' formats, default from their
    extensions (:mod:`recsys_eval.engine.formats`); ``genres``: a file of ``item, genres`` (CSV
    with a header, TSV or Parquet) for ILD and calibration. TREC qrels without a threshold count
    grades >= 1 as relevant, as trec_eval and the local reader do.

    Ranking, rating and beyond-accuracy metrics: per unit and per run, the values are the local
    engine's to the last bit.
    """
    names = check_metrics(list(metrics), ALL_METRICS + (N_RELEVANT,))
    beyond = [n for n in names if n in BEYOND_METRICS]
    if beyond:
        from recsys_eval.measure.beyond import check_beyond_inputs

        check_beyond_inputs(beyond, train=train is not None, genres=genres is not None)
    rating = tuple(n for n in names if n in RATING_METRICS)
    names = [n for n in names if n not in rating] + list(rating)  # the local engine's order
    cutoffs = check_cutoffs(list(k))
    check_choice("gain", gain, GAINS)
    check_choice("ties policy", ties, TIES)
    check_choice("undefined-value policy", undefined, UNDEFINED_POLICIES)
    if partitions is not None and partitions < 1:
        raise ConfigError(f"partitions must be a positive integer, got {partitions}")
    fs = HadoopFolder(spark, out)
    if fs.exists() and not force:
        raise ConfigError(f"output folder {out!r} exists; choose another or pass --force to replace it")
    files = [_read(spark, test, TEST, f"TEST {test}", test_format), _read(spark, run, RUN, f"RUN {run}", run_format)]
    if train is not None:
        files.append(_read(spark, train, TRAIN, f"TRAIN {train}", test_format))
    text_ids = _common_types(files)
    test_f, run_f = files[0], files[1]
    graded = threshold is None and test_f.format in GRADED_FORMATS and "rating" in test_f.values
    if graded:
        threshold = 1.0
    _check_relevant(test_f, threshold)
    if rating and not ("rating" in test_f.values and run_f.values == ("score",)):  # as the local reader
        raise DataError("rating metrics need a 'rating' column in TEST and a 'score' column in RUN")
    long, n_users, items, notes = _long_table(files, rating=bool(rating), catalogue=bool(beyond))
    n_items = items if isinstance(items, int) else items.len()
    if graded:
        notes.insert(0, f"{test_f.name}: relevant rows are those with grade >= 1 (as trec_eval counts them)")
    ranking = tuple(n for n in names if n not in rating)
    options = MeasureOptions(ranking, rating, tuple(cutoffs), gain, ties, params=metric_params(params or {}))
    catalogue = run_level = None
    if beyond:
        catalogue = catalogue_of(spark, items, files[2] if train is not None else None, beyond, options.params, genres)
        run_level = _run_level(options, catalogue, text_ids[0])
        catalogue = spark.sparkContext.broadcast(catalogue)
    spec = RunMeasure(
        n_items=n_items, options=options, catalogue=catalogue,
        system=system or _stem(run), test_name=test_f.name, run_name=run_f.name,
        train_name=files[2].name if train is not None else None, run_values=run_f.values,
        test_rating="rating" in test_f.values, train_rating=train is not None and "rating" in files[2].values,
        text_ids=text_ids, threshold=threshold,
    )
    n_parts = partitions or 4 * spark.sparkContext.defaultParallelism
    ordered = long.repartition(n_parts, "user").sortWithinPartitions("unit", "kind")
    sums = spark.sparkContext.accumulator(SummedPartitions(run_level=run_level), MERGED)
    task = arrow_task(spec, task_threads(spark), sums=sums, undefined=undefined)
    per_unit = ordered.mapInArrow(task, per_unit_schema(text_ids[0]))
    manifest = Manifest(
        experiment=_stem(out), kind="evaluate", created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        engine={"name": "spark", "master": spark.sparkContext.master, "partitions": n_parts},
        dataset=test, users=n_users, items=n_items, folds=["0"], systems=[spec.system], metrics=names, k=cutoffs,
        metric_params=spec.options.params, relevance_threshold=threshold, undefined=undefined, tests=[])
    summary = write_atomically(fs, per_unit, sums, manifest, force, text_ids[0], protocol=FULL_RANKING)
    return SparkRunResult(out, summary, notes)


def catalogue_of(spark: SparkSession, item_ids: pl.Series, train: _File | None, names: list[str],
                 params: dict[str, float], genres: str | None = None) -> Catalogue:
    """What the beyond-accuracy metrics ``names`` read of the whole input, item-sized: the catalogue
    ``item_ids`` (sorted raw ids); TRAIN's item side from two Spark jobs, per item its TRAIN users
    (distinct pairs counted by item) and the TRAIN users, which come back as one row per item
    (:func:`~recsys_eval.measure.beyond.counted_item_side`); the genres file's matrix over the
    catalogue. No user's row reaches the driver."""
    from recsys_eval.measure.beyond import counted_item_side, item_genres

    from pyspark.sql import functions as F

    side = None
    if train is not None:
        pairs = train.frame.select("user", "item").distinct()
        if pairs.filter(F.col("user").isNull() | F.col("item").isNull()).limit(1).count():
            # the partitions check TEST users' rows; the others count in the popularity
            raise DataError(f"{train.name}: a row without a user or an item id; expected both in every row")
        per_item = pl.from_arrow(pairs.groupBy("item").count().toArrow())
        holders = np.zeros(item_ids.len())
        at = item_ids.search_sorted(per_item.get_column("item").cast(item_ids.dtype)).to_numpy()
        holders[at] = per_item.get_column("count").to_numpy()
        side = counted_item_side(holders, pairs.select("user").distinct().count(), names, params)
    matrix = None
    if genres is not None:
        matrix = item_genres(_read_genres(spark, genres), item_ids, f"GENRES {genres!r}")
    return Catalogue(item_ids, side, matrix)


def _read_genres(spark: SparkSession, path: str) -> pl.DataFrame:
    """A genres file (one row per item), read by Spark (any URI) as the local reader reads it:
    Parquet by its suffix or a folder, ``.tsv`` tab-separated, else CSV with a header."""
    from pyspark.errors import AnalysisException

    lower = path.rstrip("/").lower()
    try:
        if lower.endswith((".parquet", ".pq")) or _is_folder(spark, path):
            frame = spark.read.parquet(path)
        else:
            frame = spark.read.csv(path, header=True, inferSchema=True, sep="\t" if lower.endswith(".tsv") else ",")
    except AnalysisException as exc:
        raise DataError(f"GENRES {path!r}: could not be read ({str(exc).splitlines()[0]})") from None
    return pl.from_arrow(frame.toArrow())


def _run_level(options: MeasureOptions, catalogue: Catalogue, text_users: bool):
    """The driver's sum of the chunks' run-level counts, over the catalogue and TRAIN's item side
    (:class:`~recsys_eval.engine.beyond.RunLevel`); None without a run-level metric."""
    from recsys_eval.core.interactions import Interactions
    from recsys_eval.engine.beyond import RunLevel
    from recsys_eval.measure.lists import with_item_side

    if not options.run_level:
        return None
    rows = pl.DataFrame(schema={"user": pl.Int32, "item": pl.Int32})
    template = Interactions(rows, pl.Series("user_id", [], pl.String if text_users else pl.Int64), catalogue.item_ids)
    trains = {} if catalogue.item_side is None else {
        FULL_RANKING: with_item_side(template.with_frame(rows), catalogue.item_side)}
    return RunLevel(options, template, trains)


def per_unit_schema(text_users: bool):
    """The Spark schema of per-unit rows; raw user ids are text or integers (long)."""
    from pyspark.sql import types as T

    spark_type = {pl.String: T.StringType(), pl.Int64: T.LongType(), pl.Int32: T.IntegerType(),
                  pl.Float64: T.DoubleType()}
    user = T.StringType() if text_users else T.LongType()
    fields = [T.StructField(c, user if c == "user" else spark_type[t], True) for c, t in PER_UNIT_SCHEMA.items()]
    return T.StructType(fields)


def _read(spark: SparkSession, path: str, kind: int, name: str, given: str | None = None) -> _File:
    """A file read by Spark in its format (``given``, else its extension's:
    :func:`~recsys_eval.engine.formats.spark_format`; a folder without one is Parquet): a table
    with a header (CSV types inferred from every row, as the local reader) or header-less TREC or
    Elliot lines; its first rows checked by the local reader (columns present, ids and numbers
    readable, not empty)."""
    from pyspark.errors import AnalysisException

    role = "run" if kind == RUN else "judgments"
    fmt = spark_format(path, given, role, name)
    try:
        if fmt == "parquet" or (given is None and _is_folder(spark, path)):
            fmt, frame = "parquet", spark.read.parquet(path)
        elif fmt in LINE_FORMATS:
            frame = read_lines(spark, path, fmt, role, name)
        else:
            frame = spark.read.csv(path, header=True, inferSchema=True, sep="\t" if fmt == "tsv" else ",")
    except AnalysisException as exc:
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
            raise DataError(f"{name}: no such file") from None
        raise DataError(f"{name}: could not be read ({str(exc).splitlines()[0]})") from None
    sample = pl.from_arrow(frame.limit(SAMPLE_ROWS).toArrow())
    try:
        read_table(sample, role, name=name)
    except DataError as exc:
        if given is None and fmt in ("csv", "tsv") and "missing column" in str(exc):
            raise DataError(f"{exc}; Spark reads a file as {fmt.upper()} with a header unless --format or its "
                            f"extension tells another format ({', '.join(SPARK_FORMATS)})") from None
        raise
    values = tuple(c for c in (("score", "rank") if kind == RUN else ("rating",)) if c in frame.columns)
    return _File(frame.select("user", "item", *values), name, kind, values, fmt)


def _is_folder(spark: SparkSession, path: str) -> bool:
    folder = HadoopFolder(spark, path)
    return folder.exists() and folder.is_folder()


def _type(file: _File, column: str) -> str:
    return type(file.frame.schema[column].dataType).__name__


def _common_types(files: list[_File]) -> tuple[bool, bool]:
    """Give the files' ids and values the types the local reader gives them, and the same type in
    every file: a file's text ids that are all whole numbers become integers; ids are then text
    when some file's are (integers written as text), else integers (doubles when some file has
    float ids, which each partition checks to be whole). Values are doubles, or text when some
    file has text there (each partition parses it and names a bad value). Returns whether user and
    item ids are text."""
    from pyspark.sql import functions as F

    text = []
    for column in ("user", "item"):
        for file in files:
            if _type(file, column) == "StringType":
                value = F.col(column)
                whole = value.rlike(_WHOLE_TEXT) & value.try_cast("long").isNotNull()
                if file.frame.filter(value.isNotNull() & ~whole).limit(1).count() == 0:
                    file.frame = file.frame.withColumn(column, value.try_cast("long"))
        types = [_type(f, column) for f in files]
        target = ("string" if "StringType" in types else
                  "double" if any(_FLOAT.match(t) for t in types) else "long")
        for file in files:
            file.frame = file.frame.withColumn(column, F.col(column).cast(target))
        text.append(target == "string")
    for column in ("rating", "score", "rank"):
        having = [f for f in files if column in f.values]
        target = "string" if any(_type(f, column) == "StringType" for f in having) else "double"
        for file in having:
            file.frame = file.frame.withColumn(column, F.col(column).cast(target))
    return text[0], text[1]


def _check_relevant(test: _File, threshold: float | None) -> None:
    """TEST has a relevant row (rating >= threshold; any row without a threshold), as locally."""
    from pyspark.sql import functions as F

    if threshold is None or "rating" not in test.values:
        return  # every row is relevant (a threshold without ratings is refused by the partitions)
    rating = F.col("rating").try_cast("double")
    if test.frame.filter(rating >= F.lit(threshold)).limit(1).count() == 0:
        raise DataError(f"{test.name}: no relevant row (rating >= {threshold}): nothing to evaluate")


def _long_table(files: list[_File], *, rating: bool = False, catalogue: bool = False
                ) -> tuple[DataFrame, int, int | pl.Series, list[str]]:
    """One table of TEST, RUN (of TEST users) and TRAIN (of TEST users) rows with each user's unit
    (its rank among the sorted TEST user ids), and with ``rating`` its ``rating_unit`` (its rank
    among the users with a TEST row that RUN scores); the TEST users; the catalogue size, or with
    ``catalogue`` its raw ids sorted as the local index sorts them; notes on ignored users."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    test, run = files[0], files[1]
    users = test.frame.select("user").distinct().orderBy("user")
    units = ranked(test.frame, "user", "unit").cache()
    n_users = units.count()
    run_users = run.frame.select("user").distinct()
    only_run = run_users.join(units, "user", "left_anti")
    n_run, n_only = run_users.count(), only_run.count()
    notes = []
    if n_run == n_only:
        raise DataError(
            f"{run.name} and {test.name} share no user: nothing to evaluate "
            f"(e.g. RUN user {run_users.orderBy('user').first()['user']!r}, "
            f"TEST user {users.first()['user']!r})"
        )
    if n_only:
        example = only_run.orderBy("user").first()["user"]
        notes.append(f"{n_only:,} RUN users are not in TEST and were ignored (e.g. {example!r})")
    if n_users > n_run - n_only:
        notes.append(f"{n_users - (n_run - n_only):,} TEST users have no ranked list in RUN: "
                     "they count as empty lists")
    values = {c: T.StringType() if any(c in f.values and _type(f, c) == "StringType" for f in files)
              else T.DoubleType() for c in ("rating", "score", "rank")}
    long = None
    for file in files:
        part = file.frame.select(
            "user", "item", F.lit(file.kind).cast("byte").alias("kind"),
            *(F.col(c) if c in file.values else F.lit(None).cast(t).alias(c) for c, t in values.items()),
        )
        long = part if long is None else long.unionByName(part)
    items = long.select("item").distinct()
    n_items = pl.from_arrow(items.toArrow()).get_column("item").sort() if catalogue else items.count()
    long = long.join(units, "user", "inner")
    columns = ["user", "unit", "kind", "item", "rating", "score", "rank"]
    if rating:
        long = long.join(_rating_units(test, run), "user", "left")
        columns.append("rating_unit")
    return long.select(*columns), n_users, n_items, notes


def _rating_units(test: _File, run: _File) -> DataFrame:
    """Per user with a TEST row that RUN scores (the pairs the rating metrics measure), its rank
    among those users' sorted ids, as the local engine numbers the users of its rating rows."""
    scored = test.frame.select("user", "item").join(run.frame.select("user", "item"), ["user", "item"])
    units = ranked(scored, "user", "rating_unit").cache()
    if units.count() == 0:
        raise DataError("rating metrics: RUN scores none of the (user, item) pairs of TEST")
    return units


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
        if self.local:  # the raw file system: no ``.crc`` checksum file beside every file written or renamed
            self.fs = self.fs.getRawFileSystem()

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

    def has(self, name: str) -> bool:
        """Whether ``name`` (a path relative to this folder) exists."""
        return bool(self.fs.exists(self._jvm.org.apache.hadoop.fs.Path(self.path, name)))

    def remove_children(self, folder: str) -> None:
        """Remove the files (not the folders) directly in ``folder``: what a Spark job writes beside
        the partition folders it made there (``_SUCCESS`` and its checksum)."""
        for status in self.fs.listStatus(self._jvm.org.apache.hadoop.fs.Path(self.path, folder)):
            if not status.isDirectory():
                self.fs.delete(status.getPath(), False)

    def copy_in(self, local: Path, name: str) -> None:
        """Copy the local file or folder ``local`` to ``name`` (relative to this folder)."""
        hadoop = self._jvm.org.apache.hadoop.fs.Path
        self.fs.copyFromLocalFile(False, True, hadoop(str(Path(local).absolute())), hadoop(self.path, name))

    def copy_out(self, local: Path) -> None:
        """Copy this folder (or file) to the local path ``local``, which must not exist; no
        checksum file is written beside the copies."""
        hadoop = self._jvm.org.apache.hadoop.fs.Path
        self.fs.copyToLocalFile(False, self.path, hadoop(file_uri(local)), True)

    def write_bytes(self, name: str, data: bytes) -> None:
        stream = self.fs.create(self._jvm.org.apache.hadoop.fs.Path(self.path, name), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def name_parts(self, folder: str, prefix: str) -> list[str]:
        """Give the Parquet parts a Spark job wrote into ``folder`` (``part-<partition>-<job>...``)
        the local engine's names, ``<prefix><partition>.parquet``, and remove what Spark writes
        beside them (``_SUCCESS``, ``.crc`` checksums); the parts' paths relative to this folder,
        in partition order."""
        hadoop = self._jvm.org.apache.hadoop.fs.Path
        parts = []
        for status in self.fs.listStatus(hadoop(self.path, folder)):
            path = status.getPath()
            found = _PART.match(path.getName())
            if not found:
                self.fs.delete(path, False)
                continue
            name = f"{prefix}{int(found.group(1)):05d}.parquet"
            if not self.fs.rename(path, hadoop(path.getParent(), name)):
                raise SparkError(f"could not rename {path.toString()!r} to {name!r}")
            parts.append(f"{folder}/{name}")
        return sorted(parts)


def write_atomically(out: HadoopFolder, per_unit: DataFrame, sums, manifest: Manifest, force: bool,
                     text_users: bool = False, *, protocol: str) -> pl.DataFrame:
    """Run the job into a temporary sibling of ``out``, its rows of the one (fold, ``protocol``,
    system) of an evaluated run written without their labels into the folder the labels name;
    name its parts as the local engine does; write the run-level rows (of the partitions'
    run-level counts and rating error sums) as the last part; summarise the partitions' summed
    states (``sums``, an accumulator of :class:`~recsys_eval.engine.partitions.SummedPartitions`
    the job fills) with them; write the summary and ``manifest``; then move the folder into
    place. On any failure the temporary folder is removed and ``out`` is left as it was.
    ``text_users``: whether user ids are text."""
    from recsys_eval.measure.aggregate import PartitionState, SummaryState
    from recsys_eval.pipeline.evaluate import FOLD, summary_of

    temp = out.sibling("tmp")
    labels = {"fold": FOLD, "protocol": protocol, "system": manifest.systems[0]}
    folder = per_unit_folder(labels)
    try:
        try:
            per_unit.drop(*PER_UNIT_LABELS).write.option("compression", "zstd").parquet(temp.child(folder))
        except spark_failures() as exc:
            raise job_error(exc) from None
        parts = temp.name_parts(folder, "part-")
        summed = sums.value
        runs = [] if summed.run_level is None else summed.run_level.frames(FOLD)
        if summed.errors is not None:
            errors = summed.errors
            labels = {"system": manifest.systems[0], "protocol": errors.protocol, "fold": FOLD}
            runs.append(errors.sums.rows(errors.names, labels,
                                         {**PER_UNIT_SCHEMA, "user": pl.String if text_users else pl.Int64}))
        state = summed.state
        if runs:
            run = pl.concat(runs, how="vertical")
            if partition_labels(run) != labels:
                raise SparkError(f"an evaluated run's run-level rows are of {labels}; got "
                                 f"{run.select(*PER_UNIT_LABELS).unique().rows()}")
            parts.append(per_unit_file(labels, manifest.engine["partitions"]))
            temp.write_bytes(parts[-1], _parquet_bytes(run.select(PER_UNIT_FILE_COLUMNS)))
            state = SummaryState.merge([state, PartitionState.of(run, undefined=manifest.undefined).reduced()])
            state.order = _rating_last(state.order)
        summary = summary_of(state, manifest.undefined)
        protocols = summary.get_column("protocol").unique(maintain_order=True).to_list()
        if set(protocols) - {protocol}:  # the rows' labels are the folder's, which named them
            raise SparkError(f"an evaluated run's rows are of protocol {protocol!r}; got {protocols}")
        temp.write_bytes(f"{SUMMARY}.parquet", _parquet_bytes(summary))
        temp.write_bytes(f"{SUMMARY}.csv", summary.write_csv().encode())
        text = json.dumps(manifest.replace(partitions=parts, protocols=protocols).to_json(), indent=2, default=str)
        temp.write_bytes(MANIFEST, (text + "\n").encode())
        _move_into_place(temp, out, force)
        return summary
    finally:
        temp.delete()


def _rating_last(order: dict[str, int]) -> dict[str, int]:
    """The summary's order of metrics as the local engine measures them: the rating metrics after
    the rankings' per-unit and run-level values (the partitions' states hold the per-unit ones of
    both, the run-level rows come after them)."""
    names = [n for n in order if n not in RATING_METRICS] + [n for n in order if n in RATING_METRICS]
    return {name: i for i, name in enumerate(names)}


def _move_into_place(temp: HadoopFolder, out: HadoopFolder, force: bool) -> None:
    if not out.exists():
        temp.rename(out)
        return
    if not force:
        raise ConfigError(f"output folder {out.uri!r} exists; pass --force to replace it")
    old = out.sibling("old")
    out.rename(old)
    temp.rename(out)
    old.delete()


def _parquet_bytes(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()
