"""Rating prediction: error (MAE, RMSE) and rank agreement (Kendall tau-b, Spearman, NDPM).

Per user, over the items the user rated in test: MAE_u = mean |p - r|, RMSE_u = sqrt(mean (p - r)^2),
Kendall's tau-b and Spearman's rho (Pearson correlation of average ranks) between the predicted and
the true ratings, and NDPM (Yao 1995) = (2 C- + Cu) / (2 C), over the C item pairs the user rated
differently: C- pairs the prediction orders the other way, Cu pairs it ties. A correlation is NaN
(undefined) when either side is constant or the user has fewer than two ratings; NDPM is NaN when
the user rated every item alike.

The per-user rows give the user-averaged means; one run-level row (null user) per error metric holds
the micro value over all test ratings, which :func:`~recsys_eval.measure.aggregate.summarize`
reports as the micro mean: sum |e| / n and sqrt(sum e^2 / n) from exact sums rounded once
(:class:`ErrorSums`), so that the sums of disjoint users' ratings (a Spark job's partitions) merge
into the same bits as the whole.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import polars as pl
from numba import njit

from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.columns import polars_frame
from recsys_eval.core.results import PER_UNIT_COLUMNS
from recsys_eval.core.sorting import stable_argsort
from recsys_eval.errors import DataError
from recsys_eval.measure.frames import concat_per_unit, long_frame
from recsys_eval.measure.metrics import RATING_METRICS, RATINGS, check_metrics

_COLUMNS = ("user", "item", "rating", "prediction")


def rating_metrics(
    predictions: pl.DataFrame,
    *,
    metrics: str | Iterable[str] = RATING_METRICS,
    system: str = "system",
    protocol: str = RATINGS,
    fold: str = "0",
) -> pl.DataFrame:
    """Per-user rating-prediction metrics in the per-unit schema (unit = user, numbered in sorted
    user order); ``predictions`` has columns ``user, item, rating, prediction``."""
    names = check_metrics(metrics, RATING_METRICS)
    frame = _check_predictions(predictions)
    frame = frame.sort("user", "item")
    users = frame.get_column("user").unique(maintain_order=True)
    sizes = frame.group_by("user", maintain_order=True).len().get_column("len").to_numpy()
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    truth = frame.get_column("rating").to_numpy().astype(np.float64)
    pred = frame.get_column("prediction").to_numpy().astype(np.float64)
    values = np.full((len(sizes), 5), np.nan)
    run_chunks(_per_user_chunk, chunk_bounds(len(sizes)), offsets, truth, pred, values)
    order = [RATING_METRICS.index(m) for m in names]
    labels = {"system": system, "protocol": protocol, "fold": str(fold)}
    unit_user = np.arange(len(sizes), dtype=np.int64)
    rows = long_frame(values[:, order], names, [None] * len(names), unit_user, users, labels)
    run_rows = ErrorSums.of(pred - truth).rows(names, labels, rows.schema)
    return concat_per_unit([rows, run_rows]).select(PER_UNIT_COLUMNS)


@dataclass(frozen=True)
class ErrorSums:
    """What the micro MAE and RMSE of a set of test ratings are made of: the ratings' count ``n`` and
    the exact sums (:mod:`recsys_eval.core.exact`) of |e| (units of 2^-1074) and of e^2 (units of
    2^-2148), e = prediction - rating. Disjoint sets merge by adding integers, in any order."""

    n: int
    absolute: int
    squared: int

    @classmethod
    def of(cls, errors: np.ndarray) -> ErrorSums:
        from recsys_eval.core.exact import group_sums

        (absolute,), (squared,) = group_sums(np.abs(errors), np.zeros(1, dtype=np.int64), squares=True)
        return cls(len(errors), absolute, squared)

    @classmethod
    def merge(cls, parts: Iterable[ErrorSums]) -> ErrorSums:
        parts = list(parts)
        return cls(sum(p.n for p in parts), sum(p.absolute for p in parts), sum(p.squared for p in parts))

    def values(self) -> dict[str, float]:
        """The micro MAE = sum |e| / n and RMSE = sqrt(sum e^2 / n), each ratio rounded once."""
        from recsys_eval.core.exact import SQUARE_SCALE, VALUE_SCALE, ratio

        return {"mae": ratio(self.absolute, VALUE_SCALE, self.n),
                "rmse": math.sqrt(ratio(self.squared, SQUARE_SCALE, self.n))}

    def rows(self, names: Iterable[str], labels: dict[str, str], schema) -> pl.DataFrame:
        """The run-level rows (null user and unit) of the error metrics among ``names``."""
        micro = self.values()
        return pl.DataFrame([{**labels, "user": None, "unit": None, "metric": m, "k": None, "value": micro[m]}
                             for m in names if m in micro], schema=schema)


def _check_predictions(predictions: pl.DataFrame) -> pl.DataFrame:
    predictions = polars_frame(predictions, "predictions")
    missing = [c for c in _COLUMNS if c not in predictions.columns]
    if missing:
        raise DataError(
            f"predictions: missing columns {missing}; expected {list(_COLUMNS)}, got {predictions.columns}"
        )
    frame = predictions.select(_COLUMNS)
    for col in ("rating", "prediction"):
        if not frame.schema[col].is_numeric():
            raise DataError(f"predictions: column {col!r} has type {frame.schema[col]}; expected numbers")
        values = frame.get_column(col).cast(pl.Float64)
        bad = values.is_null() | values.is_nan() | values.is_infinite()
        if bad.any():
            row = frame.filter(bad).row(0, named=True)
            raise DataError(
                f"predictions: column {col!r} has {int(bad.sum()):,} null, NaN or infinite values "
                f"(e.g. user {row['user']!r}, item {row['item']!r})"
            )
    dup = frame.select("user", "item").is_duplicated()
    if dup.any():
        row = frame.filter(dup).row(0, named=True)
        raise DataError(
            f"predictions: (user, item) pairs occur more than once, e.g. user {row['user']!r}, "
            f"item {row['item']!r}; expected one prediction per test rating"
        )
    return frame


@njit(cache=True)
def _average_ranks(values):
    order = stable_argsort(values)
    ranks = np.empty(len(values))
    i = 0
    while i < len(values):
        j = i + 1
        while j < len(values) and values[order[j]] == values[order[i]]:
            j += 1
        for m in range(i, j):
            ranks[order[m]] = (i + j - 1) / 2.0 + 1.0
        i = j
    return ranks


@njit(cache=True)
def _user_values(truth, pred, out):
    n = len(truth)
    abs_sum = 0.0
    sq_sum = 0.0
    for i in range(n):
        e = pred[i] - truth[i]
        abs_sum += abs(e)
        sq_sum += e * e
    out[0] = abs_sum / n
    out[1] = np.sqrt(sq_sum / n)
    concordant = 0.0
    discordant = 0.0
    tied_truth = 0.0  # pairs tied in truth (n1 of tau-b)
    tied_pred = 0.0
    strict = 0.0  # NDPM: pairs the user rated differently ...
    contrary = 0.0  # ... that the prediction orders the other way
    compat = 0.0  # ... that the prediction ties
    for i in range(n):
        for j in range(i + 1, n):
            dt = truth[i] - truth[j]
            dp = pred[i] - pred[j]
            if dt == 0.0:
                tied_truth += 1.0
            if dp == 0.0:
                tied_pred += 1.0
            if dt != 0.0:
                strict += 1.0
                if dp == 0.0:
                    compat += 1.0
                elif (dt > 0.0) != (dp > 0.0):
                    contrary += 1.0
            if dt * dp > 0.0:
                concordant += 1.0
            elif dt * dp < 0.0:
                discordant += 1.0
    pairs = n * (n - 1) / 2.0
    den = np.sqrt((pairs - tied_truth) * (pairs - tied_pred))
    out[2] = (concordant - discordant) / den if den > 0.0 else np.nan
    if n > 1:
        rt = _average_ranks(truth)
        rp = _average_ranks(pred)
        rt = rt - rt.mean()
        rp = rp - rp.mean()
        den = np.sqrt((rt * rt).sum() * (rp * rp).sum())
        out[3] = (rt * rp).sum() / den if den > 0.0 else np.nan
    else:
        out[3] = np.nan
    out[4] = (2.0 * contrary + compat) / (2.0 * strict) if strict > 0.0 else np.nan


@njit(cache=True, nogil=True)
def _per_user_chunk(first, last, offsets, truth, pred, out):
    """The five values of the users ``first:last`` into their rows of ``out``, on the chunk pool
    (core/chunks.py): a prange loop here left numba's OpenMP threads spinning after each call."""
    for u in range(first, last):
        lo, hi = offsets[u], offsets[u + 1]
        _user_values(truth[lo:hi], pred[lo:hi], out[u])
