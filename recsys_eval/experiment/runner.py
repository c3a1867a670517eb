"""The experiment runner: turns a config into jobs and runs them, fold by fold.

For each fold every recommender is fitted once and evaluated under every protocol; the targets of
a (fold, protocol) are built once and shared by all recommenders. Each (fold, system, protocol)
partition of per-unit values is written as soon as it is measured and summarised on its own (means,
intervals, pooled counts), so the whole per-unit table is never held in memory; the ``all`` rows
come from the fold rows (recsys_eval.measure.aggregate). A fold is marked complete only after its
partitions and its split are written, so ``--resume`` reuses it whole or redoes it.
"""

from __future__ import annotations

import functools
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from rich.console import Console

from recsys_eval.core import Interactions, Split, atomic
from recsys_eval.core.memory import (
    format_size,
    parse_size,
    peak_bytes,
    reset_peak,
    resident_bytes,
)
from recsys_eval.core.results import (
    AUC_POOLING,
    CONFIG,
    CURVES,
    DATA_STATS,
    EXPOSURE,
    FORMAT_VERSION,
    LEARNING_CURVE,
    LOG,
    MANIFEST,
    SUMMARY,
    TIMINGS,
    TUNING,
    ResultsFolder,
    config_hash,
)
from recsys_eval.core.rng import derive_seed
from recsys_eval.errors import ConfigError
from recsys_eval.experiment import jobs
from recsys_eval.experiment.config import ExperimentConfig
from recsys_eval.experiment.manifest import data_statistics, make_manifest
from recsys_eval.experiment.progress import Progress
from recsys_eval.measure.aggregate import PartitionState
from recsys_eval.recommend.external import ExternalRun

if TYPE_CHECKING:
    from recsys_eval.recommend.base import Recommender

_KEYS = ["system", "protocol", "fold", "metric", "k"]


@dataclass
class RunOutcome:
    folder: Path
    summary: pl.DataFrame


@dataclass
class FoldSummary:
    """What a fold leaves in memory: its summary rows and pooled F counts (small), and its files."""

    rows: list[pl.DataFrame]
    f_sums: list[pl.DataFrame]
    partitions: list[Path]


def partition_rows(config: ExperimentConfig, state: PartitionState) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """One partition's fold rows (mean over users with its interval, micro mean, users counted and
    left out, the rule) and its summed F-measure counts when ``f1`` is measured."""
    from recsys_eval.compare import confidence_intervals
    from recsys_eval.compare.intervals import t_interval_rows

    rows = state.summary(config.metrics.undefined)
    c = config.compare
    if state.users.height and c.interval == "t":  # on the users as the state keeps them
        keys = ["metric", "k"] if state.labels is not None else _KEYS
        ci = t_interval_rows(state.users, keys).select(*keys, "lower", "upper")
        rows = rows.join(ci, on=keys, how="left", nulls_equal=True, maintain_order="left")
    elif state.users.height:
        users = state.user_values()
        protocol, fold = users.row(0, named=True)["protocol"], users.row(0, named=True)["fold"]
        ci = confidence_intervals(
            users.select("system", "protocol", "fold", "user", "metric", "k", "value"),
            method=c.interval, n_resamples=c.resamples, seed=jobs.interval_seed(config, fold, protocol),
        ).select(*_KEYS, "lower", "upper")
        rows = rows.join(ci, on=_KEYS, how="left", nulls_equal=True, maintain_order="left")
    return rows, state.f_sums()


@dataclass
class FittedModels:
    """The fold's models, ``{(system, id(train)): model}``, and the fits still running in the
    background (``{system: [(id(train), future of (model, seconds))]}``)."""

    models: dict[tuple[str, int], object]
    background: dict[str, list[tuple[int, Future]]]

    def wait_for(self, system: str, fold: str, timings: list[dict]) -> None:
        """The background fits of ``system``, once they are done (a fit's error is raised here)."""
        for key, future in self.background.pop(system, []):
            start = time.perf_counter()
            model, seconds = future.result()
            timings.append(_timing(fold, system, "wait for background fit", start))
            self.models[system, key] = model
            timings.append(_timing(fold, system, "fit in background", time.perf_counter() - seconds))

    def all(self, fold: str, timings: list[dict]) -> dict[tuple[str, int], object]:
        """Every model, once the background fits are done."""
        for system in list(self.background):
            self.wait_for(system, fold, timings)
        return self.models


def fit_models(config: ExperimentConfig, data: Interactions, split: Split, trains: dict[int, Interactions],
               folder: ResultsFolder, progress: Progress, timings: list[dict]) -> FittedModels:
    """Every recommender of the config (tuned on the fold when the config asks) fitted on each of
    ``trains`` (keyed by ``id``).

    Fits that run on one thread by design (BPR) would leave a core idle: when other systems are
    there to evaluate meanwhile, they run in the background on all cores but one, and their
    systems are evaluated last (:meth:`FittedModels.wait_for`); otherwise two or more of them go
    side by side, one per core. Each has its own seed and state either way, so its factors are
    those of a fit alone."""
    from recsys_eval.tune import chosen, tune_fold

    start = time.perf_counter()
    tuned = tune_fold(config, data, split, folder.path / TUNING, progress.log)
    if tuned:
        timings.append(_timing(split.name, "", "tune", start))
    to_fit = [(rec, key, train, jobs.make_model(config, chosen(tuned, rec), data, split.name))
              for rec in config.recommenders for key, train in trains.items()]
    single = [job for job in to_fit if getattr(job[3], "single_threaded_fit", False)]
    cores = os.cpu_count() or 1
    in_background = len(single) < len(to_fit) and cores >= 2
    fitted = FittedModels({}, {})

    def fit_alone(job: tuple) -> tuple[object, float]:
        start = time.perf_counter()
        return job[3].fit(job[2]), time.perf_counter() - start

    with progress.step(f"[{split.name}] fit", total=len(to_fit)) as advance:
        done = {}
        if single and in_background:
            pool = ThreadPoolExecutor(max_workers=min(len(single), cores - 1), thread_name_prefix="recsys-fit")
            for job in single:
                fitted.background.setdefault(job[0].display, []).append((job[1], pool.submit(fit_alone, job)))
                done[id(job)] = None
                advance()
            pool.shutdown(wait=False)  # the workers finish their fits; nothing else is queued
        elif len(single) >= 2:
            with ThreadPoolExecutor(max_workers=min(len(single), cores)) as pool:
                for job, (model, seconds) in zip(single, pool.map(fit_alone, single), strict=True):
                    done[id(job)] = model
                    timings.append(_timing(split.name, job[0].display, "fit side by side",
                                           time.perf_counter() - seconds))
                    advance()
        for job in to_fit:
            rec, key, _, _ = job
            if id(job) in done:
                if done[id(job)] is not None:
                    fitted.models[rec.display, key] = done[id(job)]
                continue
            start = time.perf_counter()
            model = job[3].fit(job[2])
            timings.append(_timing(split.name, rec.display, "fit", start))
            if isinstance(model, ExternalRun):
                model.check_overlap(np.unique(split.test.users))
                if model.unknown["rows"]:
                    progress.log(f"[yellow]{rec.display}: {model.unknown_message()}[/]")
            fitted.models[rec.display, key] = model
            advance()
    return fitted


def evaluate_fold(
    config: ExperimentConfig,
    data: Interactions,
    split: Split,
    folder: ResultsFolder,
    progress: Progress,
    timings: list[dict],
) -> FoldSummary:
    """Every recommender under every protocol on one fold, a range of users at a time (the range
    sized by the memory budget). A range's units of every target set are built once for all
    recommenders; each recommender then ranks and measures them all, reading one score block of
    the range (:class:`~recsys_eval.recommend.base.SharedBlock`) where it scores by blocks, so a
    user is scored once per (recommender, train), not once per target set. Each chunk's per-unit
    rows are written as their own file and reduced to per-user values; a partition is summarised
    from its users once all its chunks are done. Outputs are in target-set order, whatever the
    ranges."""
    from recsys_eval.measure.beyond import (
        RUN_METRICS,
        RunExposure,
        catalogue_of,
        run_frame,
    )
    from recsys_eval.recommend.base import SharedBlock
    from recsys_eval.report.curves import curve_rows

    with progress.step(f"[{split.name}] targets", total=len(config.protocols)) as advance:
        sets: list[jobs.TargetSet] = []
        for protocol in config.protocols:
            start = time.perf_counter()
            sets += jobs.target_sets(config, protocol, split)
            timings.append(_timing(split.name, "", f"plan targets {protocol.display}", start))
            advance()
    # Protocols that moved ratings into train (uniform test) need their own fitted model.
    trains: dict[int, Interactions] = {id(t.train): t.train for t in sets}
    fitted = fit_models(config, data, split, trains, folder, progress, timings)
    models = fitted.models
    ranking_names, rating_names = jobs.metric_names(config)
    pool_auc = "auc" in ranking_names and len(folder.layout["folds"]) >= 2
    run_names = [m for m in ranking_names if m in RUN_METRICS]
    recs = config.recommenders
    n_users = split.train.n_users
    block_items = split.train.n_items if any(SharedBlock.shares(m) for m in models.values()) else 0
    per_range = range_users(config, sets, n_users, block_items, parse_size(config.run.memory))
    starts = np.arange(0, max(n_users, 1), per_range)
    # per set: the ranges holding its users (a set without users is evaluated once, empty)
    chunks_of = [max(len(np.unique(np.searchsorted(starts, s.plan.users, side="right"))), 1) for s in sets]
    # the sets of each train together, so that one shared block is alive at a time
    by_train = sorted(range(len(sets)), key=lambda s: list(trains).index(id(sets[s].train)))
    states = {(s, r): [] for s in range(len(sets)) for r in range(len(recs))}
    # run-level metrics (coverage, Gini, entropy) from exposure counts summed over the chunks
    run_exposure = {(s, r): RunExposure(data.n_items, sorted(config.metrics.k), catalogue_of(sets[s].train, data.n_items))
                    for s in range(len(sets)) for r in range(len(recs))}
    # outputs keyed (set, part, recommender): written out in that order at the end
    partitions: dict[tuple, Path] = {}
    exposure: dict[tuple, pl.DataFrame] = {}
    scored: dict[tuple, pl.DataFrame] = {}
    curves: dict[tuple, pl.DataFrame] = {}  # ROC and PR on a small fixed grid per chunk, for the report
    parts = [0] * len(sets)  # chunks done per set (a set's partitions are numbered 0, 1, ...)
    units_before = [0] * len(sets)
    summaries: dict[tuple[int, int], tuple[pl.DataFrame, pl.DataFrame | None]] = {}
    run_parts: dict[tuple[int, int], Path] = {}

    def keep(at: tuple[int, int, int], frame: pl.DataFrame, offset: int, label: str, then_summarise: bool) -> None:
        """A chunk's per-unit rows written as their partition and reduced to per-user values, then
        the (set, recommender) summarised if that was its last chunk (on the keeper thread)."""
        start = time.perf_counter()
        if offset:
            frame = frame.with_columns(pl.col("unit") + offset)
        partitions[at] = folder.write_partition(frame, part=at[1])
        states[at[0], at[2]].append(PartitionState.of(frame, undefined=config.metrics.undefined))
        del frame
        timings.append(_timing(split.name, recs[at[2]].display, f"write {label}", start))
        if then_summarise:
            summarise(at[0], at[2], at[1] + 1)

    def summarise(s: int, r: int, part: int) -> None:
        """(set, recommender) done: its run-level rows, then its summary, and its users let go (on
        the keeper thread, after its chunks)."""
        rec, start = recs[r], time.perf_counter()
        if run_names:
            labels = {"system": rec.display, "protocol": sets[s].label, "fold": split.name}
            user_type = pl.Int64 if data.user_ids.dtype.is_integer() else pl.String
            frame = run_frame(run_exposure.pop((s, r)).values(run_names), labels, user_type)
            run_parts[s, r] = folder.write_partition(frame, part=part)
            states[s, r].append(PartitionState.of(frame, undefined=config.metrics.undefined))
        summaries[s, r] = partition_rows(config, PartitionState.merge(states.pop((s, r))))
        timings.append(_timing(split.name, rec.display, f"summarise {sets[s].label}", start))

    # Writing and reducing a chunk's rows, and summarising a finished (set, recommender), run on the
    # keeper thread, in submission order, while the next chunk is ranked and measured (polars and
    # the Parquet writer release the GIL). A task waits for the one before it to finish, so at most
    # one chunk's rows are held beside the chunk being measured.
    keeper = _keeper()
    kept: list[Future] = []

    waited = [0.0]

    def drain() -> None:
        start = time.perf_counter()
        while kept:
            kept.pop().result()  # raises the keeper's error here
        waited[0] += time.perf_counter() - start

    def in_background(task, *args) -> None:
        drain()
        kept.append(keeper.submit(task, *args))

    try:
        rec_order = sorted(range(len(recs)), key=lambda r: recs[r].display in fitted.background)  # those fitted last
        with progress.step(f"[{split.name}] rank and measure", total=len(starts) * len(recs) * len(sets)) as advance:
            for first in starts:
                stop = min(int(first) + per_range, n_users)
                last = stop == n_users
                start = time.perf_counter()
                chunks = [s.of_users(int(first), stop) for s in sets]
                timings.append(_timing(split.name, "", "build targets", start))
                todo = [s for s in by_train if chunks[s].targets.n_units or (sets[s].users == 0 and first == 0)]
                part, before = list(parts), list(units_before)
                for s in todo:
                    units_before[s] += chunks[s].targets.n_units
                    parts[s] += 1
                for r in rec_order:
                    rec = recs[r]
                    fitted.wait_for(rec.display, split.name, timings)
                    shared: dict[int, Recommender] = {}
                    for s in todo:
                        chunk, key = chunks[s], id(sets[s].train)
                        if key not in shared:
                            shared.clear()  # the previous train's block is done with
                            model = models[rec.display, key]
                            shared[key] = SharedBlock(model, int(first), stop) if SharedBlock.shares(model) else model
                        start = time.perf_counter()
                        rankings = jobs.rank(config, shared[key], chunk)
                        timings.append(_timing(split.name, rec.display, f"rank {chunk.label}", start))
                        start, waited_before = time.perf_counter(), waited[0]
                        frame = jobs.measure_ranking(config, data, rankings, chunk, rec.display, split.name,
                                                     run_level=False)
                        if run_names:  # before the keeper may summarise (s, r), which reads them
                            jobs.add_exposure(config, run_exposure[s, r], rankings, run_names)
                        at = (s, part[s], r)
                        in_background(keep, at, frame, before[s], chunk.label, last)
                        del frame
                        curves[at] = curve_rows(rankings, chunk.targets, system=rec.display, protocol=chunk.label,
                                                fold=split.name)
                        if chunk.targets.all_candidates and not chunk.targets.one_relevant:
                            exposure[at] = jobs.exposure_rows(config, rankings, chunk, rec.display, split.name)
                        if pool_auc and getattr(rankings, "scores", True) is not None:
                            scored[at] = jobs.scored_rows(config, rankings, chunk, rec, split.name, chunks_of[s])
                        del rankings
                        # the step's own time: its wait for the keeper's previous chunk is counted
                        # once, under "wait for writes"
                        timings.append(_timing(split.name, rec.display, f"measure {chunk.label}",
                                               start + waited[0] - waited_before))
                        advance()
                    advance(len(sets) - len(todo))
                    shared.clear()
                    if last:  # the sets without users in the last range
                        for s in sorted(set(range(len(sets))) - set(todo)):
                            in_background(summarise, s, r, parts[s])
        drain()
        timings.append(_timing(split.name, "", "wait for writes", time.perf_counter() - waited[0]))
    finally:  # on an error, the task under way finishes before the error goes up
        wait(kept)
    out = FoldSummary([], [], [])
    for s in range(len(sets)):
        out.partitions += [partitions[key] for key in sorted(partitions) if key[0] == s]
        for r in range(len(recs)):
            if (s, r) in run_parts:
                out.partitions.append(run_parts[s, r])
            rows, sums = summaries.pop((s, r))
            out.rows.append(rows)
            if sums is not None:
                out.f_sums.append(sums)
    for rec in recs:
        rating = jobs.rating_rows(models[rec.display, id(split.train)], split, rec.display, rating_names, data)
        if rating is not None:
            out.partitions.append(folder.write_partition(rating))
            rows, sums = partition_rows(config, PartitionState.of(rating, undefined=config.metrics.undefined))
            out.rows.append(rows)
    for name, tables in (("exposure", exposure), ("auc_scores", scored), ("curve_chunks", curves)):
        if tables:
            atomic.write_parquet(pl.concat([tables[key] for key in sorted(tables)]),
                                 folder.path / name / f"{split.name}.parquet")
    return out


@functools.cache
def _keeper() -> ThreadPoolExecutor:
    """The one thread that writes and reduces per-unit rows beside the main thread, for the whole
    process: a new thread per fold would take a new malloc arena each time, and the process would
    grow by ~150 MB a fold at ML-1M size."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="recsys-keep")


#: Users of the smallest chunk a memory budget must allow.
MIN_CHUNK_USERS = 256
#: Bytes per per-unit row while it is measured, written and reduced (polars frame, its copies).
_ROW_BYTES = 240
#: Bytes per listed target (item, gain, scratch) and per ranked item (item, score, order, ties).
_TARGET_BYTES, _RANKED_BYTES = 16, 24


def range_users(config: ExperimentConfig, sets: list[jobs.TargetSet], n_users: int, block_items: int,
                budget: int) -> int:
    """Users per range of a fold so that the run stays under ``budget`` bytes: what is free of the
    budget now (data and models are resident) divided by a range's cost per user, a planning
    estimate: every target set's units of the user (from its mean units per user, listed targets
    and per-unit rows per unit, weighted by the share of users the set has), and a row of one
    shared score block (``block_items`` float32; 0 when no model shares blocks)."""
    if config.run.users_per_chunk is not None:
        return min(config.run.users_per_chunk, max(n_users, 1))
    values = len(config.metrics.k) * len(config.metrics.names) + 2  # + whole-list metrics, aux
    per_user = 4.0 * block_items
    for target_set in sets:
        ranked = jobs.full_ranking_depth(config) if target_set.listed_per_unit == 0 else target_set.listed_per_unit
        per_unit = values * _ROW_BYTES + target_set.listed_per_unit * _TARGET_BYTES + ranked * _RANKED_BYTES
        per_user += max(target_set.units_per_user, 1.0) * per_unit * target_set.users / max(n_users, 1)
    free = budget - resident_bytes()
    smallest = MIN_CHUNK_USERS * per_user
    if free < smallest:
        raise ConfigError(
            f"memory budget {format_size(budget)} is too small for this fold's {len(sets)} target sets: "
            f"the data and models take {format_size(resident_bytes())} and the smallest range of users "
            f"({MIN_CHUNK_USERS}) about {format_size(smallest)}; set [run] memory (or --memory) "
            f"to at least {format_size(resident_bytes() + smallest)}"
        )
    return int(min(max(n_users, 1), free // per_user))


def reuse_fold(config: ExperimentConfig, folder: ResultsFolder, fold: str) -> FoldSummary:
    """The summary of a fold an earlier attempt completed, read back one partition at a time."""
    out = FoldSummary([], [], folder.fold_partitions(fold))
    states: dict[tuple[str, str], list[PartitionState]] = {}
    for path in out.partitions:
        frame = pl.read_parquet(path)
        key = frame.row(0, named=True)["system"], frame.row(0, named=True)["protocol"]
        states.setdefault(key, []).append(PartitionState.of(frame, undefined=config.metrics.undefined))
    for parts in states.values():
        rows, sums = partition_rows(config, PartitionState.merge(parts))
        out.rows.append(rows)
        if sums is not None:
            out.f_sums.append(sums)
    return out


def combine_folds(config: ExperimentConfig, folds: list[FoldSummary]) -> pl.DataFrame:
    """The fold rows and, with two or more folds, the ``all`` rows (mean of the fold means, pooled F
    over every fold's units) with the t-interval over fold means."""
    from recsys_eval.compare import fold_confidence_intervals
    from recsys_eval.measure.aggregate import with_all_folds

    rows = pl.concat([r for f in folds for r in f.rows], how="diagonal_relaxed")
    f_sums = [s for f in folds for s in f.f_sums]
    summary = with_all_folds(rows, pl.concat(f_sums) if f_sums else None)
    if len(folds) < 2:
        return summary
    # The t-interval over fold means: each fold enters as one value, its mean over users.
    fold_means = summary.filter(pl.col("users_counted").is_not_null() & (pl.col("fold") != "all")
                                & (pl.col("rule") == "user mean")).select(
        "system", "protocol", "fold", pl.lit(0, pl.Int64).alias("user"), "metric", "k",
        pl.col("mean").alias("value"),
    )
    ci = fold_confidence_intervals(fold_means).select(
        *_KEYS, pl.col("lower").alias("_lower"), pl.col("upper").alias("_upper"))
    summary = summary.join(ci, on=_KEYS, how="left", nulls_equal=True, maintain_order="left")
    return summary.with_columns(
        pl.coalesce("lower", "_lower").alias("lower"), pl.coalesce("upper", "_upper").alias("upper"),
    ).drop("_lower", "_upper")


def run_experiment(
    config: ExperimentConfig,
    config_text: str,
    *,
    out_root: str | Path | None = None,
    resume: bool = False,
    quiet: bool = False,
    console: Console | None = None,
) -> RunOutcome:
    """Run an experiment end to end and return its complete results folder.

    ``config_text`` is the config as written (saved verbatim, and hashed to match ``resume``).
    """
    from recsys_eval.experiment.checks import check_names

    if config.datasets is not None:  # a study over several datasets runs this once per dataset
        from recsys_eval.experiment.datasets_study import run_study

        return run_study(config, config_text, out_root=out_root, resume=resume, quiet=quiet, console=console)
    check_names(config)
    console = console or Console()
    cfg_hash = config_hash(config_text)
    folder = ResultsFolder.create(Path(out_root or config.output.folder), config.name, cfg_hash, resume=resume)
    folder.write_text(CONFIG, config_text)
    timings: list[dict] = []
    log: list[str] = []
    with Progress(console, quiet=quiet) as progress:
        start = time.perf_counter()
        data = jobs.load_data(config)
        prepared: list[dict] = []
        if config.prepare.on == "data":
            data, prepared = jobs.prepare_data(config, data)
        timings.append(_timing("", "", "load and prepare", start))
        progress.log(f"data: {data!r}")
        start = time.perf_counter()
        splits, on_train = jobs.prepare_splits(config, jobs.make_splits(config, data))
        prepared += on_train
        timings.append(_timing("", "", "split", start))
        folder.set_layout([s.name for s in splits], [r.display for r in config.recommenders],
                          result_protocols(config))
        folds: list[FoldSummary] = []
        for split in splits:
            if folder.fold_done(split.name):
                progress.log(f"[{split.name}] done in an earlier attempt: reused")
                folds.append(reuse_fold(config, folder, split.name))
                continue
            if config.engine.name == "spark":
                from recsys_eval.engine.fold import evaluate_fold_spark

                fold = evaluate_fold_spark(config, data, split, folder, progress, timings)
            else:
                fold = evaluate_fold(config, data, split, folder, progress, timings)
            if config.output.save_splits:
                from recsys_eval.split import save_split

                start = time.perf_counter()
                save_split(split, folder.path / "splits" / split.name)
                timings.append(_timing(split.name, "", "save split", start))
            folder.mark_fold_done(split.name, fold.partitions)
            folds.append(fold)
            log.append(f"fold {split.name}: {len(fold.partitions)} per-unit partitions")
        if config.learning_curve is not None:
            curve = learning_curve_rows(config, data, splits[0], folder, progress, timings)
            atomic.write_parquet(curve, folder.path / f"{LEARNING_CURVE}.parquet")
        start = time.perf_counter()
        summary = combine_folds(config, folds)
        timings.append(_timing("", "", "summarise", start))
        start = time.perf_counter()
        _write_side_tables(folder)
        folder.write_table(SUMMARY, summary)
        atomic.write_parquet(data_statistics(data, prepared, splits), folder.path / f"{DATA_STATS}.parquet")
        timings.append(_timing("", "", "write results", start))
    atomic.write_csv(pl.DataFrame(timings), folder.path / TIMINGS)
    folder.write_text(LOG, "\n".join(log) + "\n")
    partitions = [str(p.relative_to(folder.path)) for f in folds for p in f.partitions]
    manifest = make_manifest(config, cfg_hash, data, splits, result_protocols(config), partitions)
    folder.write_json(MANIFEST, {"format": FORMAT_VERSION, **manifest})
    if config.output.report:
        from recsys_eval.compare.study import analyse
        from recsys_eval.report import write_report

        analyse(folder.path)
        write_report(folder.path)
    final = folder.finish(manifest)
    return RunOutcome(final, summary)


def result_protocols(config: ExperimentConfig) -> list[str]:
    """Every protocol label the results carry, in config order (bins expanded), ``ratings`` last."""
    labels = [label for p in config.protocols for label in jobs.protocol_labels(p)]
    if jobs.metric_names(config)[1]:
        labels.append(jobs.RATINGS)
    return labels


def _write_side_tables(folder: ResultsFolder) -> None:
    """Exposure per popularity bin, the pooled-AUC table and the ROC and PR curves, from the folds'
    scratch files."""
    from recsys_eval.compare import auc_aggregation
    from recsys_eval.report.curves import combine_curves

    curves = sorted((folder.path / "curve_chunks").glob("*.parquet"))
    if curves:
        folder.write_table(CURVES, combine_curves(pl.concat([pl.read_parquet(f) for f in curves])), csv=False)

    exposure = sorted((folder.path / "exposure").glob("*.parquet"))
    if exposure:
        atomic.write_parquet(jobs.exposure_shares(pl.concat([pl.read_parquet(f) for f in exposure])),
                             folder.path / f"{EXPOSURE}.parquet")
    scored = sorted((folder.path / "auc_scores").glob("*.parquet"))
    if len(scored) >= 2:
        # one (system, protocol) at a time: the folds' pooled scores are never all in memory
        lazy = pl.scan_parquet(scored).select("system", "protocol", "fold", "score", "label", "weight")
        keys = sorted(lazy.select("system", "protocol").unique().collect().iter_rows())
        atomic.write_parquet(
            pl.concat([auc_aggregation(lazy.filter((pl.col("system") == system) & (pl.col("protocol") == protocol))
                                       .collect()) for system, protocol in keys]),
            folder.path / f"{AUC_POOLING}.parquet",
        )


def _timing(fold: str, system: str, step: str, start: float) -> dict:
    """A timings row: the step's wall time, and the process's peak memory since the previous row
    (so each step's own peak), then a new peak measurement starts."""
    peak = peak_bytes()
    reset_peak()
    return {"fold": fold, "system": system, "step": step, "seconds": time.perf_counter() - start,
            "peak_rss_mb": round(peak / 1e6)}


def learning_curve_rows(
    config: ExperimentConfig, data: Interactions, split: Split, folder: ResultsFolder,
    progress: Progress, timings: list[dict],
) -> pl.DataFrame:
    """Per-unit values of every system at each training fraction of the first fold (test and
    targets fixed: the fold's own), with a ``fraction`` column."""
    from recsys_eval.split import learning_curve

    lc = config.learning_curve
    wanted = set(lc.protocols or [p.display for p in config.protocols if p.design == "standard"])
    protocols = [p for p in config.protocols if p.display in wanted]
    subsamples = learning_curve(
        split, lc.fractions, per_user=lc.per_user, seed=derive_seed(config.seed, "learning_curve")
    )
    targets = [t for p in protocols for t in jobs.build_protocol_targets(config, p, split)]
    frames = []
    for fraction, sub in zip(lc.fractions, subsamples, strict=True):
        for rec in config.recommenders:
            start = time.perf_counter()
            model = jobs.make_model(config, rec, data, split.name).fit(sub.train)
            for target in targets:  # the fold's targets: the same candidates at every fraction
                rankings = jobs.rank(config, model, target)
                frames.append(jobs.measure_ranking(config, data, rankings, target, rec.display, split.name)
                              .with_columns(pl.lit(fraction).alias("fraction")))
            timings.append(_timing(f"{split.name}@{fraction:g}", rec.display, "learning curve", start))
    return pl.concat(frames, how="vertical_relaxed")
