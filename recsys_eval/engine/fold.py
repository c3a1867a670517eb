"""One experiment fold on Spark (``[engine] name = "spark"``): the local runner's jobs per user partition.

The driver executes a :class:`~recsys_eval.pipeline.plan.FoldPlan` (built without target sets: the
tasks build them): it fits every recommender of the plan (``spark_als`` fits on Spark), then
broadcasts the fitted models (of a factor model, its item factors alone: each user's factor row
travels with the user's rows to the user's partition, :mod:`recsys_eval.engine.factors`). The
fold's train and test rows are repartitioned by user; each task builds its users' target sets,
ranks and measures them with the same functions the local fold calls (:meth:`recsys_eval.pipeline.plan.RunOptions.target_sets`,
:func:`recsys_eval.pipeline.jobs.rank`, :func:`~recsys_eval.pipeline.jobs.measure_ranking`). Targets are drawn per user from a
counter-based generator keyed on the protocol's seed, so a user's targets do not depend on which
users share its partition, and the per-unit values equal the local engine's. Units are numbered as
the local runner numbers them (per target set, in user-index order), from each user's first unit
computed on the driver.

Per-unit rows never come back to the driver: each task writes them into the results folder in
its layout (:class:`recsys_eval.core.results.PartitionFiles`: one file per (system, protocol) and
chunk of users, ``per_unit/f<i>/s<j>-p<k>-<first user>.parquet``; the executors must reach the
results folder's file system, as they do on a local master or a shared file system) and hands
back the file's name and its users' exact sums
(:class:`recsys_eval.measure.aggregate.SummaryState`), which the driver merges into the local
engine's summary bit for bit. A bootstrap interval, which resamples each user's value, reads the
written files back one (system, protocol) at a time. The exposure counts per popularity bin add up
to the local ones; the pooled-AUC sample is drawn per Spark partition (another sample of the same
scores).

What runs here (checked when the config is validated, :func:`check_spark_config`): recommenders
whose fitted model can be broadcast (random, popular, ALS/BPR/LMF factors, item kNN neighbourhoods,
spark_als), standard-design protocols with AI or UT candidates and uniform sampling (their targets
depend on the user's own rows only), and ranking metrics.
"""

from __future__ import annotations

import copy
import io
import pickle
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from recsys_eval.errors import ConfigError
from recsys_eval.measure.aggregate import PartitionState, SummaryState
from recsys_eval.pipeline.summary import FoldSummary, partition_rows

if TYPE_CHECKING:
    from recsys_eval.core import Interactions, Split
    from recsys_eval.pipeline.config import EngineConfig, ExperimentConfig
    from recsys_eval.pipeline.plan import FoldPlan, RunOptions
    from recsys_eval.pipeline.progress import Progress
    from recsys_eval.pipeline.sink import RunSink
    from recsys_eval.pipeline.timings import Timings

# Recommenders whose fitted model is small enough to broadcast to every executor: item scores, a
# seed, factors, item neighbourhoods. Why the others cannot: what each needs at scoring time.
BROADCASTABLE = ("random", "popular", "als", "bpr", "lmf", "item_knn", "spark_als")
_NOT_BROADCASTABLE = {
    "user_knn": "it scores a user from its neighbours' train rows, i.e. the whole train matrix",
    "bias": "it predicts ratings (rating metrics are computed by the local engine)",
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


def check_spark_protocol(name: str, design: str = "standard", sampling: str = "uniform") -> None:
    """Raise a ConfigError for a protocol the Spark engine does not build per user partition: target
    sets that depend on other users' data (TI candidates: every user's test items; popularity
    sampling and the percentile and uniform-test designs: item counts over all train users)."""
    from recsys_eval.targets import Protocol

    parsed = Protocol.parse(name)
    reason = None
    if parsed.candidates == "TI":
        reason = "TI candidates are the test items of every user"
    elif sampling != "uniform":
        reason = f"{sampling} sampling weighs items by their counts over every train user"
    elif design != "standard":
        reason = f"the {design} design moves or bins items by counts over every user"
    if reason:
        raise ConfigError(
            f"protocol {name!r} ({design} design, {sampling} sampling) cannot run on the Spark engine: "
            f"{reason}, not only the partition's; use AI or UT candidates with uniform sampling, "
            "or the local engine"
        )


def check_spark_metrics(names: list[str]) -> None:
    """Ranking metrics only: beyond-accuracy metrics need every user's rankings (coverage, PopRSP)
    or item counts and profiles over all train users (novelty, ARP, calibration, serendipity...),
    rating metrics a rating predictor on the driver."""
    from recsys_eval.measure.metrics import BEYOND_METRICS, RANKING_METRICS

    beyond = [n for n in names if n in BEYOND_METRICS]
    if beyond:
        raise ConfigError(f"beyond-accuracy metrics {beyond} cannot run on the Spark engine yet: they read every "
                          "train user's item counts or profile, which its user partitions do not hold; use the "
                          "local engine for them")
    other = [n for n in names if n not in RANKING_METRICS]
    if other:
        raise ConfigError(f"metrics {other} cannot run on the Spark engine (ranking metrics only: "
                          f"{', '.join(RANKING_METRICS)}); use the local engine")


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
    for i, p in enumerate(config.protocols):
        collect(f"protocols[{i}]", check_spark_protocol, p.name, p.design, p.sampling)
    collect("metrics.names", check_spark_metrics, config.metrics.names)
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError(f"{len(problems)} parts of the config cannot run on the Spark engine:\n  - "
                          + "\n  - ".join(problems))


# -- what the executors get ------------------------------------------------------------------------
def broadcastable(model: Any) -> Any:
    """The part of a fitted recommender the executors need: the library object is dropped (item
    counts, similarities kept); a factor model keeps its item factors alone (its users' rows are
    joined to their partitions, :mod:`recsys_eval.engine.factors`); item kNN leaves its train
    matrix behind (a task reads its users' rows from its own partition, :func:`local_model`)."""
    from recsys_eval.engine.factors import item_side
    from recsys_eval.recommend.baselines import PopularRecommender, RandomRecommender
    from recsys_eval.recommend.implicit_models import FactorModel, ItemKNN

    if isinstance(model, RandomRecommender | PopularRecommender):
        return model
    if isinstance(model, FactorModel):
        return item_side(model)
    if isinstance(model, ItemKNN):
        light = copy.copy(model)
        light.model, light.user_items = None, None
        return light
    raise ConfigError(f"{type(model).__name__} cannot be broadcast to Spark executors; "
                      f"the Spark engine runs {', '.join(BROADCASTABLE)}")


def local_model(model: Any, train: Interactions, user_factors: tuple | None = None) -> Any:
    """A broadcast model made ready for a chunk of users: item kNN scores a user from the user's
    train row, a factor model from the user's factor row (``user_factors``: the chunk's ``(users,
    rows)``), both of which the partition holds."""
    from recsys_eval.engine.factors import PartitionFactors
    from recsys_eval.recommend.implicit_models import ItemKNN

    if isinstance(model, ItemKNN):
        model = copy.copy(model)
        model.user_items = train.csr()
    if isinstance(model, PartitionFactors) and user_factors is not None:
        model = model.with_users(*user_factors)
    return model


@dataclass(frozen=True)
class FoldTask:
    """How a task turns a chunk of whole users of a fold (columns ``user, item, rating, test``: user
    and item indices, the rating, whether the row is a test row) into tables for the driver.

    ``options``: the run's options (protocols, measure options, seeds); ``jobs`` and ``rank``: the
    fold's recommenders and rank options; ``template`` is the dataset with no rows (its user and item index, item
    metadata); ``first_unit`` (broadcast) maps a target set's label to each user index's first unit
    number; ``models`` (broadcast) maps a system to its fitted, broadcastable model; ``pool_auc``:
    whether scored targets are sampled for the pooled AUC, from ``n_parts`` partitions;
    ``item_counts`` (broadcast) the fold's train counts per item, over every user (the exposure's
    popularity bins); ``files``: where the per-unit partitions go; ``summed``: whether the
    summary takes the users' sums (t-intervals) rather than each user's value (a bootstrap);
    ``factor_systems``: the systems whose user factors come as rows of the chunk, by their
    ``factor_model`` index (:mod:`recsys_eval.engine.factors`)."""

    options: Any
    jobs: Any
    rank: Any
    template: Any
    fold: str
    first_unit: Any
    models: Any
    pool_auc: bool
    n_parts: int
    item_counts: Any
    files: Any
    summed: bool
    factor_systems: tuple[str, ...] = ()

    def __call__(self, chunk: pl.DataFrame) -> pl.DataFrame:
        """The chunk's tables as ``kind, table`` rows (each table in Arrow IPC bytes, sums pickled),
        its per-unit rows written (named by the chunk's first user: chunks hold disjoint users)."""
        tables = []
        for kind, frame in fold_chunk_tables(chunk, self):
            if not frame.height:
                continue
            if kind != PER_UNIT:
                tables.append((kind, _ipc(frame)))
                continue
            path = self.files.write(frame, part=int(chunk.get_column("user").min()))
            tables.append((WRITTEN, _ipc(pl.DataFrame({"path": [str(path)]}))))
            if self.summed:
                labels = frame.row(0, named=True)
                state = PartitionState.of(frame, undefined=self.options.measure.undefined).reduced()
                tables.append((SUMS, pickle.dumps((labels["system"], labels["protocol"], state))))
        return pl.DataFrame(tables, schema={"kind": pl.String, "table": pl.Binary}, orient="row")


def fold_chunk_tables(chunk: pl.DataFrame, task: FoldTask):
    """``(kind, table)`` pairs of one chunk: per (protocol, system) its per-unit rows with the
    fold's unit numbers, the exposure counts of full rankings, and the sampled scored targets."""
    from recsys_eval.core import Split
    from recsys_eval.engine.factors import take_user_factors
    from recsys_eval.pipeline import jobs
    from recsys_eval.targets import Protocol
    from recsys_eval.targets.relevance import qrels

    options = task.options
    first_unit = getattr(task.first_unit, "value", task.first_unit)
    chunk, user_factors = take_user_factors(chunk, task.factor_systems)
    if not chunk.height:  # factor rows of users with no row in this fold
        return
    sides = [chunk.filter(pl.col("test") == side).drop("test") for side in (False, True)]
    split = Split(*(task.template.with_frame(side) for side in sides), name=task.fold)
    broadcast = getattr(task.models, "value", task.models)
    models = {job.system: local_model(broadcast[job.system], split.train, user_factors.get(job.system))
              for job in task.jobs}
    judged = qrels(split, options.measure.relevance_threshold)
    for protocol in options.protocols:
        if Protocol.parse(protocol.name).relevant == "1R" and not (judged.gain > 0).any():
            continue  # no relevant item among these users: no unit (the driver checked the fold)
        for target_set in options.target_sets(protocol, split):
            target = target_set.whole()
            users = target.targets.unit_user.astype(np.int64)
            starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]]) if len(users) else users
            within = np.arange(len(users)) - np.repeat(starts, np.diff(np.r_[starts, len(users)]))
            global_unit = first_unit[target.label][users] + within
            for job in task.jobs:
                rankings = jobs.rank(task.rank, models[job.system], target)
                frame = jobs.measure_ranking(options.measure, task.template, rankings, target, job.system, task.fold,
                                             run_level=False)
                mapped = pl.Series("unit", global_unit, dtype=pl.Int64).gather(frame.get_column("unit"))
                yield PER_UNIT, frame.with_columns(mapped)
                if target.targets.all_candidates and not target.targets.one_relevant:
                    yield EXPOSURE, jobs.exposure_rows(rankings, target, job.system, task.fold,
                                                       bins=options.exposure_bins, k=options.measure.kmax,
                                                       item_counts=getattr(task.item_counts, "value", task.item_counts))
                if task.pool_auc and getattr(rankings, "scores", True) is not None:  # 1R: sampled too
                    seed = options.seeds.auc_pool(task.fold, job.configured.definition, target.definition,
                                                  jobs.first_user(target))
                    yield SCORED, jobs.scored_rows(rankings, target, job.system, task.fold, seed=seed,
                                                   n_chunks=task.n_parts)


def _ipc(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_ipc(buffer)
    return buffer.getvalue()


def first_units(options: RunOptions, split: Split) -> dict[str, np.ndarray]:
    """Per target set label, each user index's first unit number in the fold: units are numbered
    in user-index order, one per user with a judged test item (AR) or one per relevant test item
    (1R), as :func:`recsys_eval.targets.iter_targets` makes them."""
    from recsys_eval.errors import DataError
    from recsys_eval.pipeline.targets import protocol_labels
    from recsys_eval.targets import Protocol
    from recsys_eval.targets.relevance import qrels

    threshold = options.measure.relevance_threshold
    judged = qrels(split, threshold)
    n_rel = judged.relevant_counts().astype(np.int64)
    out = {}
    for protocol in options.protocols:
        if Protocol.parse(protocol.name).relevant == "1R":
            if not n_rel.any():
                raise DataError(f"split {split.name!r}: protocol {protocol.name} needs relevant test items, "
                                f"and none reaches the threshold {threshold}")
            units = n_rel
        else:
            units = (judged.counts() > 0).astype(np.int64)
        for label in protocol_labels(protocol):
            out[label] = np.r_[0, np.cumsum(units)[:-1]].astype(np.int64)
    return out


# -- the driver ------------------------------------------------------------------------------------
class SparkFold:
    """A fold's plan executed on Spark (see the module): models fitted on the driver, target sets,
    rankings and measures per user partition, per-unit files and summary rows written and reduced
    on the driver through the run's sink, as :class:`~recsys_eval.pipeline.local.LocalFold` does."""

    def __init__(self, plan: FoldPlan, engine: EngineConfig, sink: RunSink, progress: Progress,
                 timings: Timings) -> None:
        self.plan, self.engine, self.sink, self.progress, self.timings = plan, engine, sink, progress, timings

    def run(self) -> FoldSummary:
        from recsys_eval.core.spark import spark_session
        from recsys_eval.pipeline.fit import fit_models
        from recsys_eval.recommend.implicit_models import FactorModel

        plan, split = self.plan, self.plan.split
        spark = spark_session(self.engine.master)  # first: no PySpark or Java is one message naming the extra
        context = spark.sparkContext
        models = {name: m for (name, _), m in fit_models(plan, {id(split.train): split.train}, self.progress,
                                                         self.timings).all(plan.fold, self.timings).items()}
        factor_systems = tuple(name for name, m in models.items() if isinstance(m, FactorModel))
        n_parts = self.engine.partitions or 4 * context.defaultParallelism
        task = FoldTask(
            options=plan.options, jobs=plan.models, rank=plan.rank, template=plan.data.with_frame(plan.data.frame.clear()),
            fold=plan.fold, first_unit=context.broadcast(first_units(plan.options, split)),
            models=context.broadcast({name: broadcastable(m) for name, m in models.items()}),
            pool_auc=plan.pool_auc, n_parts=n_parts, item_counts=context.broadcast(split.train.item_counts()),
            files=self.sink.folder.partition_files(), summed=plan.options.summarising.interval == "t",
            factor_systems=factor_systems,
        )
        start = time.perf_counter()
        out, exposure, scored = self._collect(spark, task, n_parts, [models[name] for name in factor_systems])
        self.timings.add(plan.fold, "", "rank and measure on Spark", start)
        if exposure:
            # in the local fold's order: protocols, then systems, as the config lists them
            order = [pl.col(c).replace_strict(names, list(range(len(names)))) for c, names in (
                ("protocol", plan.options.labels), ("system", plan.options.systems))]
            exposure = [pl.concat(exposure).group_by(["system", "protocol", "fold", "bin"])
                        .agg(pl.col("count").sum()).sort([*order, "bin"])]
        self.sink.write_fold_scratch(plan.fold, exposure, scored, [])
        return out

    def _collect(self, spark, task: FoldTask, n_parts: int, factor_models: list) -> tuple[FoldSummary, list, list]:
        """Every partition's tables as they come back (its per-unit files' names and sums, exposure
        and scored rows); then each (protocol, system) summarised, in config order. The user
        factors of ``factor_models`` go along the fold's rows, to their users' partitions."""
        from pyspark.sql import types as T

        from recsys_eval.core.spark import spark_failures, task_threads
        from recsys_eval.engine.factors import user_factor_rows
        from recsys_eval.engine.partitions import arrow_task
        from recsys_eval.engine.runs import job_error

        plan, split = self.plan, self.plan.split
        rows = pl.concat([side.frame.select("user", "item", *(["rating"] if side.has_rating else []))
                          .with_columns(pl.lit(is_test).alias("test"))
                          for is_test, side in ((False, split.train), (True, split.test))], how="diagonal_relaxed")
        frame = spark.createDataFrame(rows.to_arrow())
        for index, model in enumerate(factor_models):
            frame = frame.unionByName(user_factor_rows(spark, model, index, frame.schema["user"].dataType),
                                      allowMissingColumns=True)
        ordered = frame.repartition(n_parts, "user").sortWithinPartitions("user")
        schema = T.StructType([T.StructField("kind", T.StringType()), T.StructField("table", T.BinaryType())])
        out = FoldSummary()
        sums: dict[tuple[str, str], list[SummaryState]] = {}
        exposure, scored = [], []
        try:
            for row in ordered.mapInArrow(arrow_task(task, task_threads(spark), key="user"), schema).toLocalIterator():
                if row["kind"] == SUMS:
                    system, protocol, state = pickle.loads(row["table"])
                    sums.setdefault((system, protocol), []).append(state)
                    continue
                frame = pl.read_ipc(io.BytesIO(row["table"]))
                if row["kind"] == WRITTEN:
                    out.partitions.append(Path(frame.item()))
                else:
                    (exposure if row["kind"] == EXPOSURE else scored).append(frame)
        except spark_failures() as exc:
            raise job_error(exc) from None
        out.partitions.sort()
        for label in plan.options.labels:
            for system in plan.options.systems:
                state = self._summed(sums.pop((system, label), []), out.partitions, system, label, task.summed)
                if state is not None:
                    out.add(partition_rows(plan.options.summarising, state))
        return out, exposure, scored

    def _summed(self, sums: list[SummaryState], written: list[Path], system: str, label: str, summed: bool):
        """The state a (system, protocol) is summarised from: its partitions' merged sums, or (a
        bootstrap) its users' values read back from its files; None when it has no unit."""
        if summed:
            return SummaryState.merge(sums) if sums else None
        prefix = self.sink.folder.partition_file(self.plan.fold, system, label, 0).name.rsplit("-", 1)[0] + "-"
        files = [p for p in written if p.name.startswith(prefix)]
        undefined = self.plan.options.measure.undefined
        states = [PartitionState.of(pl.read_parquet(p), undefined=undefined) for p in files]
        return PartitionState.merge(states).in_user_order() if states else None
