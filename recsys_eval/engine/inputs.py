"""A run's inputs made on Spark (``run --engine spark``): the dataset read, prepared and split by
Spark jobs, the split written as Parquet partitioned by side, and the driver's copy read from it.

- Read: ``[dataset] path``, a CSV (header, ``separator`` or the local reader's guess from the first
  line) or Parquet file, through ``spark.read``; the roles mapped and typed as the local reader
  types them (integer ids as 64-bit integers, text ids as text, ``rating`` float32, ``timestamp``
  integer seconds), nulls, NaN ratings and repeated (user, item) pairs refused as
  :meth:`~recsys_eval.core.Interactions.from_frame` refuses them. Each row carries its place in the
  file, so that the driver's copy has the local reader's row order.
- Prepare: the steps of :mod:`recsys_eval.data.prepare` as Spark filters, with the same results
  (the threshold compared in float32, as numpy compares the float32 ratings; minimum counts
  counted once on the input; the k-core peeled round by round to its fixed point), and the same
  record of what each step removed.
- Split: :func:`recsys_eval.engine.split.split_folds`, the local splitter's per-user rule drawn by
  the executors (docs/CONVENTIONS.md#per-user-split-draws), a global split's keys cut in key order
  by a Spark sort (docs/CONVENTIONS.md#global-split-draws), or a time split's point (found by a
  Spark sort for a quantile) or rolling windows, each fold written by
  :func:`~recsys_eval.engine.split.write_sides` into the split's scratch (:class:`SplitScratch`,
  ``<scratch>/<fold>/side=<side>/``); each fold's ``info`` counted by Spark.

- Index: each role's raw ids numbered in sorted order by Spark, as the local loader numbers the
  loaded dataset's (:func:`write_index`), written beside the folds (``<scratch>/_index/<role>/``).

- Scratch: a qualified URI (:class:`SplitScratch`), under the results folder, so that the
  executors and the driver name one place whatever the cluster's default file system; what the
  driver reads of it (the item ids, a side's rows, the saved split's and the leakage audit's
  files) is copied to its local work folder through Hadoop's file system API first, unless the
  URI is that very folder.

The driver holds a stand-in for each written split (:class:`WrittenSplit`, its sides
:class:`WrittenSide`): sizes, columns, the split's record, the item index and the files' place.
What the run needs of the rows otherwise is counted by Spark jobs over the written sides: the
sides' item counts (the fold's item totals, popular's fit), the test users, the 1R relevance
check and R-precision's rank depth, the leakage audit (:mod:`recsys_eval.engine.leakage`) and a saved split's files
(:func:`write_rows`). A side's rows are read by the driver, whole and once, only when something
asks for them (:attr:`WrittenSide.frame`: a recommender fitted on the driver, tuning, a uniform
test's choice, a negatives file's checks, ...), each read recorded in :data:`ROW_READS`;
:func:`driver_rows` names which config parts read which side, for ``validate``. The fold's rows go
to the executors from the written files, joined to the written index by Spark (:func:`fold_frame`),
not from the driver. What needs a global view of the rows stays with the local loader and
splitter, named when the config is validated (:func:`local_only`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from recsys_eval.core import Interactions, Split
from recsys_eval.core.uris import file_uri, is_uri, uri
from recsys_eval.errors import DataError

if TYPE_CHECKING:
    from recsys_eval.pipeline.config import DatasetConfig, ExperimentConfig, PrepareConfig

ROW = "_row"  # a row's place in the dataset file
#: The id index's folder in the split's scratch, beside the folds' (no splitter names a fold with
#: a leading underscore), and its column of indices.
INDEX, INDEX_COLUMN = "_index", "_index"
ROLES = ("user", "item", "rating", "timestamp")
#: Why each splitter not drawn on Spark stays local.
GLOBAL_SPLITS = {
    "official": "its folds are the dataset's own files",
}


def local_only(config: ExperimentConfig) -> list[str]:
    """Why the config's inputs are loaded, prepared and split on the driver (empty: on Spark)."""
    from recsys_eval.engine.split import SPARK_SPLITTERS

    split, dataset = config.split, config.dataset
    reasons = []
    if split.method not in SPARK_SPLITTERS:
        reasons.append(f"split {split.method!r}: {GLOBAL_SPLITS.get(split.method, 'it is not drawn on Spark')}")
    if dataset.name is not None:
        reasons.append(f"dataset {dataset.name!r}: a MovieLens archive is parsed by the local loader "
                       "(give its ratings as a CSV or Parquet [dataset] path to read them with Spark)")
    if dataset.timestamp_format is not None:
        reasons.append("timestamp_format: text times are parsed with strftime codes by the local reader")
    if config.prepare.on == "train":
        reasons.append("prepare.on = 'train': each fold's train side is prepared on the driver")
    return reasons


def inputs_note(config: ExperimentConfig) -> str:
    """Lines for ``validate`` on the Spark engine: where the inputs are made, and why; then, when
    Spark made them, which sides of each fold's split the driver reads, and why (:func:`driver_rows`)."""
    reasons = local_only(config)
    if reasons:
        return "inputs: loaded, prepared and split on the driver (local-only): " + "; ".join(reasons)
    needs = driver_rows(config)
    on_spark = [r.name for r in config.recommenders if r.name in FIT_ON_SPARK]
    spark_fits = (f"; {', '.join(on_spark)} fit{'s' if len(on_spark) == 1 else ''} without its rows "
                  "(on Spark, or from Spark's counts)") if on_spark else ""
    if not needs:
        held = "driver: holds no row of the split (its counts, item totals and checks are Spark jobs)" + spark_fits
    else:
        held = "driver: holds " + " and ".join(
            f"the fold's {side} side ({'; '.join(why)})" for side, why in needs.items()) + spark_fits
    return "inputs: read, prepared and split on Spark (the split written as Parquet; docs/SPARK.md)\n" + held


#: Recommenders fitted without the split's rows on the driver: from the train side's item counts
#: (counted by Spark), its size alone, or on Spark.
FIT_ON_SPARK = ("random", "popular", "spark_als")
#: Why a recommender fitted on the driver reads the train side's rows there.
_FITS_ON_DRIVER = {"als": "{} fits on the driver with implicit", "bpr": "{} fits on the driver with implicit",
                   "lmf": "{} fits on the driver with implicit",
                   "item_knn": "{}'s item neighbourhoods are computed on the driver",
                   "bias": "{}'s user and item biases are fitted on the driver"}


def driver_rows(config: ExperimentConfig) -> dict[str, list[str]]:
    """Per side of a fold's split Spark wrote (``train``, ``test``), what of the config reads its
    rows on the driver (:class:`WrittenSide` reads a side when first asked, and keeps it); empty
    when nothing does. Everything else the run needs of the split is counted by Spark."""
    from recsys_eval.measure.metrics import BEYOND_METRICS
    from recsys_eval.pipeline.options import MeasureOptions

    needs: dict[str, list[str]] = {"train": [], "test": []}

    def add(sides: str, why: str) -> None:
        for side in sides.split("+"):
            needs[side].append(why)

    for rec in config.recommenders:
        if rec.name not in FIT_ON_SPARK and rec.path is None:
            add("train", _FITS_ON_DRIVER.get(rec.name, "{} fits on the driver").format(rec.display))
    if config.tuning is not None and any(r.search is not None for r in config.recommenders):
        add("train", "tuning draws its validation split from it")
    if config.split.method == "user_disjoint":
        add("train+test", "a user-disjoint split fits on the train users alone")
    measure = MeasureOptions.from_config(config.metrics)
    if any(name in BEYOND_METRICS for name in measure.ranking):
        add("train", "the beyond-accuracy metrics read its item side")
    for p in config.protocols:
        if p.design == "uniform_test":
            add("train+test", f"{p.display}: the uniform test is chosen item by item over every test rating")
        if p.negatives is not None:
            add("train+test", f"{p.display}: its negatives file is checked against the fold")
    for asked, what in ((config.run.save_negatives, "run.save_negatives draws from it"),
                        (bool(config.analysis.slices), "analysis.slices groups its users"),
                        (config.learning_curve is not None, "the learning curve subsamples it")):
        if asked:
            add("train+test", what)
    return {side: why for side, why in needs.items() if why}


@dataclass
class SparkInputs:
    """The run's inputs as the runner uses them: the prepared ``data`` and its ``splits`` (the
    driver's stand-ins for the written split, :class:`WrittenSide`: rows read only when asked),
    what each preparation step removed, and where each fold's split was written (``written``, by
    fold name)."""

    data: Interactions
    splits: list[Split]
    prepared: list[dict]
    written: dict[str, str]


@dataclass(frozen=True)
class SplitScratch:
    """Where Spark writes a run's split (``uri``: qualified, ``file://`` for a local results
    folder, the results folder's own URI else), and the driver's local folder for what it reads
    of it (``local``: the same folder when ``uri`` names it, else a copy of each folder read,
    made by :meth:`fetched`). A path Spark is given unqualified would be read against the
    cluster's default file system (HDFS on most clusters), not the driver's disk."""

    uri: str
    local: Path

    @classmethod
    def of(cls, local: Path, remote: str | None = None) -> SplitScratch:
        """The scratch at ``remote`` (a URI), else at the local folder ``local`` itself."""
        return cls(remote or file_uri(local), local)

    def at(self, name: str) -> str:
        """The URI of ``name`` (a path relative to the scratch)."""
        return f"{self.uri.rstrip('/')}/{name}"

    @property
    def in_place(self) -> bool:
        return self.uri == file_uri(self.local)

    def fetched(self, spark, name: str) -> Path:
        """The local folder holding what Spark wrote at ``name`` (absent where Spark wrote
        nothing): itself when the scratch is in place, else a fresh copy (one file at a time
        through Hadoop's file system API: memory bounded by a buffer, not by the files)."""
        local = self.local / name
        if not self.in_place:
            from recsys_eval.engine.runs import HadoopFolder

            shutil.rmtree(local, ignore_errors=True)
            written = HadoopFolder(spark, self.at(name))
            if written.exists():
                written.copy_out(local)
        return local

    def remove(self, master: str) -> None:
        """Remove the scratch at its URI, through a session on ``master`` (a scratch in place
        goes with the results folder's other scratch)."""
        if not self.in_place:
            from recsys_eval.core.spark import spark_session
            from recsys_eval.engine.runs import HadoopFolder

            HadoopFolder(spark_session(master), self.uri).delete()


def spark_inputs(config: ExperimentConfig, seed: int, scratch: SplitScratch) -> SparkInputs:
    """Read, prepare and split the config's dataset on Spark, write each fold's split into
    ``scratch`` and make the driver's stand-ins for them (see the module)."""
    from recsys_eval.core.spark import spark_session
    from recsys_eval.engine.split import SIDE, split_folds, write_sides

    spark = spark_session(config.engine.master)
    raw = read_dataset(spark, config.dataset).persist()
    method, source = config.split.method, config.dataset.path
    written, infos, sides = {}, {}, {}
    try:
        write_index(raw, scratch.at(INDEX))
        index = WrittenIndex(scratch, config.engine.master)
        prepared, steps = spark_prepare(raw, config.prepare)
        params = {**config.split.params, "seed": config.split.params.get("seed", seed)}
        partitions = config.engine.partitions or 4 * spark.sparkContext.defaultParallelism
        for name, marked, extra in split_folds(prepared, method, params, partitions, source):
            marked = marked.persist()
            sides[name] = dict(marked.groupBy(SIDE).count().collect())
            infos[name] = split_info(sides[name], prepared, method, params, extra)
            written[name] = scratch.at(name)
            write_sides(marked, written[name])
            marked.unpersist()
        columns = tuple(role for role in ROLES if role in raw.columns)
    finally:
        raw.unpersist()
    data, splits = None, []
    for name, at in written.items():  # every fold's file holds every prepared row: the data is the first's
        every, split = written_split(at, index, name=name, info=infos[name], sides=sides[name], columns=columns,
                                     source=source)
        data = every if data is None else data
        splits.append(split)
    if config.dataset.item_features is not None:
        from recsys_eval.pipeline.inputs import item_features

        features = item_features(config.dataset.item_features, config.dataset.item_feature_column)
        data = data.with_items_meta(features)
        splits = [WrittenSplit(s.train.with_items_meta(features), s.test.with_items_meta(features), name=s.name,
                               info=s.info) for s in splits]
    return SparkInputs(data, splits, steps, written)


# -- read ------------------------------------------------------------------------------------------
def read_dataset(spark, dataset: DatasetConfig):
    """The dataset file as a Spark DataFrame of the roles it maps (``user, item[, rating][,
    timestamp]``, typed as the local reader types them) and :data:`ROW`, checked."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    from recsys_eval.data.files import PARQUET_SUFFIXES, roles_of

    path = dataset.path
    source = uri(path) if is_uri(path) else file_uri(path)  # a local path is the driver's, whatever the default file system
    try:
        if Path(path).suffix.lower() in PARQUET_SUFFIXES:
            frame = spark.read.parquet(source)
        else:
            separator = dataset.separator or _separator(spark, path, source)
            frame = spark.read.csv(source, header=True, inferSchema=True, sep=separator)
    except AnalysisException as exc:
        raise DataError(f"{path}: could not be read by Spark ({str(exc).splitlines()[0]})") from None
    roles = roles_of(dataset.columns, frame.columns, path)
    frame = frame.select(*(F.col(f"`{name}`").alias(role) for role, name in roles.items()),
                         F.monotonically_increasing_id().alias(ROW))
    frame = frame.select(*(_typed(frame, role, path) for role in roles), ROW)
    _check_rows(frame, path)
    return frame


def _separator(spark, path: str, source: str) -> str:
    """The separator the local reader guesses from the file's first line, read by Spark when the
    file is at a URI."""
    from recsys_eval.data.files import guess_separator, separator_of

    if not is_uri(path):
        return guess_separator(Path(path))
    first = spark.read.text(source).first()
    return separator_of("" if first is None else first[0], path)


def _typed(frame, role: str, path: str):
    """The column of ``role`` in the local reader's type, or a DataError naming it."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    kind = frame.schema[role].dataType
    column = F.col(role)
    if role in ("user", "item"):
        if isinstance(kind, T.IntegralType):
            return column.cast("long").alias(role)
        if isinstance(kind, T.StringType):
            return column
        raise DataError(f"{path}: column for {role!r} has type {kind.simpleString()}; expected integer or text ids")
    if role == "rating":
        if isinstance(kind, T.NumericType | T.BooleanType):
            return column.cast("float").alias(role)
        raise DataError(f"{path}: column for 'rating' has type {kind.simpleString()}; expected numbers")
    if isinstance(kind, T.TimestampNTZType | T.DateType):  # wall-clock: its seconds as if in UTC, as polars counts
        epoch = F.lit("1970-01-01 00:00:00").cast("timestamp_ntz")
        return F.timestamp_diff("SECOND", epoch, column.cast("timestamp_ntz")).cast("long").alias(role)
    if isinstance(kind, T.TimestampType):  # an instant
        return F.unix_timestamp(column).cast("long").alias(role)
    if isinstance(kind, T.NumericType):
        return column.cast("long").alias(role)
    raise DataError(f"{path}: column for 'timestamp' has type {kind.simpleString()}; expected integer seconds "
                    "(timestamp_format, text times, is read by the local engine)")


def _check_rows(frame, path: str) -> None:
    """Nulls, NaN or infinite ratings, and repeated (user, item) pairs: a DataError naming the
    column, or an example pair, as :meth:`Interactions.from_frame` names them."""
    from pyspark.sql import functions as F

    checks = [F.sum(F.col(c).isNull().cast("long")).alias(c) for c in frame.columns if c != ROW]
    if "rating" in frame.columns:
        checks.append(F.sum((F.isnan("rating") | F.col("rating").isin(float("inf"), float("-inf")))
                            .cast("long")).alias("_bad_rating"))
    counts = frame.agg(*checks).first().asDict()
    for column, n in counts.items():
        if n:
            what = "NaN or infinite ratings" if column == "_bad_rating" else f"null values in column {column!r}"
            raise DataError(f"{path}: {n:,} {what}")
    repeated = frame.groupBy("user", "item").count().filter(F.col("count") > 1)
    first = repeated.limit(1).collect()
    if first:
        pairs, rows = repeated.agg(F.count("*"), F.sum("count")).first()
        raise DataError(f"{path}: {pairs:,} (user, item) pairs occur more than once ({rows:,} rows), e.g. user "
                        f"{first[0]['user']!r}, item {first[0]['item']!r}; choose a duplicates policy: 'last', "
                        "'max' or 'mean' (the local loader's)")


def write_index(frame, uri: str) -> str:
    """The loaded dataset's id index made by Spark: each role's distinct raw ids numbered in sorted
    order, as the local index numbers them (:func:`recsys_eval.core.spark.ranked`), written as
    Parquet ``<uri>/<role>/`` (the raw id and its :data:`INDEX_COLUMN`); returns ``uri``. The
    executors join the fold's rows to it (:func:`fold_frame`): no id column passes through the
    driver's JVM."""
    from pyspark.sql import functions as F

    from recsys_eval.core.spark import ranked

    for role in ("user", "item"):
        numbered = ranked(frame, role, INDEX_COLUMN).withColumn(INDEX_COLUMN, F.col(INDEX_COLUMN).cast("int"))
        numbered.write.mode("overwrite").parquet(f"{uri}/{role}")
    return uri


def read_ids(folder: Path, role: str) -> pl.Series:
    """The raw ids of ``role`` in the order of their index, from the local ``folder`` of the
    role's index Spark wrote (:func:`write_index`), for the driver's copy of the split."""
    ids = pl.read_parquet(f"{folder}/*.parquet").sort(INDEX_COLUMN).get_column(role)
    return ids.rename(f"{role}_id")


# -- prepare ---------------------------------------------------------------------------------------
def spark_prepare(frame, prepare: PrepareConfig) -> tuple[Any, list[dict]]:
    """The steps of ``[prepare]`` (on = "data") as :func:`recsys_eval.pipeline.inputs.prepare_data`
    applies them, on a Spark DataFrame; with what each step removed (the same records)."""
    from pyspark.sql import functions as F

    p = prepare
    steps: list[dict] = []
    if p.threshold is not None:
        if "rating" not in frame.columns:
            raise DataError("the dataset has no rating column to apply a threshold to")
        threshold = float(p.threshold)
        if not np.isfinite(threshold):
            raise DataError(f"threshold must be a finite number, got {p.threshold!r}")
        kept = frame.filter(F.col("rating") >= F.lit(threshold).cast("float"))  # in float32, as numpy
        if p.binarize:
            kept = kept.withColumn("rating", F.lit(1.0).cast("float"))
        frame = _step(frame, kept, f"threshold {p.threshold}", steps)
    if p.min_user_interactions or p.min_item_interactions:
        frame = _step(frame, _min_counts(frame, p.min_user_interactions, p.min_item_interactions),
                      "minimum counts", steps)
    if p.k_core:
        frame = _step(frame, _k_core(frame, p.k_core), f"{p.k_core}-core", steps)
    return frame, steps


def _min_counts(frame, min_user: int, min_item: int):
    """Rows whose user has at least ``min_user`` and whose item at least ``min_item`` rows, both
    counted on ``frame`` (:func:`recsys_eval.data.prepare.min_counts`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    counted = frame.withColumn("_nu", F.count("*").over(Window.partitionBy("user"))) \
                   .withColumn("_ni", F.count("*").over(Window.partitionBy("item")))
    return counted.filter((F.col("_nu") >= min_user) & (F.col("_ni") >= min_item)).drop("_nu", "_ni")


def _k_core(frame, k: int):
    """The k-core (:func:`recsys_eval.data.prepare.k_core`): rows of users or items below ``k``
    removed and recounted until none is (each round checkpointed, so that the plan stays short)."""
    size = frame.count()
    while size:
        peeled = _min_counts(frame, k, k).localCheckpoint()
        peeled_size = peeled.count()
        if peeled_size == size:
            break
        frame, size = peeled, peeled_size
    return frame


def _step(before, after, step: str, steps: list[dict]):
    """``after``, persisted, with what it removed from ``before`` recorded under ``step``."""
    from pyspark.sql import functions as F

    after = after.persist()
    counts = [frame.agg(F.countDistinct("user"), F.countDistinct("item"), F.count("*")).first()
              for frame in (before, after)]
    steps.append({"step": step, **{what: int(counts[0][i] - counts[1][i])
                                   for i, what in enumerate(("users", "items", "interactions"))}})
    return after


# -- the split -------------------------------------------------------------------------------------
def split_info(sides: dict[str, int], prepared, method: str, params: dict[str, Any],
               extra: dict[str, Any] | None = None) -> dict:
    """A fold's ``info``, as :func:`recsys_eval.split.common.build_split` records it, from its rows
    per side (counted by Spark) and the prepared rows; ``extra``: what the splitter records beyond
    the counts (:func:`recsys_eval.engine.split.split_folds`')."""
    from pyspark.sql import functions as F

    from recsys_eval.engine.split import TEST_SIDE, TRAIN_SIDE, UNKNOWN_ITEM, UNKNOWN_USER

    recorded, min_user = recorded_params(method, params)
    per_user = prepared.groupBy("user").count()
    kept = per_user.filter(F.col("count") < min_user).agg(F.count("*"), F.sum("count")).first()
    seed = params.get("seed")
    return {
        "splitter": method, "params": recorded, "seed": None if seed is None else int(seed), **(extra or {}),
        "train_interactions": sides.get(TRAIN_SIDE, 0), "test_interactions": sides.get(TEST_SIDE, 0),
        "users_kept_in_train": int(kept[0]), "interactions_kept_in_train": int(kept[1] or 0),
        "test_dropped_unknown_users": sides.get(UNKNOWN_USER, 0),
        "test_dropped_unknown_items": sides.get(UNKNOWN_ITEM, 0),
    }


def recorded_params(method: str, params: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The parameters a split of ``method`` records in its ``info`` (the local splitter's, its
    defaults filled in), and its ``min_user_interactions``."""
    from recsys_eval.engine.split import is_keyed_global, keyed_params, time_min_interactions
    from recsys_eval.split.common import check_drop_unknown
    from recsys_eval.split.keyed import PerUserRule
    from recsys_eval.split.rolling import rolling_params
    from recsys_eval.split.temporal import recorded_at

    if is_keyed_global(method, params):
        return keyed_params(method, params)
    drop = check_drop_unknown(params.get("drop_unknown", False))
    if method == "rolling_time":  # every user split: no minimum recorded
        return rolling_params(params["length"], params.get("n"), params.get("starts"), drop), 1
    if method == "time":
        own, min_user = {"at": recorded_at(params["at"])}, time_min_interactions(params)
    else:
        rule = PerUserRule.of(method, params)
        min_user = rule.min_user_interactions
        own = ({"fraction": rule.fraction, "per_user": True} if method == "holdout"
               else {"fraction": rule.fraction, "n": rule.n} if method == "user_time"
               else {"n": rule.n} if method == "leave_last_n" else {"n": rule.n, "order": rule.order})
    return {**own, "min_user_interactions": min_user, "drop_unknown": drop}, min_user


#: Every read of a written split's rows by the driver, ``(fold, sides)``, and of its user ids (an
#: array over every user), ``("", "user ids")``, in order: what the run's driver held (a test
#: checks that a run whose config needs neither has none).
ROW_READS: list[tuple[str, str]] = []


class WrittenIndex:
    """The id index Spark wrote (:func:`write_index`) as the driver knows it: the item ids (an
    array over items) read at once, the number of users and their type counted by Spark, and the
    user ids (an array over every user) read only when something asks for them; the split's
    scratch, and the Spark master that counts the split's item-side facts (:class:`WrittenSide`)."""

    def __init__(self, scratch: SplitScratch, master: str) -> None:
        self.scratch, self.master = scratch, master
        self.uri = scratch.at(INDEX)
        self.item_ids = self._read("item")
        users = self.spark().read.parquet(f"{self.uri}/user")
        self.n_users = users.count()
        self.user_type = _ID_TYPES[users.schema["user"].dataType.simpleString()]
        self._user_ids: pl.Series | None = None

    @property
    def user_ids(self) -> pl.Series:
        if self._user_ids is None:
            ROW_READS.append(("", "user ids"))
            self._user_ids = self._read("user")
        return self._user_ids

    def _read(self, role: str) -> pl.Series:
        return read_ids(self.scratch.fetched(self.spark(), f"{INDEX}/{role}"), role)

    def spark(self):
        from recsys_eval.core.spark import spark_session

        return spark_session(self.master)


#: The polars type of an id column of each Spark type the reader gives ids (:func:`_typed`).
_ID_TYPES = {"bigint": pl.Int64, "string": pl.String}


class WrittenSide(Interactions):
    """Sides of a fold's written split (``train``, ``test``, or all of them: the prepared data) as
    :class:`~recsys_eval.core.Interactions` whose rows stay in the files until something reads
    :attr:`frame` (then read once, in the file's row order, indexed as the local loader indexes
    them, and recorded in :data:`ROW_READS`). Its size, columns and item index are known without
    them; its :meth:`item_counts` and :meth:`n_users_with_rows` are counted by Spark jobs (arrays
    over items, or a number), which is what random, popular and spark_als fit from and what the
    fold's item totals are made of."""

    def __init__(self, uri: str, sides: tuple[str, ...], index: WrittenIndex, *, rows: int,
                 columns: tuple[str, ...], source: str, fold: str, items_meta: pl.DataFrame | None = None) -> None:
        for name, value in (("item_ids", index.item_ids), ("items_meta", items_meta), ("source", source),
                            ("_cache", {}), ("uri", uri), ("sides", sides), ("index", index), ("rows", rows),
                            ("columns", columns), ("fold", fold)):
            object.__setattr__(self, name, value)

    @property
    def frame(self) -> pl.DataFrame:
        if "frame" not in self._cache:
            self._cache["frame"] = self._read()
        return self._cache["frame"]

    @property
    def user_ids(self) -> pl.Series:
        return self.index.user_ids

    @property
    def n_users(self) -> int:
        return self.index.n_users

    def __len__(self) -> int:
        return self.rows

    @property
    def has_rating(self) -> bool:
        return "rating" in self.columns

    @property
    def has_timestamp(self) -> bool:
        return "timestamp" in self.columns

    def __repr__(self) -> str:
        return (f"Interactions({self.source!r}: {len(self):,} rows over {self.n_users:,} users x "
                f"{self.n_items:,} items; columns {', '.join(self.columns)})")

    def with_items_meta(self, items_meta: pl.DataFrame) -> WrittenSide:
        from recsys_eval.core.interactions import _index_meta

        return WrittenSide(self.uri, self.sides, self.index, rows=self.rows, columns=self.columns, source=self.source,
                           fold=self.fold, items_meta=_index_meta(items_meta, self.item_ids, self.source))

    def rowless(self) -> Interactions:
        """The same index and metadata with no row and no user id (typed as the user ids are)."""
        schema = {c: t for c, t in _FRAME_SCHEMA.items() if c in self.columns}
        return Interactions(pl.DataFrame(schema=schema), pl.Series("user_id", [], dtype=self.index.user_type), self.item_ids,
                            self.items_meta, self.source)

    def item_counts(self) -> np.ndarray:
        """Rows per item index (int64, length n_items), counted by Spark."""
        if "item_counts" not in self._cache:
            from pyspark.sql import functions as F

            counted = self._rows(F).groupBy("item").count().toArrow()
            counts = np.zeros(self.n_items, dtype=np.int64)
            counts[counted.column("item").to_numpy()] = counted.column("count").to_numpy()
            self._cache["item_counts"] = counts
        return self._cache["item_counts"]

    def n_users_with_rows(self) -> int:
        """Users with a row here, counted by Spark."""
        from pyspark.sql import functions as F

        return int(self._rows(F).agg(F.countDistinct("user")).first()[0])

    def spark_rows(self):
        """These sides' rows on Spark, their ids raw (the written columns)."""
        from pyspark.sql import functions as F

        from recsys_eval.engine.split import SIDE

        return self.index.spark().read.parquet(self.uri).filter(F.col(SIDE).isin(*self.sides))

    def _rows(self, F):
        """These sides' rows on Spark, their items indexed (a join with the written index)."""
        items = self.index.spark().read.parquet(f"{self.index.uri}/item")
        return self.spark_rows().join(items, on="item").drop("item").withColumnRenamed(INDEX_COLUMN, "item")

    def _read(self) -> pl.DataFrame:
        from recsys_eval.engine.split import SIDE

        ROW_READS.append((self.fold, "+".join(self.sides)))
        spark, scratch = self.index.spark(), self.index.scratch
        folders = [scratch.fetched(spark, f"{self.fold}/{SIDE}={side}") for side in self.sides]
        written = [pl.scan_parquet(folder / "*.parquet") for folder in folders if folder.is_dir()]
        if not written:  # Spark writes no folder for a side without rows
            return self.rowless().frame
        rows = pl.concat(written).collect().sort(ROW)
        base = Interactions(pl.DataFrame(), self.user_ids, self.item_ids)
        frame = rows.with_columns(pl.Series("user", base.user_index(rows.get_column("user")), dtype=pl.Int32),
                                  pl.Series("item", base.item_index(rows.get_column("item")), dtype=pl.Int32))
        return frame.select(c for c in _FRAME_SCHEMA if c in frame.columns)


class WrittenSplit(Split):
    """A fold's written split on the driver: its :class:`WrittenSide` train and test (one index),
    its ``info`` counted by Spark, and what the fold's checks read of its test side counted by
    Spark too (:meth:`n_test_users`, :meth:`relevance`)."""

    def __post_init__(self) -> None:  # the sides share one written index by construction
        pass

    def n_test_users(self) -> int:
        return self.test.n_users_with_rows()

    def relevant_rows(self, threshold: float | None) -> int:
        """The fold's relevant test rows under ``threshold``, counted by Spark (see :meth:`relevance`)."""
        return self.relevance(threshold)[0]

    @staticmethod
    def largest_relevant(split: WrittenSplit, threshold: float | None) -> int:
        """The largest number of relevant test items of a user of ``split`` under ``threshold``,
        counted by Spark (see :meth:`relevance`): what R-precision's rank depth needs."""
        return split.relevance(threshold)[1]

    def relevance(self, threshold: float | None) -> tuple[int, int]:
        """``(relevant test rows, the largest number of them of one user)`` under ``threshold``,
        counted by Spark once per threshold (every protocol entry's check asks; a written split's
        sides are fixed, so the answer is kept on its test side). A test side that :func:`~recsys_eval.targets.relevance.test_gains`
        refuses (empty, a threshold without ratings or above every rating, a relevant rating not
        positive) is read on the driver for that function to raise its error, the local engine's."""
        key = ("relevance", threshold)
        if key not in self.test._cache:
            self.test._cache[key] = self._count_relevance(threshold)
        return self.test._cache[key]

    def _count_relevance(self, threshold: float | None) -> tuple[int, int]:
        from pyspark.sql import functions as F

        from recsys_eval.targets.relevance import test_gains

        rated = self.test.has_rating
        usable = threshold is None or (not isinstance(threshold, bool) and isinstance(threshold, int | float | np.number)
                                       and np.isfinite(threshold))
        if not usable or not len(self.test) or (threshold is not None and not rated):
            test_gains(self, threshold)  # raises
        rows = self.test.spark_rows()
        # compared in float32, as numpy compares the float32 ratings
        relevant = F.lit(True) if threshold is None or not rated else F.col("rating") >= F.lit(float(threshold)).cast("float")
        if rated:
            highest, bad = rows.agg(F.max("rating"), F.sum((relevant & (F.col("rating") <= 0)).cast("long"))).first()
            if threshold is not None and len(self.train):
                highest = max(highest, self.train.spark_rows().agg(F.max("rating")).first()[0])
            if bad or (threshold is not None and threshold > float(highest)):
                test_gains(self, threshold)  # raises
        total, largest = rows.filter(relevant).groupBy("user").count().agg(F.sum("count"), F.max("count")).first()
        return int(total or 0), int(largest or 0)


def rowless(data: Interactions) -> Interactions:
    """``data``'s index and metadata without its rows (of a :class:`WrittenSide`, without its user
    ids too: nothing is read)."""
    return data.rowless() if isinstance(data, WrittenSide) else data.with_frame(data.frame.clear())


_FRAME_SCHEMA = {"user": pl.Int32, "item": pl.Int32, "rating": pl.Float32, "timestamp": pl.Int64}


def written_split(uri: str, index: WrittenIndex, *, name: str, info: dict, sides: dict[str, int],
                  columns: tuple[str, ...], source: str) -> tuple[WrittenSide, WrittenSplit]:
    """The prepared data (every side, dropped test rows and a window's later rows included, as the
    local ``data`` holds them) and the split of the fold written at ``uri``, read only when asked
    (:class:`WrittenSide`); ``sides``: each side's rows, counted by Spark."""
    from recsys_eval.engine.split import TEST_SIDE, TRAIN_SIDE

    def side(*which: str) -> WrittenSide:
        return WrittenSide(uri, which, index, rows=sum(sides.get(s, 0) for s in which), columns=columns,
                           source=source, fold=name)

    return side(*sides), WrittenSplit(side(TRAIN_SIDE), side(TEST_SIDE), name=name, info=info)


def write_rows(split: WrittenSplit, folder: Path) -> None:
    """A saved split's row files (:func:`recsys_eval.split.io.write_rows`' layout: each side's raw
    rows in the dataset file's order, every user id in index order) made by Spark jobs into the
    split's scratch (``_saved/<fold>/``) and streamed into one file each: the driver holds none
    of them whole."""
    from pyspark.sql import functions as F

    from recsys_eval.core import atomic

    index = split.train.index
    scratch = f"_saved/{split.name}"
    columns = split.train.columns
    tables = {side: in_order(getattr(split, side).spark_rows(), ROW).select(*columns) for side in ("train", "test")}
    tables["users"] = in_order(index.spark().read.parquet(f"{index.uri}/user"), INDEX_COLUMN).select(
        F.col("user").alias("user_id"))
    for name, frame in tables.items():
        frame.write.mode("overwrite").parquet(index.scratch.at(f"{scratch}/{name}"))
        written = index.scratch.fetched(index.spark(), f"{scratch}/{name}")
        atomic.sink_parquet(pl.scan_parquet(written / "*.parquet"), folder / f"{name}.parquet")


def in_order(frame, column: str):
    """``frame`` sorted by ``column`` into as many range partitions as Spark's default parallelism,
    so that its files, written in partition order, read in that order: a global sort whose range
    bounds the driver finds from a sample of a few keys per partition (``orderBy`` samples
    for ``spark.sql.shuffle.partitions`` ranges, 200 by default: a few MB of keys)."""
    partitions = frame.sparkSession.sparkContext.defaultParallelism
    return frame.repartitionByRange(partitions, column).sortWithinPartitions(column)


def fold_frame(spark, uri: str):
    """The fold's rows for the executors, read by Spark from the split written at ``uri``:
    ``user, item`` (indices, by a join with the id index written beside the split,
    :func:`write_index`), ``rating`` where there is one, ``test`` (the test side's rows) and the
    raw user id (:data:`~recsys_eval.engine.targets.RAW_USER`); the dropped test rows left out."""
    from pyspark.sql import functions as F

    from recsys_eval.engine.split import SIDE, TEST_SIDE, TRAIN_SIDE
    from recsys_eval.engine.targets import RAW_USER, TEST

    rows = spark.read.parquet(uri).filter(F.col(SIDE).isin(TRAIN_SIDE, TEST_SIDE)).withColumn(RAW_USER, F.col("user"))
    index = f"{uri.rstrip('/').rsplit('/', 1)[0]}/{INDEX}"
    for role in ("user", "item"):
        ids = spark.read.parquet(f"{index}/{role}")
        rows = rows.join(ids, on=role).drop(role).withColumnRenamed(INDEX_COLUMN, role)
    values = ["rating"] if "rating" in rows.columns else []
    return rows.select("user", "item", *values, (F.col(SIDE) == TEST_SIDE).alias(TEST), RAW_USER)
