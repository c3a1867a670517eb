"""Learning curves: every system again at nested fractions of the first fold's train side, the
test side and the targets fixed (the fold's own), so that only the training data changes."""

from __future__ import annotations

import time

import polars as pl

from recsys_eval.pipeline.config import LearningCurveConfig
from recsys_eval.pipeline.jobs import measure_ranking, rank
from recsys_eval.core import Interactions, Split
from recsys_eval.pipeline.plan import RunOptions
from recsys_eval.pipeline.timings import Timings
from recsys_eval.recommend.fold_in import fit_for_split


def learning_curve_rows(options: RunOptions, data: Interactions, split: Split, curve: LearningCurveConfig,
                        timings: Timings) -> pl.DataFrame:
    """Per-unit values of every system (as configured) at each training fraction of ``split``,
    with a ``fraction`` column; on the standard protocols, or those ``curve.protocols`` names."""
    from recsys_eval.split import learning_curve

    wanted = set(curve.protocols or [p.display for p in options.protocols if p.design == "standard"])
    targets = [s.whole() for p in options.protocols if p.display in wanted for s in options.target_sets(p, split)]
    subsamples = learning_curve(split, curve.fractions, per_user=curve.per_user, seed=options.seeds.learning_curve())
    ranking, frames = options.rank_for(split), []
    for fraction, sub in zip(curve.fractions, subsamples, strict=True):
        for job in options.model_jobs(split.name):
            start = time.perf_counter()
            model = fit_for_split(job.make(data, options.threads), sub.train, split)
            for target in targets:  # the fold's targets: the same candidates at every fraction
                rankings = rank(ranking, model, target)
                frame = measure_ranking(options.measure, data, rankings, target, job.system, split.name)
                frames.append(frame.with_columns(pl.lit(fraction).alias("fraction")))
            timings.add(f"{split.name}@{fraction:g}", job.system, "learning curve", start)
    return pl.concat(frames, how="vertical_relaxed")

