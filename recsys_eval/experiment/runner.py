"""The experiment runner: a config in, a complete results folder out.

The loop: load, prepare and split the data; for each fold, tune (when asked), plan, execute (this
process, or Spark) and mark the fold done; combine the folds into the summary; analyse; report.
What a fold is and how it runs lives in :mod:`recsys_eval.pipeline`; every file is written by its
:class:`~recsys_eval.pipeline.sink.RunSink`. A fold is marked complete only after its partitions and
its split are written, so ``--resume`` reuses it whole; in a fold not complete, it reuses each
(system, protocol) partition marked done, and each chunk of users of the others, and redoes the rest.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from rich.console import Console

from recsys_eval.core import Interactions, Split
from recsys_eval.core.memory import release_freed_memory
from recsys_eval.pipeline.config import ExperimentConfig
from recsys_eval.pipeline.inputs import load_data, make_splits, prepare_data, prepare_splits
from recsys_eval.pipeline.manifest import data_statistics, make_manifest
from recsys_eval.pipeline.plan import FoldPlan, RunOptions
from recsys_eval.pipeline.progress import Progress
from recsys_eval.pipeline.sink import RunSink
from recsys_eval.pipeline.summary import FoldSummary, combine_folds, reuse_fold
from recsys_eval.pipeline.timings import Timings


@dataclass
class RunOutcome:
    #: The results folder: a path, or a URI (a run's folder at ``hdfs://``, ``s3a://``, ``file://``).
    folder: Path | str
    summary: pl.DataFrame
    #: A study over several datasets: each dataset's results folder, by name (``folder`` is then
    #: the cross-dataset one).
    datasets: dict[str, Path] | None = None


def run_experiment(
    config: ExperimentConfig,
    config_text: str,
    overrides: Sequence[str] = (),
    *,
    out_root: str | Path | None = None,
    resume: bool = False,
    quiet: bool = False,
    console: Console | None = None,
) -> RunOutcome:
    """Run an experiment end to end and return its complete results folder.

    ``config_text`` is the config file as written and ``overrides`` the command-line options that
    changed it (``--set key=value``, ...), both saved beside the resolved config, which the run
    writes as its ``config.toml`` and hashes to match ``resume`` (:meth:`RunSink.create`).
    """
    from recsys_eval.core.uris import is_uri
    from recsys_eval.engine.remote import check_remote_run
    from recsys_eval.experiment.checks import check_names

    root = str(out_root or config.output.folder)
    if is_uri(root):  # a results folder at a URI: what cannot write there is refused before anything runs
        check_remote_run(config, root, resume=resume)
    if config.datasets is not None:  # a study over several datasets runs this once per dataset
        from recsys_eval.experiment.datasets_study import run_study

        return run_study(config, config_text, overrides, out_root=out_root, resume=resume, quiet=quiet, console=console)
    check_names(config)
    options = RunOptions.from_config(config)
    sink = _sink(root, config, config_text, overrides, resume=resume)
    log: list[str] = []
    started = time.perf_counter()
    with Timings() as timings, sink.discarded_unless_resumable():
        with Progress(console or Console(), quiet=quiet) as progress:
            data, splits, prepared, written = load_and_split(config, progress, timings, sink)
            if config.analysis.slices:
                start = time.perf_counter()
                sink.write_user_slices(splits, config.analysis.slices, config.analysis.user_attributes,
                                       config.metrics.relevance_threshold)
                timings.add("", "", "user slices", start)
            sink.set_layout([s.name for s in splits], options.systems, options.labels)
            folds = []
            for split in splits:
                folds.append(run_fold(config, options, data, split, len(splits), sink, progress, timings,
                                      written.get(split.name)))
                log.append(f"fold {split.name}: {len(folds[-1].partitions)} per-unit partitions{reuse_note(folds[-1])}")
            if config.learning_curve is not None:
                from recsys_eval.pipeline.curve import learning_curve_rows

                with progress.step("learning curve"):
                    sink.write_learning_curve(learning_curve_rows(options, data, splits[0], config.learning_curve,
                                                                  timings))
            with progress.step("summarise and write results"):
                start = time.perf_counter()
                summary = combine_folds(folds)
                timings.add("", "", "summarise", start)
                start = time.perf_counter()
                sink.write_side_tables()
                sink.write_summary(summary)
                sink.write_data_stats(data_statistics(data, prepared, splits))
                sink.write_leakage(splits, _leakage_audit(written))
                if config.tuning is not None:
                    from recsys_eval.tune.budget import tuning_budget

                    trials = pl.read_parquet(sink.tuning_log) if sink.tuning_log.is_file() else None
                    sink.write_tuning_budget(tuning_budget(config, splits, trials))
                timings.add("", "", "write results", start)
            if written and sink.remote is not None:  # the split Spark wrote into the folder at the URI
                _split_scratch(sink).remove(config.engine.master)
            manifest = make_manifest(config, sink.config_hash, data, splits,
                                     sink.relative([p for f in folds for p in f.partitions]))
            sink.write_manifest(manifest)  # the analysis and the report read it
            if config.output.report:
                del data, splits, prepared, folds  # the analysis reads the results folder alone
                release_freed_memory()
                with progress.step("analyse (tests, agreement, audits)"):
                    start = time.perf_counter()
                    sink.analyse(_paired_runner(config))
                    timings.add("", "", "analyse", start)
                with progress.step("report (tables, figures, report.html)"):
                    start = time.perf_counter()
                    sink.report()
                    timings.add("", "", "report", start)
        peak_mb = timings.add_whole_run(started)
        sink.write_timings(timings.rows)
        sink.write_log(log)
        outcome = RunOutcome(sink.finish(manifest.replace(peak_rss_mb=peak_mb)), summary)
    if config.track.mlflow is not None:  # the folder is complete: a tracker's failure loses nothing
        from recsys_eval.pipeline.track import track_mlflow

        track_mlflow(config.track.mlflow, outcome.folder, experiment=config.track.experiment)
    return outcome


def _sink(root: str, config: ExperimentConfig, config_text: str, overrides: Sequence[str], *, resume: bool
          ) -> RunSink:
    """The run's sink: a results folder under the local folder ``root``, or at the URI ``root``
    (``hdfs://``, ``s3a://``, ``file://``: :mod:`recsys_eval.engine.remote`)."""
    from recsys_eval.core.uris import is_uri
    from recsys_eval.engine.remote import remote_sink

    if is_uri(root):
        return remote_sink(root, config, config_text, overrides)
    return RunSink.create(root, config, config_text, overrides, resume=resume)


def _paired_runner(config: ExperimentConfig):
    """Where the analysis's paired tests run: a Spark job when the folds ran on Spark
    (recsys_eval.engine.paired), else the analysis's own process (None)."""
    if config.engine.name != "spark":
        return None
    from recsys_eval.engine.paired import SparkPairedTests

    return SparkPairedTests.of(config.engine.model_dump())


def _leakage_audit(written: dict[str, str]):
    """What makes the leakage audit: Spark jobs over the written folds when Spark split the data
    (recsys_eval.engine.leakage: the driver reads no row), else the split stage's (None)."""
    if not written:
        return None
    from recsys_eval.engine.leakage import leakage_audit_on_spark

    return leakage_audit_on_spark


def _largest_relevant(written: str | None):
    """What counts a fold's largest relevant count (R-precision's rank depth): a Spark job when
    Spark wrote the fold (the driver reads no row), else the plan's own (None)."""
    if written is None:
        return None
    from recsys_eval.engine.inputs import WrittenSplit

    return WrittenSplit.largest_relevant


def _split_rows(written: str | None):
    """What writes a saved split's row files: Spark jobs streamed into them when Spark wrote the
    fold (recsys_eval.engine.inputs.write_rows: the driver reads no row), else the split stage's
    (None)."""
    if written is None:
        return None
    from recsys_eval.engine.inputs import write_rows

    return write_rows


def reuse_note(fold: FoldSummary) -> str:
    """What a fold reused from an earlier attempt, for the log: ``, 2 (system, protocol) reused
    from an earlier attempt, 3 chunks of users reused from an earlier attempt``."""
    counts = ((fold.reused, "(system, protocol)"),
              (fold.reused_chunks, "chunk of users" if fold.reused_chunks == 1 else "chunks of users"))
    return "".join(f", {n} {what} reused from an earlier attempt" for n, what in counts if n)


def load_and_split(config: ExperimentConfig, progress: Progress, timings: Timings, sink: RunSink | None = None
                   ) -> tuple[Interactions, list[Split], list[dict], dict[str, str]]:
    """The dataset, prepared, and its folds; with what each preparation step removed, and where
    Spark wrote each fold's split (by fold name). On the Spark engine, with the run's ``sink``,
    Spark reads, prepares and splits the data when it can (:mod:`recsys_eval.engine.inputs`:
    per-user splits of a CSV or Parquet file) into the results folder's scratch, and the driver's
    stand-ins are made from the written split."""
    if sink is not None and config.engine.name == "spark":
        from recsys_eval.engine.inputs import local_only, spark_inputs

        if not local_only(config):
            with progress.step("read, prepare and split on Spark"):
                start = time.perf_counter()
                made = spark_inputs(config, RunOptions.from_config(config).seeds.split(), _split_scratch(sink))
                timings.add("", "", "split", start)
            progress.log(f"data: {made.data!r}", markup=False)
            return made.data, made.splits, made.prepared, made.written
    with progress.step("load and prepare"):
        start = time.perf_counter()
        data = load_data(config.dataset)
        prepared: list[dict] = []
        if config.prepare.on == "data":
            data, prepared = prepare_data(config.prepare, data)
        timings.add("", "", "load and prepare", start)
    progress.log(f"data: {data!r}", markup=False)
    with progress.step("split"):
        start = time.perf_counter()
        splits, on_train = prepare_splits(config.prepare, config_splits(config, data))
        timings.add("", "", "split", start)
    return data, splits, prepared + on_train, {}


def _split_scratch(sink: RunSink):
    """Where Spark writes the run's split: the results folder's scratch (``spark_splits/``) at
    its URI, qualified (:class:`recsys_eval.engine.inputs.SplitScratch`)."""
    from recsys_eval.core.results import SPARK_SPLITS
    from recsys_eval.engine.inputs import SplitScratch

    remote = None if sink.remote is None else sink.remote.folder.child(SPARK_SPLITS)
    return SplitScratch.of(sink.folder.spark_splits(), remote)


def config_splits(config: ExperimentConfig, data: Interactions) -> list[Split]:
    """The folds of the config's splitter on ``data``, seeded by the run's split seed."""
    seed = RunOptions.from_config(config).seeds.split()
    return make_splits(config.split, data, seed=seed, data_home=config.dataset.data_home)


def run_fold(config: ExperimentConfig, options: RunOptions, data: Interactions, split: Split, n_folds: int,
             sink: RunSink, progress: Progress, timings: Timings, written: str | None = None) -> FoldSummary:
    """One fold: reused when an earlier attempt completed it; else tuned, planned, executed on the
    configured engine (the local one reusing the partitions and chunks an earlier attempt finished;
    Spark redoing the fold whole, its rows read from the split Spark ``written`` when there is
    one), its split saved, and marked done."""
    from recsys_eval.tune import tune_fold

    done = sink.completed(split.name)
    if done is not None:
        progress.log(f"[{split.name}] done in an earlier attempt: reused", markup=False)
        return reuse_fold(options.summarising, done)
    spark = config.engine.name == "spark"
    # the Spark engine redoes a fold whole: what a local attempt left of it would only be stray files
    earlier = sink.unfinished_fold(split.name, reuse=not spark)
    if earlier.partitions or earlier.chunks:
        progress.log(f"[{split.name}] {len(earlier.partitions)} (system, protocol) partitions and {earlier.n_chunks} "
                     "chunks of users of the others done in an earlier attempt: reused", markup=False)
    start = time.perf_counter()
    tuned = tune_fold(config, data, split, sink.tuning_log, progress)
    if tuned:
        timings.add(split.name, "", "tune", start)
    plan = FoldPlan.build(options, data, split, n_folds=n_folds, tuned=tuned, progress=progress, timings=timings,
                          targets=not spark, largest_relevant=_largest_relevant(written))
    if spark:
        from recsys_eval.engine.fold import SparkFold

        fold = SparkFold(plan, config.engine, sink, progress, timings, written).run()
    else:
        from recsys_eval.pipeline.local import LocalFold

        fold = LocalFold(plan, sink, progress, timings, earlier).run()
    if config.output.save_splits:
        start = time.perf_counter()
        sink.save_split(split, _split_rows(written))
        timings.add(split.name, "", "save split", start)
    if config.run.save_negatives:
        from recsys_eval.pipeline.negatives import save_fold_negatives

        start = time.perf_counter()
        save_fold_negatives(options, split, sink)
        timings.add(split.name, "", "save negatives", start)
    sink.mark_fold_done(split.name, fold.partitions)
    return fold
