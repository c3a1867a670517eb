"""One experiment fold on Spark (``[engine] name = "spark"``): the local runner's jobs per user partition.

The driver executes a :class:`~recsys_eval.pipeline.plan.FoldPlan` (built without target sets: the
tasks build them): it computes what the target sets need of every user, item-side and small
(:class:`recsys_eval.engine.targets.FoldTargets`: the item totals, a uniform test's moves), fits
every recommender of the plan on each train side (the fold's, each uniform test's; ``spark_als``
fits on Spark), then broadcasts them (of a factor model, its item
factors alone: each user's factor row of each model, the model of a (system, train side), travels
with the user's rows to the user's partition, :mod:`recsys_eval.engine.factors`), as does each
user's first unit number per target set, counted and numbered by a Spark job
(:func:`recsys_eval.engine.targets.unit_number_rows`). The fold's train and test rows (read by
Spark from the split it wrote when it made the run's inputs, :mod:`recsys_eval.engine.inputs`;
else sent from the driver's split) are repartitioned by user; each task builds its users' target
sets, ranks and measures them with the same functions the local fold calls (:meth:`recsys_eval.pipeline.plan.RunOptions.target_sets`,
:func:`recsys_eval.pipeline.jobs.rank`, :func:`~recsys_eval.pipeline.jobs.measure_ranking`). Targets are drawn per user from a
counter-based generator keyed on the protocol's seed, so a user's targets do not depend on which
users share its partition, and the per-unit values equal the local engine's. Units are numbered as
the local runner numbers them (per target set, in user-index order).

Per-unit rows never come back to the driver: each task writes them into the results folder in
its layout (:class:`recsys_eval.core.results.PartitionFiles`: one file per (system, protocol) and
chunk of users, ``per_unit/fold=<fold>/protocol=<protocol>/system=<system>/part-<first user>.parquet``;
the executors must reach the results folder's file system, as they do on a local master or a shared
file system; a results folder at a URI is written by Spark's writer instead,
:mod:`recsys_eval.engine.remote`) and hands back the file's name and its users' exact sums
(:class:`recsys_eval.measure.aggregate.SummaryState`), which the driver merges into the local
engine's summary bit for bit. Beyond-accuracy and rating metrics are measured per user in the tasks
with the whole train's item side broadcast (of each train side a target set is drawn on), and the
run-level ones (coverage, Gini, entropy, PopRSP/PopREO, micro MAE/RMSE) made on the driver from the
tasks' summed counts (:mod:`recsys_eval.engine.beyond`). Bootstrap intervals, which resample users,
are Spark jobs over the written files (:func:`recsys_eval.engine.stats.bootstrap_intervals`) whose
replicates' sums come back to the driver, never a user's value. The exposure counts per popularity bin add up
to the local ones; the pooled-AUC sample is drawn per Spark partition (another sample of the same
scores).

What runs here (checked when the config is validated, :func:`check_spark_config`): recommenders
whose fitted model can be broadcast (random, popular, ALS/BPR/LMF factors, item kNN neighbourhoods,
spark_als, the bias predictor's biases) and every metric; every protocol and design runs here
(what a target set needs of other users is item-side or the user's own: :mod:`recsys_eval.engine.targets`).
"""

from __future__ import annotations

import copy
import functools
import io
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from recsys_eval.core.spark import SparkError
from recsys_eval.errors import ConfigError
from recsys_eval.measure.aggregate import PartitionState, SummaryState
from recsys_eval.pipeline.summary import FoldSummary, partition_rows

if TYPE_CHECKING:
    from recsys_eval.core import Interactions
    from recsys_eval.engine.beyond import RunLevel
    from recsys_eval.pipeline.config import EngineConfig, ExperimentConfig
    from recsys_eval.pipeline.plan import FoldPlan
    from recsys_eval.pipeline.progress import Progress
    from recsys_eval.pipeline.sink import RunSink
    from recsys_eval.pipeline.timings import Timings

# Recommenders whose fitted model is small enough to broadcast to every executor: item scores, a
# seed, factors, item neighbourhoods. Why the others cannot: what each needs at scoring time.
BROADCASTABLE = ("random", "popular", "als", "bpr", "lmf", "item_knn", "spark_als", "bias")
_NOT_BROADCASTABLE = {
    "user_knn": "it scores a user from its neighbours' train rows, i.e. the whole train matrix",
    "user_knn_rating": "it predicts ratings from its neighbours' train rows (local engine only)",
}
#: The kinds of tables a task makes, and hands back to the driver but the per-unit rows (WRITTEN:
#: the name of the file it wrote them in; SUMS: their users' exact sums).
PER_UNIT, EXPOSURE, SCORED, WRITTEN, SUMS = "per_unit", "exposure", "scored", "written", "sums"


# -- validation ------------------------------------------------------------------------------------
def check_spark_support(name: str) -> None:
    """Raise a ConfigError when the recommender ``name`` (as a config names it; ``path`` for an
    external run file) cannot run on the Spark engine, saying why."""
    if name in BROADCASTABLE:
        return
    if name == "path":
        reason = "an external run is a table of every user's scores, read on the driver"
    elif ":" in name:
        reason = "a plugin's model is not known to be picklable and small enough to broadcast"
    else:
        reason = _NOT_BROADCASTABLE.get(name, "it is not known to the Spark engine")
    raise ConfigError(
        f"recommender {name!r} cannot run on the Spark engine: {reason}; the Spark engine runs "
        f"{', '.join(BROADCASTABLE)} (or use the local engine)"
    )




def check_spark_config(config: ExperimentConfig, at) -> None:
    """Every check above on a config; ``at(path, check, *args)`` names the key path at fault. Every
    part that stays with the local engine is named at once, each with its reason, so that a user
    sees the whole of what to change (or to run locally) in one message."""
    problems: list[str] = []

    def collect(path: str, check, *args) -> None:
        try:
            at(path, check, *args)
        except ConfigError as exc:
            problems.append(str(exc))

    for i, rec in enumerate(config.recommenders):
        collect(f"recommenders[{i}]." + ("path" if rec.path else "name"), check_spark_support,
                "path" if rec.path else rec.name)
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError(f"{len(problems)} parts of the config cannot run on the Spark engine:\n  - "
                          + "\n  - ".join(problems))


# -- what the executors get ------------------------------------------------------------------------
def broadcastable(model: Any) -> Any:
    """The part of a fitted recommender the executors need: the library object is dropped (item
    counts, similarities kept); a factor model keeps its item factors alone and the bias predictor
    its mean and item biases (their users' rows are joined to their partitions,
    :mod:`recsys_eval.engine.factors`); item kNN leaves its train matrix behind (a task reads its
    users' rows from its own partition, :func:`local_model`)."""
    from recsys_eval.engine.factors import item_side
    from recsys_eval.recommend.baselines import PopularRecommender, RandomRecommender
    from recsys_eval.recommend.implicit_models import FactorModel, ItemKNN
    from recsys_eval.recommend.rating import BiasPredictor

    if isinstance(model, RandomRecommender | PopularRecommender):
        return model
    if isinstance(model, BiasPredictor):  # its user biases go to their users' partitions as rows
        light = copy.copy(model)
        light.user_bias = None
        return light
    if isinstance(model, FactorModel):
        return item_side(model)
    if isinstance(model, ItemKNN):
        light = copy.copy(model)
        light.model, light.user_items = None, None
        return light
    raise ConfigError(f"{type(model).__name__} cannot be broadcast to Spark executors; "
                      f"the Spark engine runs {', '.join(BROADCASTABLE)}")


def local_model(model: Any, train: Interactions, user_factors: tuple | None = None,
                fold_users: np.ndarray | None = None) -> Any:
    """A broadcast model made ready for a chunk of users: item kNN scores a user from the user's
    train row, a factor model from the user's factor row, the bias predictor with the user's bias
    (``user_factors``: the chunk's ``(users, rows)``), all of which the partition holds; the
    random recommender hashes each user's fold index (``fold_users``, of the chunk's users
    numbered from 0), as on the whole fold."""
    from recsys_eval.engine.factors import PartitionFactors, with_user_biases
    from recsys_eval.recommend.baselines import RandomRecommender
    from recsys_eval.recommend.implicit_models import ItemKNN
    from recsys_eval.recommend.rating import BiasPredictor

    if isinstance(model, RandomRecommender) and fold_users is not None:
        model = model.keyed(fold_users)
    if isinstance(model, ItemKNN):
        model = copy.copy(model)
        model.user_items = train.csr()
    if isinstance(model, PartitionFactors) and user_factors is not None:
        model = model.with_users(*user_factors)
    if isinstance(model, BiasPredictor) and user_factors is not None:
        model = with_user_biases(model, *user_factors)
    return model


@dataclass(frozen=True)
class FoldTask:
    """How a task turns a chunk of whole users of a fold (columns ``user, item, rating, test`` and
    the uniform tests' flags, :meth:`recsys_eval.engine.targets.FoldTargets.rows`: user and item
    indices, the rating, whether the row is a test row; and the user's raw id,
    :data:`~recsys_eval.engine.targets.RAW_USER`) into tables for the driver.

    ``options``: the run's options (protocols, measure options, seeds); ``jobs`` and ``rank``: the
    fold's recommenders and rank options; ``template`` is the dataset with no rows and no user ids
    (:func:`~recsys_eval.engine.targets.shipped_template`: its item index and metadata; each chunk
    takes its users' raw ids from its rows and numbers its users from 0,
    :func:`~recsys_eval.engine.targets.chunk_template`);
    ``targets`` (broadcast, :class:`~recsys_eval.engine.targets.SparkTargets`) what the
    target sets need of every user: each protocol entry's item totals (its candidates, sampling
    weights, popularity bins and the exposure's bins) and train side (each user's first unit
    numbers come as rows of the chunk, :func:`~recsys_eval.engine.targets.take_unit_numbers`); ``models`` (broadcast) maps
    (system, train side) to its fitted, broadcastable model; ``pool_auc``: whether scored targets
    are sampled for the pooled AUC, from ``n_parts`` partitions; ``files``: where the per-unit
    partitions go; ``item_sides`` (broadcast) per train side, its whole train's item side, which
    the beyond-accuracy metrics read (:mod:`recsys_eval.engine.beyond`); ``factor_keys``: the
    (system, train side) of each factor model whose user factors come as rows of the chunk, by
    their ``factor_model`` index (:mod:`recsys_eval.engine.factors`)."""

    options: Any
    jobs: Any
    rank: Any
    template: Any
    fold: str
    targets: Any
    models: Any
    pool_auc: bool
    n_parts: int
    files: Any
    item_sides: Any = None
    factor_keys: tuple[tuple[str, int], ...] = ()

    def __call__(self, chunk: pl.DataFrame) -> pl.DataFrame:
        """The chunk's tables as ``kind, table`` rows (:meth:`tables`), its per-unit rows written."""
        return pl.DataFrame(self.tables(chunk), schema={"kind": pl.String, "table": pl.Binary}, orient="row")

    def tables(self, chunk: pl.DataFrame, rows: list[pl.DataFrame] | None = None) -> list[tuple[str, bytes]]:
        """The chunk's tables for the driver as ``(kind, table)`` (each table in Arrow IPC bytes,
        sums pickled). Its per-unit rows are written by the task as files of the results folder
        (named by the chunk's first user: chunks hold disjoint users), or, given ``rows``, added
        to it for Spark to write (a results folder at a URI, :func:`row_task`)."""
        tables = []
        for kind, frame in fold_chunk_tables(chunk, self):
            if isinstance(frame, bytes):  # run-level counts, pickled
                tables.append((kind, frame))
                continue
            if not frame.height:
                continue
            if kind != PER_UNIT:
                tables.append((kind, _ipc(frame)))
                continue
            if rows is None:
                path = self.files.write(frame, part=int(chunk.get_column("user").min()))
                tables.append((WRITTEN, _ipc(pl.DataFrame({"path": [str(path)]}))))
            else:
                rows.append(frame)
            labels = frame.row(0, named=True)
            state = PartitionState.of(frame, undefined=self.options.measure.undefined).reduced()
            tables.append((SUMS, pickle.dumps((labels["system"], labels["protocol"], state))))
        return tables


@dataclass
class TaskTables:
    """The tables a fold's tasks hand the driver when Spark writes their per-unit rows (the value
    of a Spark accumulator): each partition's, by partition index; a partition reported twice (a
    retried or speculative task) is taken once. On the driver, ``take(kind, table)`` consumes them
    as the tasks end (the summed states and counts then never pile up), but for the scored samples,
    taken in partition order once the job is done (:meth:`finish`), so that the pooled AUC's sample
    is the same from run to run. A failure of ``take`` (which Spark would only log) is raised by
    :meth:`finish`."""

    parts: dict[int, list[tuple[str, bytes]]] = field(default_factory=dict)
    take: Any = None
    failure: BaseException | None = None

    def add(self, other: TaskTables) -> TaskTables:
        for partition, tables in other.parts.items():
            if partition in self.parts:
                continue
            if self.take is None:  # on an executor: the partition's tables, handed over whole
                self.parts[partition] = tables
                continue
            self.parts[partition] = [(kind, table) for kind, table in tables if kind == SCORED]
            try:
                for kind, table in tables:
                    if kind != SCORED:
                        self.take(kind, table)
            except BaseException as exc:  # noqa: BLE001 - raised again on the driver's thread
                self.failure = self.failure or exc
        return self

    def finish(self, n_parts: int) -> None:
        """Take the scored samples in partition order; raise what ``take`` raised, or an error when
        some of the ``n_parts`` partitions never reported."""
        if self.failure is not None:
            raise self.failure
        if len(self.parts) != n_parts:
            raise SparkError(f"{n_parts - len(self.parts)} of the fold's {n_parts} partitions handed no tables")
        for partition in sorted(self.parts):
            for kind, table in self.parts[partition]:
                self.take(kind, table)


def row_task(task: FoldTask, threads: int, tables, text_users: bool):
    """The function ``mapInArrow`` runs on every partition of a fold whose per-unit rows Spark
    writes (a results folder at a URI, which Python tasks cannot write to): each chunk's per-unit
    rows are the task's rows (:data:`~recsys_eval.core.results.PER_UNIT_SCHEMA`, user ids text or
    long), its other tables added to the accumulator ``tables`` (:class:`TaskTables`) once the
    partition is done."""
    from recsys_eval.core.results import PER_UNIT_COLUMNS, PER_UNIT_SCHEMA
    from recsys_eval.engine.partitions import arrow_task

    schema = {**PER_UNIT_SCHEMA, "user": pl.String if text_users else pl.Int64}

    def run(batches):
        from pyspark import TaskContext

        handed: list[tuple[str, bytes]] = []

        def chunk_rows(chunk: pl.DataFrame) -> pl.DataFrame:
            rows: list[pl.DataFrame] = []
            handed.extend(task.tables(chunk, rows))
            return pl.concat([r.select(PER_UNIT_COLUMNS).cast(schema) for r in rows]) if rows \
                else pl.DataFrame(schema=schema)

        yield from arrow_task(chunk_rows, threads, key="user")(batches)
        tables.add(TaskTables({TaskContext.get().partitionId(): handed}))

    return run


def fold_chunk_tables(chunk: pl.DataFrame, task: FoldTask):
    """``(kind, table)`` pairs of one chunk: per (protocol, system) its per-unit rows with the
    fold's unit numbers, the exposure counts of full rankings, the sampled scored targets and the
    run-level counts; per system its rating rows and their error sums. Each model is made ready
    with the chunk's users' factor rows of its (system, train side). The chunk's users are
    numbered from 0 (its arrays over users are its own size); what is keyed on a user, its samples,
    random scores, unit numbers and the AUC sample's seed, is keyed on the user's fold index, and
    its rows carry its raw id, so the tables are the ones a chunk at the fold's indices makes."""
    from recsys_eval.engine.beyond import RUN_COUNTS, chunk_exposure, rating_tables, run_counts
    from recsys_eval.engine.factors import take_user_factors
    from recsys_eval.engine.targets import TEST, chunk_split, chunk_template, partition_target_sets, take_unit_numbers
    from recsys_eval.measure.lists import with_item_side
    from recsys_eval.pipeline import jobs
    from recsys_eval.measure.metrics import RATINGS

    options = task.options
    chunk, template, fold_users = chunk_template(task.template, chunk)  # users numbered from 0
    chunk, user_factors = take_user_factors(chunk, task.factor_keys)
    chunk, numbers = take_unit_numbers(chunk)
    if not chunk.height:  # factor rows of users with no row in this fold
        return
    models = getattr(task.models, "value", task.models)
    targets = getattr(task.targets, "value", task.targets)
    item_sides = getattr(task.item_sides, "value", task.item_sides)
    for p, split, target_set in partition_target_sets(options, targets, chunk, template, task.fold, fold_users):
        if item_sides is not None:
            with_item_side(split.train, item_sides[targets.trains[p]])
        target = target_set.whole()
        users = target.targets.unit_user.astype(np.int64)
        starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]]) if len(users) else users
        within = np.arange(len(users)) - np.repeat(starts, np.diff(np.r_[starts, len(users)]))
        global_unit = numbers.of(target.label, users) + within
        for job in task.jobs:
            key = (job.system, targets.trains[p])
            model = local_model(models[key], split.train, user_factors.get(key), fold_users)
            rankings = jobs.rank(task.rank, model, target)
            exposure = chunk_exposure(options.measure, template.n_items, target.train) if options.measure.run_level \
                else None
            frame = jobs.measure_ranking(options.measure, template, rankings, target, job.system, task.fold,
                                         run_level=False, exposure=exposure)
            mapped = pl.Series("unit", global_unit, dtype=pl.Int64).gather(frame.get_column("unit"))
            yield PER_UNIT, frame.with_columns(mapped)
            if exposure is not None:
                yield RUN_COUNTS, run_counts(exposure, target.label, job.system)
            if target.targets.all_candidates and not target.targets.one_relevant:
                yield EXPOSURE, jobs.exposure_rows(rankings, target, job.system, task.fold,
                                                   bins=options.exposure_bins, k=options.measure.kmax,
                                                   item_counts=targets.totals[p].train_counts)
            if task.pool_auc and getattr(rankings, "scores", True) is not None:  # 1R: sampled too
                seed = options.seeds.auc_pool(task.fold, job.configured.definition, target.definition,
                                              int(fold_users[jobs.first_user(target)]))
                yield SCORED, jobs.scored_rows(rankings, target, job.system, task.fold, seed=seed,
                                               n_chunks=task.n_parts)
    if options.measure.rating:  # on the fold's split, by the recommenders fitted on its train (side 0)
        split = chunk_split(chunk, TEST, template, task.fold)
        ready = {job.system: local_model(models[job.system, 0], split.train, user_factors.get((job.system, 0)),
                                         fold_users) for job in task.jobs}
        yield from rating_tables(options.measure, split, ready, template, task.fold,
                                 lambda users: numbers.of(RATINGS, users))


def train_rows(rows, targets) -> list[tuple[Interactions, Any]]:
    """Each train side of ``targets`` (:class:`~recsys_eval.engine.targets.FoldTargets`) with its
    ``user, item`` rows among the fold's ``rows`` (a Spark DataFrame of
    :meth:`~recsys_eval.engine.targets.FoldTargets.rows`' columns): the fold's train side is its
    rows that are not test rows, a uniform test's the rows that do not stay in its test; the fixed
    negatives are no side's."""
    from pyspark.sql import functions as F

    from recsys_eval.engine.targets import NEGATIVES, TEST

    shipped = targets.shipped
    columns = {0: TEST, **{side: column for side, column in zip(shipped.trains, shipped.test_columns, strict=True)}}
    negatives = [F.col(c) for c in rows.columns if c.startswith(NEGATIVES.format(""))]
    interactions = ~functools.reduce(lambda a, b: a | b, negatives) if negatives else F.lit(True)
    return [(train, rows.filter(interactions & ~F.col(columns[side])).select("user", "item"))
            for side, train in enumerate(targets.trains)]


def _ipc(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_ipc(buffer)
    return buffer.getvalue()


# -- the driver ------------------------------------------------------------------------------------
class SparkFold:
    """A fold's plan executed on Spark (see the module): models fitted on the driver, target sets,
    rankings and measures per user partition, per-unit files and summary rows written and reduced
    on the driver through the run's sink, as :class:`~recsys_eval.pipeline.local.LocalFold` does."""

    def __init__(self, plan: FoldPlan, engine: EngineConfig, sink: RunSink, progress: Progress,
                 timings: Timings, written: str | None = None) -> None:
        self.plan, self.engine, self.sink, self.progress, self.timings = plan, engine, sink, progress, timings
        self.written = written  # where Spark wrote the fold's split, if it made it

    def run(self) -> FoldSummary:
        from recsys_eval.core.spark import spark_session
        from recsys_eval.engine.beyond import RunLevel
        from recsys_eval.engine.inputs import rowless
        from recsys_eval.engine.targets import FoldTargets, shipped_template
        from recsys_eval.measure.beyond import whole_item_side
        from recsys_eval.measure.lists import with_item_side
        from recsys_eval.measure.metrics import BEYOND_METRICS
        from recsys_eval.pipeline.fit import fit_models
        from recsys_eval.pipeline.targets import protocol_labels
        from recsys_eval.engine.factors import has_user_rows
        from recsys_eval.recommend.spark_als import trains_on_spark

        plan, split = self.plan, self.plan.split
        spark = spark_session(self.engine.master)  # first: no PySpark or Java is one message naming the extra
        context = spark.sparkContext
        start = time.perf_counter()
        targets = FoldTargets.of(plan.options, split)
        self.timings.add(plan.fold, "", "plan targets", start)
        # each train side a target set is drawn on (a uniform test moves ratings into train); the
        # fold's own for the rating metrics, measured on the fold's split
        fitted = set(targets.shipped.trains) | ({0} if plan.options.measure.rating else set())
        trains = {id(targets.trains[i]): targets.trains[i] for i in sorted(fitted)}
        side = {id(train): i for i, train in enumerate(targets.trains)}
        rows = self._rows(spark, targets)
        with trains_on_spark(train_rows(rows, targets)):  # spark_als reads its train side on Spark
            fitted_models = fit_models(plan, trains, self.progress, self.timings).all(plan.fold, self.timings)
        models = {(name, side[key]): m for (name, key), m in fitted_models.items()}
        factor_keys = tuple(key for key, m in models.items() if has_user_rows(m))
        n_parts = self.engine.partitions or 4 * context.defaultParallelism
        measure = plan.options.measure
        # per train side, what its beyond-accuracy metrics read of every train user
        item_sides = tuple(whole_item_side(train, train.n_items, measure.ranking, measure.params)
                           for train in targets.trains) if any(n in BEYOND_METRICS for n in measure.ranking) else None
        task = FoldTask(
            options=plan.options, jobs=plan.models, rank=plan.rank, template=shipped_template(rowless(plan.data)),
            fold=plan.fold, targets=context.broadcast(targets.shipped),
            models=context.broadcast({key: broadcastable(m) for key, m in models.items()}),
            pool_auc=plan.pool_auc, n_parts=n_parts,
            files=self.sink.folder.partition_files(),
            item_sides=None if item_sides is None else context.broadcast(item_sides),
            factor_keys=factor_keys,
        )
        start = time.perf_counter()
        # the driver's run-level counts read the whole train sides' item side alone, no user's rows
        run_level = RunLevel(measure, task.template, {
            label: with_item_side(rowless(plan.data), item_sides[targets.shipped.trains[p]])
            for p, protocol in enumerate(plan.options.protocols) for label in protocol_labels(protocol)}
                             if item_sides is not None else {})
        out, exposure, scored = self._collect(spark, task, n_parts, rows, run_level,
                                              [models[key] for key in factor_keys])
        self.timings.add(plan.fold, "", "rank and measure on Spark", start)
        if exposure:
            # in the local fold's order: protocols, then systems, as the config lists them
            order = [pl.col(c).replace_strict(names, list(range(len(names)))) for c, names in (
                ("protocol", plan.options.labels), ("system", plan.options.systems))]
            exposure = [pl.concat(exposure).group_by(["system", "protocol", "fold", "bin"])
                        .agg(pl.col("count").sum()).sort([*order, "bin"])]
        self.sink.write_fold_scratch(plan.fold, exposure, scored, [])
        return out

    def _rows(self, spark, targets):
        """The fold's rows as a Spark DataFrame (:meth:`~recsys_eval.engine.targets.FoldTargets.rows`'
        columns and each row's raw user id, :data:`~recsys_eval.engine.targets.RAW_USER`): read from
        the split Spark wrote (:func:`recsys_eval.engine.inputs.fold_frame`), with the uniform
        tests' flags of the test rows (the driver's choice) joined on (user, item) and the fixed
        negatives' rows added; else sent from the driver's split."""
        from recsys_eval.engine.inputs import fold_frame
        from recsys_eval.engine.targets import with_raw_users

        split, data = self.plan.split, self.plan.data  # its user ids read only for rows sent from here
        if self.written is None:
            return spark.createDataFrame(with_raw_users(targets.rows(split), data.user_ids).to_arrow())
        frame = fold_frame(spark, self.written)
        if targets.flags:
            flags = split.test.frame.select("user", "item").with_columns(
                pl.Series(column, stay) for column, stay in targets.flags.items())
            frame = frame.join(spark.createDataFrame(flags.to_arrow()), on=["user", "item"], how="left")
        if targets.negatives:
            negatives = pl.concat([pairs.with_columns(pl.lit(True).alias(column))
                                   for column, pairs in targets.negatives.items()], how="diagonal_relaxed")
            frame = frame.unionByName(spark.createDataFrame(with_raw_users(negatives, data.user_ids).to_arrow()),
                                      allowMissingColumns=True)
        return frame.fillna(False, subset=[*targets.flags, *targets.negatives])

    def _collect(self, spark, task: FoldTask, n_parts: int, frame, run_level: RunLevel,
                 factor_models: list) -> tuple[FoldSummary, list, list]:
        """Every partition's tables from the fold's ``rows`` as they come back (its per-unit files'
        names and sums, exposure and scored rows, run-level counts summed into ``run_level``); then
        each (protocol, system) summarised, in config order, its run-level rows written as its last
        file. The user factors of ``factor_models`` (in ``task.factor_keys`` order) go along the
        fold's rows (``frame``, a Spark DataFrame), to their users' partitions."""
        from recsys_eval.core.spark import job_error, spark_failures
        from recsys_eval.engine.beyond import RUN_COUNTS
        from recsys_eval.engine.factors import user_factor_rows

        from recsys_eval.engine.targets import UnitCounts, unit_number_rows

        plan = self.plan
        units = UnitCounts(plan.options, task.targets, task.template, plan.fold)
        frame = frame.unionByName(unit_number_rows(frame, units, n_parts), allowMissingColumns=True)
        for index, model in enumerate(factor_models):
            frame = frame.unionByName(user_factor_rows(spark, model, index, frame.schema["user"].dataType),
                                      allowMissingColumns=True)
        ordered = frame.repartition(n_parts, "user").sortWithinPartitions("user")
        out = FoldSummary()
        sums: dict[tuple[str, str], list[SummaryState]] = {}
        exposure, scored = [], []

        def take(kind: str, table: bytes) -> None:
            if kind == SUMS:
                system, protocol, state = pickle.loads(table)
                sums.setdefault((system, protocol), []).append(state)
            elif kind == RUN_COUNTS:
                run_level.add(table)
            else:
                frame = pl.read_ipc(io.BytesIO(table))
                if kind == WRITTEN:
                    out.partitions.append(Path(frame.item()))
                else:
                    (exposure if kind == EXPOSURE else scored).append(frame)

        try:
            self._tables(spark, task, ordered, n_parts, take)
        except spark_failures() as exc:
            raise job_error(exc) from None
        out.partitions.sort()
        intervals = self._bootstrap(spark, out.partitions, n_parts)  # of the users' files alone
        undefined = plan.options.measure.undefined
        for label in plan.options.labels:
            for system in plan.options.systems:
                states = sums.pop((system, label), [])
                run = run_level.frame(system, label, plan.fold)
                if run is not None:  # after every chunk (and every Spark partition's part), as the local fold writes it
                    out.partitions.append(self.sink.write_partition(run, part=max(plan.data.n_users, n_parts)))
                    states.append(PartitionState.of(run, undefined=undefined).reduced())
                if states:
                    key = (pl.col("system") == system) & (pl.col("protocol") == label)
                    out.add(partition_rows(plan.options.summarising, SummaryState.merge(states),
                                           None if intervals is None else intervals.filter(key)))
        return out, exposure, scored

    def _tables(self, spark, task: FoldTask, ordered, n_parts: int, take) -> None:
        """Every partition's ``(kind, table)`` pairs from the fold's rows ``ordered`` (by user),
        given to ``take``: brought back as the tasks end, each task writing its per-unit files; or,
        with a results folder at a URI (the sink's ``remote``, :mod:`recsys_eval.engine.remote`),
        its per-unit rows written by Spark into the fold's folder there (the parts named as
        :meth:`~recsys_eval.engine.runs.HadoopFolder.name_parts` names them, each taken as a
        :data:`WRITTEN` table of its path under the sink's folder) and the rest handed over through
        an accumulator (:class:`TaskTables`)."""
        from pyspark.sql import types as T

        from recsys_eval.core.results import PER_UNIT, label_folder, per_unit_folder
        from recsys_eval.core.spark import task_threads
        from recsys_eval.engine.partitions import MERGED, arrow_task
        from recsys_eval.engine.runs import per_unit_schema

        threads, remote = task_threads(spark), self.sink.remote
        if remote is None:
            schema = T.StructType([T.StructField("kind", T.StringType()), T.StructField("table", T.BinaryType())])
            for row in ordered.mapInArrow(arrow_task(task, threads, key="user"), schema).toLocalIterator():
                take(row["kind"], row["table"])
            return
        tables = spark.sparkContext.accumulator(TaskTables(take=take), MERGED)
        text_users = task.template.user_ids.dtype == pl.String
        fold = f"{PER_UNIT}/{label_folder('fold', self.plan.fold)}"
        (ordered.mapInArrow(row_task(task, threads, tables, text_users), per_unit_schema(text_users))
         .write.partitionBy("protocol", "system").option("compression", "zstd").parquet(remote.folder.child(fold)))
        tables.value.finish(n_parts)
        remote.folder.remove_children(fold)
        for protocol in self.plan.options.labels:
            for system in self.plan.options.systems:
                folder = per_unit_folder({"fold": self.plan.fold, "protocol": protocol, "system": system})
                if remote.folder.has(folder):
                    for name in remote.folder.name_parts(folder, "part-"):
                        take(WRITTEN, _ipc(pl.DataFrame({"path": [str(self.sink.path / name)]})))

    def _bootstrap(self, spark, written: list[Path], n_parts: int) -> pl.DataFrame | None:
        """The fold's bootstrap intervals, a Spark job over its written files (None with t-intervals)."""
        from recsys_eval.core.uris import file_uri
        from recsys_eval.engine.stats import bootstrap_intervals

        summarising = self.plan.options.summarising
        if summarising.interval != "bootstrap" or not written:
            return None
        fold = self.plan.fold
        remote = self.sink.remote
        files = [file_uri(p) if remote is None else remote.folder.child(str(p.relative_to(self.sink.path)))
                 for p in written]
        return bootstrap_intervals(spark, files, undefined=summarising.undefined,
                                   n_resamples=summarising.resamples, partitions=n_parts,
                                   seeds={(fold, label): summarising.seed_of(fold, label)
                                          for label in self.plan.options.labels})
