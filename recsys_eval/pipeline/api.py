"""``recsys_eval.evaluate``: a run and its judgments (pandas or polars DataFrames, or files) in, a
summary with intervals out, in one call: the route of ``recsys-eval evaluate`` (the same reading,
checks, metrics and summary rows, :mod:`recsys_eval.pipeline.evaluate`) without a results folder.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import polars as pl

from recsys_eval.core.columns import polars_frame
from recsys_eval.data.runs import Source, averaging_default, format_of, load_run, read_frame
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.measure.aggregate import PartitionState
from recsys_eval.measure.frames import concat_per_unit
from recsys_eval.measure.metrics import ALL_METRICS, check_cutoffs, check_metrics
from recsys_eval.pipeline.evaluate import measure_run, summary_of
from recsys_eval.pipeline.options import MeasureOptions

#: The metrics of ``evaluate`` (and ``recsys-eval evaluate``) when none are named.
DEFAULT_METRICS = ("precision", "recall", "f1", "ap", "ndcg", "rr", "hit", "auc")
#: The columns of the summary ``evaluate`` returns, in order.
SUMMARY_COLUMNS = ("system", "metric", "k", "name", "mean", "lower", "upper", "users_counted", "users_left_out",
                   "micro_mean", "rule", "undefined")
#: The column of a run frame that holds several systems' lists.
SYSTEM = "system"


def evaluate(
    run: Source,
    test: Source,
    *,
    train: Source | None = None,
    metrics: str | Iterable[str] = DEFAULT_METRICS,
    k: int | Iterable[int] = (1, 5, 10),
    columns: Mapping[str, str] | None = None,
    system: str | None = None,
    threshold: float | None = None,
    gain: str = "graded",
    ties: str = "first",
    undefined: str | None = None,
    per_unit: bool = False,
    run_format: str | None = None,
    test_format: str | None = None,
    **params: float,
):
    """Score a run against its judgments: per system, the mean of every metric over users with
    its 95% t-interval (docs/CONVENTIONS.md#averaging).

    Args:
        run: the ranked lists, ``user, item`` and ``score`` (higher is better) or ``rank`` (1 is
            best): a pandas or polars DataFrame, or a file (CSV, Parquet, TREC, ranx JSON, ...;
            :mod:`recsys_eval.data.runs`). A ``system`` column holds several systems' lists: each
            system is scored on its own, one block of summary rows each.
        test: the judgments, ``user, item`` and an optional ``rating`` (relevant: rating >=
            ``threshold``; every row without one; grade >= 1 for TREC qrels and ranx JSON).
        train: ``user, item`` of the training data: its items leave each user's AUC candidates
            and it feeds novelty.
        metrics, k: metric names (``recsys-eval list metrics``; rating metrics such as ``rmse``
            read the run's scores as predictions) and cutoffs.
        columns: your column names for ours, ``{"user": "user_id", "item": "movie_id", "score":
            "prediction", "rating": "stars", "system": "model"}``, for every DataFrame given (and
            CSV/TSV/Parquet files).
        system: the label of a run without a ``system`` column (default ``"system"``).
        threshold, gain, ties: as in :func:`recsys_eval.measure.measure`.
        undefined: ``skip`` or ``zero`` for units whose value is undefined (no relevant item):
            by default ``zero`` for TREC and ranx judgments (trec_eval's averaging, every judged
            user counted), else ``skip`` (docs/CONVENTIONS.md#undefined-values). The summary's
            ``undefined`` and ``rule`` columns name the averaging used.
        per_unit: also return the per-unit values (``system, protocol, fold, user, unit, metric,
            k, value``).
        run_format, test_format: the files' formats when the extension does not say.
        params: metric parameters by name (``rbp_persistence``).

    Returns:
        The summary, one row per (system, metric, k): :data:`SUMMARY_COLUMNS` (``lower``/``upper``
        the 95% t-interval of the mean over users); a pandas DataFrame when ``run`` is one, else
        polars. With ``per_unit``, the pair (summary, per-unit values).

    A metric that reads deeper than the run's lists (AUC, or a cutoff beyond them) gets a warning
    (from :func:`recsys_eval.measure.measure`); so do the notes of reading the files (RUN users not
    in TEST, TEST users without a list) and a TREC or ranx TEST's averaging.
    """
    names = check_metrics(metrics, ALL_METRICS)
    default, averaging_note = averaging_default(test, test_format)
    if undefined is None and averaging_note:
        warnings.warn(averaging_note, UserWarning, stacklevel=2)
    options = MeasureOptions.of(names, check_cutoffs(k), gain=gain, ties=ties, threshold=threshold, params=params,
                                undefined=default if undefined is None else undefined)
    systems = _systems(_renamed(run, columns, run_format, "RUN", "run"), system)
    test, train = _renamed(test, columns, test_format, "TEST"), _renamed(train, columns, test_format, "TRAIN")
    summaries, frames = [], []
    for label, rows in systems:
        data = load_run(test, rows, train, threshold=threshold, run_format=run_format, test_format=test_format)
        for note in data.notes:
            warnings.warn(f"{label}: {note}", UserWarning, stacklevel=2)
        values = measure_run(data, options, label)  # warns of the metrics the run's depth truncates
        summaries.append(summary_of(PartitionState.of(values, undefined=options.undefined), options.undefined))
        frames.append(values)
    summary = pl.concat(summaries).select(SUMMARY_COLUMNS)
    values = concat_per_unit(frames)
    if _is_pandas(run):
        summary, values = summary.to_pandas(), values.to_pandas()
    return (summary, values) if per_unit else summary


def _is_pandas(value: Any) -> bool:
    return type(value).__module__.split(".")[0] == "pandas"


def _renamed(source: Source | None, columns: Mapping[str, str] | None, fmt: str | None, what: str,
             kind: str = "judgments") -> Source | None:
    """``source`` with ``columns`` (ours -> yours) renamed to ours: a DataFrame, or a CSV, TSV or
    Parquet file read as one; other files (TREC, ranx, Elliot) have their fixed layouts."""
    if source is None or not columns:
        return source
    if isinstance(source, str | bytes) or hasattr(source, "__fspath__"):
        if format_of(source, fmt, kind) not in ("csv", "tsv", "parquet"):
            return source
        frame = read_frame(source, format=fmt, name=f"{what} {source}")
    else:
        frame = polars_frame(source, f"{what} DataFrame")
    mapping = {theirs: ours for ours, theirs in columns.items() if theirs in frame.columns and theirs != ours}
    return frame.rename(mapping)


def _systems(run: Source, system: str | None) -> list[tuple[str, Source]]:
    """The (label, run) of every system: a DataFrame's ``system`` column splits it, in order of
    first appearance; otherwise the one run, labelled ``system``."""
    frame = None
    if not (isinstance(run, str | bytes) or hasattr(run, "__fspath__")):
        frame = polars_frame(run, "RUN DataFrame")
    if frame is None or SYSTEM not in frame.columns:
        return [(system or "system", frame if frame is not None else run)]
    if system is not None:
        raise ConfigError(f"system={system!r} labels a run of one system, but RUN has a 'system' column; "
                          "leave system out (each system of the column is scored), or drop the column")
    if frame.get_column(SYSTEM).null_count():
        raise DataError("RUN DataFrame: column 'system' has empty values; expected a system label on every row")
    labels = frame.get_column(SYSTEM).cast(pl.String)
    return [(str(part.get_column(SYSTEM)[0]), part.drop(SYSTEM))
            for part in frame.with_columns(labels).partition_by(SYSTEM, maintain_order=True)]
