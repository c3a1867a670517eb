"""The objective of a trial: fit with the trial's hyperparameters on the validation split's train
side, build the tuning protocol's targets on the validation split, rank, measure the tuning metric,
and take its mean over users (recsys_eval.measure.aggregate.fold_summary), the value a run reports.

Trials run in this process, or in worker processes that each hold the data and the validation
split once (:class:`Objective` is the state; :func:`run_trial` the work), so that a trial sends
only its hyperparameters. With several workers, implicit models fit on one thread each.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from typing import Any

import polars as pl

from recsys_eval.core import Interactions, Split
from recsys_eval.pipeline.config import ExperimentConfig, RecommenderConfig
from recsys_eval.pipeline.options import RankOptions
from recsys_eval.pipeline.plan import RunOptions
from recsys_eval.measure.metrics import MetricKey
from recsys_eval.pipeline.search import tuning_protocol
from recsys_eval.recommend.fold_in import fit_for_split


class Objective:
    """The validation value of hyperparameters, for one fold's validation split."""

    def __init__(self, config: ExperimentConfig, data: Interactions, validation: Split, *, threads: int | None) -> None:
        key = MetricKey.parse(config.tuning.metric, where="tuning.metric")
        name, k = key.name, key.k
        options = RunOptions.from_config(config)
        measure = options.measure.only(name, k)
        self.options = replace(options, measure=measure, rank=RankOptions.for_measure(measure, config.run),
                               threads=threads)
        self.rank = self.options.rank_for(validation)
        self.metric, self.k = name, k
        self.data, self.validation = data, validation
        self.sets = self.options.target_sets(tuning_protocol(config), validation)

    def __call__(self, rec: RecommenderConfig, params: dict[str, Any]) -> tuple[float, float, float]:
        """(validation value, fit seconds, evaluation seconds) of ``rec`` with ``params``."""
        from recsys_eval.measure.aggregate import fold_summary
        from recsys_eval.pipeline import jobs

        trial_rec = rec.model_copy(update={"params": {**rec.params, **params}})
        start = time.perf_counter()
        job = self.options.model_job(self.validation.name, rec, trial_rec)
        model = fit_for_split(job.make(self.data, self.options.threads), self.validation.train, self.validation)
        fitted = time.perf_counter()
        frames = []
        for target_set in self.sets:  # a standard protocol or a uniform test: one target set
            chunk = target_set.whole()
            rankings = jobs.rank(self.rank, model, chunk)
            frame = jobs.measure_ranking(self.options.measure, self.data, rankings, chunk, rec.display,
                                         self.validation.name)
            frames.append(frame.filter(pl.col("metric") == self.metric))
        summary = fold_summary(pl.concat(frames), undefined=self.options.measure.undefined)
        row = summary.filter((pl.col("metric") == self.metric)
                             & (pl.col("k").is_null() if self.k is None else pl.col("k") == self.k))
        value = row.get_column("mean")[0] if row.height else float("nan")
        return float(value) if value is not None else float("nan"), fitted - start, time.perf_counter() - fitted


_WORKER: Objective | None = None


def _start_worker(config: ExperimentConfig, data: Interactions, validation: Split) -> None:
    global _WORKER
    _WORKER = Objective(config, data, validation, threads=1)


def run_trial(rec: RecommenderConfig, params: dict[str, Any]) -> tuple[float, float, float]:
    """A trial in a worker process started by :class:`Trials`."""
    assert _WORKER is not None, "run_trial runs in a worker started by Trials"
    return _WORKER(rec, params)


class Trials:
    """Runs batches of trials: in this process (``workers = 1``), or on a pool of ``workers``
    spawned processes, each holding the data and the validation split. Results come back in the
    order of the batch, whatever order they finish in."""

    def __init__(self, config: ExperimentConfig, data: Interactions, validation: Split) -> None:
        self.workers = config.tuning.workers
        self.local = Objective(config, data, validation, threads=config.run.threads) if self.workers == 1 else None
        self.pool = None if self.workers == 1 else ProcessPoolExecutor(
            self.workers, mp_context=get_context("spawn"), initializer=_start_worker,
            initargs=(config, data, validation),
        )

    def run(self, rec: RecommenderConfig, batch: list[dict[str, Any]]) -> list[tuple[float, float, float]]:
        if self.pool is None:
            return [self.local(rec, params) for params in batch]
        return list(self.pool.map(run_trial, [rec] * len(batch), batch))

    def __enter__(self) -> Trials:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
