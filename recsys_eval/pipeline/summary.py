"""Summaries of a run, a partition at a time: each (fold, system, protocol) partition reduced to its
fold rows (means with intervals, pooled counts) as soon as it is measured, a fold's rows kept in a
:class:`FoldSummary`, and the folds combined into the summary (``all`` rows: the mean of the fold
means, pooled F over every fold's units, the t-interval over fold means;
recsys_eval.measure.aggregate, docs/CONVENTIONS.md#averaging)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from recsys_eval.core.results import labels_of, read_per_unit
from recsys_eval.measure.aggregate import PartitionState, SummaryState

_KEYS = ["system", "protocol", "fold", "metric", "k"]


@dataclass(frozen=True)
class Summarising:
    """How a partition is summarised: the undefined-value policy, and its intervals over users,
    ``t`` or a ``bootstrap`` of ``resamples`` seeded per (fold, protocol label) by ``seed_of``
    (``RunOptions.interval_seed``). ``evaluate`` summarises with t-intervals and no run options."""

    undefined: str = "skip"
    interval: str = "t"
    resamples: int = 0
    seed_of: Callable[[str, str], int] | None = None


@dataclass
class FoldSummary:
    """What a fold leaves in memory: its summary rows and pooled F counts (small), and its files."""

    rows: list[pl.DataFrame] = field(default_factory=list)
    f_sums: list[pl.DataFrame] = field(default_factory=list)
    partitions: list[Path] = field(default_factory=list)
    #: How many of its (system, protocol) partitions an earlier attempt of the run completed.
    reused: int = 0
    #: How many chunks of users of its other partitions an earlier attempt completed.
    reused_chunks: int = 0

    def add(self, summarised: tuple[pl.DataFrame, pl.DataFrame | None]) -> None:
        """One partition's rows and F counts (:func:`partition_rows`)."""
        rows, sums = summarised
        self.rows.append(rows)
        if sums is not None:
            self.f_sums.append(sums)


def partition_rows(options: Summarising, state: PartitionState | SummaryState,
                   intervals: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """One partition's fold rows (mean over users with its interval, micro mean, users counted and
    left out, the rule) and its summed F-measure counts when ``f1`` is measured. A t-interval needs
    the users' sums alone (a :class:`SummaryState`, as a Spark job merges them); a bootstrap needs
    each user's value (a :class:`PartitionState`), unless its ``intervals`` (rows per system,
    protocol, fold, metric and k with ``lower`` and ``upper``) were computed elsewhere (a Spark job:
    :func:`recsys_eval.engine.stats.bootstrap_intervals`)."""
    from recsys_eval.compare import confidence_intervals
    from recsys_eval.compare.intervals import with_t_bounds

    sums = state if isinstance(state, SummaryState) else state.reduced()
    rows = sums.summary(options.undefined)
    if sums.groups and options.interval == "t":
        ci = with_t_bounds(sums.moments())
    elif sums.groups and intervals is not None:
        ci = intervals
    elif sums.groups:
        users = state.user_values()
        first = users.row(0, named=True)
        ci = confidence_intervals(
            users.select("system", "protocol", "fold", "user", "metric", "k", "value"),
            method=options.interval, n_resamples=options.resamples,
            seed=options.seed_of(first["fold"], first["protocol"]),
        )
    if sums.groups:
        rows = rows.join(ci.select(*_KEYS, "lower", "upper"), on=_KEYS, how="left", nulls_equal=True, maintain_order="left")
    return rows, sums.f_totals() if sums.f_sums else None


def summarise_frames(options: Summarising, frames: list[pl.DataFrame]) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The rows of one (fold, system, protocol) from its per-unit frames (its chunks)."""
    states = [PartitionState.of(f, undefined=options.undefined) for f in frames]
    return partition_rows(options, PartitionState.merge(states))


def reuse_fold(options: Summarising, partitions: list[Path]) -> FoldSummary:
    """The summary of a fold an earlier attempt completed, read back one partition at a time."""
    files: dict[tuple[str, str], list[Path]] = {}
    for path in partitions:
        labels = labels_of(path)
        files.setdefault((labels["system"], labels["protocol"]), []).append(path)
    out = FoldSummary(partitions=partitions, reused=len(files))
    for listed in files.values():
        out.add(reuse_partition(options, listed))
    return out


def reuse_partition(options: Summarising, files: list[Path]) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The rows of one (fold, system, protocol) an earlier attempt completed, from its per-unit
    files (its chunks, then its run-level rows) read back one at a time: a file read back reduces
    to the state of the frame written, so these are the rows its attempt summarised."""
    states = [PartitionState.of(read_per_unit([path]).collect(), undefined=options.undefined) for path in files]
    return partition_rows(options, PartitionState.merge(states))


def combine_folds(folds: list[FoldSummary]) -> pl.DataFrame:
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
