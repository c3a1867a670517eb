"""The distribution of per-user utility behind each mean (docs/CONVENTIONS.md#distributions).

Ekstrand, Carterette & Diaz ("Distributionally-Informed Recommender System Evaluation", ACM TORS
2024) argue that a mean over users hides who gains: two systems with one mean can serve every user
a little or a few users a lot. Per (system, protocol, fold, metric, k), over the users with a
defined value x_1..x_n (each user's mean over their units, as in the summary):

- the quantiles at 10, 25, 50, 75 and 90% (linear interpolation between order statistics, numpy's
  default), and the share of users at exactly 0;
- the Gini coefficient of the sorted values x_(1) <= ... <= x_(n):
  G = sum_i (2i - n - 1) x_(i) / (n sum_i x_i), 0 when every user gets the same, (n - 1) / n when
  one user gets everything; undefined (NaN) when a value is negative or all are 0;
- the Lorenz curve L(p): the share of the total utility held by the share p of users who get least,
  the polygon through (i/n, sum_{j<=i} x_(j) / sum x), read on a fixed grid of p;
- the quantile function Q(p) on the same grid, which drawn as (Q(p), p) is the ECDF.

Everything is computed from one part of the per-user table at a time; :func:`part_curves` reads one
(protocol, metric, k) from a results folder's per-unit files through filtered scans, fold by fold.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from recsys_eval.core.results import ResultsFolder
from recsys_eval.measure.aggregate import ALL_FOLDS, per_user

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
#: The grid of p the Lorenz curve and the quantile function are read on (0, 0.01, ..., 1).
GRID = np.linspace(0.0, 1.0, 101)
_GROUP = ["system", "protocol", "fold", "metric", "k"]


def distribution_summary(per_user_frame: pl.DataFrame) -> pl.DataFrame:
    """One row per (system, protocol, fold, metric, k) of a per-user frame: n (users with a defined
    value), mean, q10, q25, q50, q75, q90, share_zero and gini (module docstring)."""
    x = pl.col("value")
    n = pl.len()
    rank = pl.int_range(1, n + 1).cast(pl.Float64)
    gini = ((2 * rank - n - 1) * x.sort()).sum() / (n * x.sum())
    return (
        _defined(per_user_frame)
        .group_by(_GROUP, maintain_order=True)
        .agg(
            n.alias("n"), x.mean().alias("mean"),
            *[x.quantile(q, interpolation="linear").alias(f"q{round(100 * q)}") for q in QUANTILES],
            (x == 0).mean().alias("share_zero"),
            pl.when((x.min() >= 0) & (x.sum() > 0)).then(gini).otherwise(float("nan")).alias("gini"),
        )
    )


def with_fold_means(table: pl.DataFrame, keys: list[str] = _GROUP, *, summed: tuple[str, ...] = ("n",),
                    blank: tuple[str, ...] = ()) -> pl.DataFrame:
    """``table`` with, when it has several folds, rows of fold ``all`` per ``keys`` group: the mean
    over folds of every other numeric column (the summary's rule: per fold, then the mean of the fold
    values), the sum of the ``summed`` columns, and null in the ``blank`` ones."""
    if table.get_column("fold").n_unique() < 2:
        return table
    group = [c for c in keys if c != "fold"]
    averaged = [c for c in table.columns if c not in (*keys, *summed, *blank)]
    means = (table.group_by(group, maintain_order=True)
             .agg(pl.col(*summed).sum(), *[pl.col(c).fill_nan(None).mean().fill_null(float("nan")) for c in averaged])
             .with_columns(pl.lit(ALL_FOLDS).alias("fold"), *[pl.lit(None, table.schema[c]).alias(c) for c in blank]))
    return pl.concat([table, means.select(table.columns)], how="vertical_relaxed")


def distribution_curves(per_user_frame: pl.DataFrame, grid: np.ndarray = GRID) -> pl.DataFrame:
    """Per (system, protocol, fold, metric, k): the quantile function and the Lorenz curve on
    ``grid``; columns the group, p, quantile, lorenz (NaN where the Gini is undefined)."""
    frames = []
    for key, part in _defined(per_user_frame).group_by(_GROUP, maintain_order=True):
        values = np.sort(part.get_column("value").to_numpy())
        frames.append(pl.DataFrame({**dict(zip(_GROUP, key, strict=True)), "p": grid,
                                    "quantile": np.quantile(values, grid), "lorenz": lorenz(values, grid)},
                                   schema_overrides={"k": pl.Int32}))
    return pl.concat(frames) if frames else pl.DataFrame()


def lorenz(values: np.ndarray, grid: np.ndarray = GRID) -> np.ndarray:
    """The Lorenz curve of ``values`` (sorted ascending) at the shares of users ``grid``: linear
    between (i/n, cumulative share of the i smallest); NaN when a value is negative or all are 0."""
    total = values.sum()
    if values.size == 0 or total <= 0 or values[0] < 0:
        return np.full(grid.shape, np.nan)
    shares = np.concatenate([[0.0], np.cumsum(values) / total])
    return np.interp(grid, np.arange(values.size + 1) / values.size, shares)


def part_curves(folder: ResultsFolder, protocol: str, metric: str, k: int | None, *,
                undefined: str = "skip") -> pl.DataFrame:
    """:func:`distribution_curves` of one (protocol, metric, k) of a results folder, read fold by
    fold from the per-unit files with a filtered scan; fold ``all`` averages the folds' curves
    point by point (a quantile average, Vincent's)."""
    wanted = (pl.col("metric") == metric) & pl.col("user").is_not_null()
    wanted &= pl.col("k").is_null() if k is None else pl.col("k") == k
    folds = []
    for fold in folder.manifest.folds:
        units = folder.scan_per_unit(fold=fold, protocol=protocol).filter(wanted).collect()
        curves = distribution_curves(per_user(units, undefined=undefined)) if units.height else None
        if curves is not None and curves.height:  # a fold (a rolling window) may have no defined user
            folds.append(curves)
    if not folds:
        return pl.DataFrame()
    curves = pl.concat(folds)
    if len(folds) < 2:
        return curves
    keys = ["system", "protocol", "metric", "k", "p"]
    means = curves.group_by(keys, maintain_order=True).agg(pl.col("quantile", "lorenz").mean())
    return pl.concat([curves, means.with_columns(fold=pl.lit(ALL_FOLDS)).select(curves.columns)])


def _defined(per_user_frame: pl.DataFrame) -> pl.DataFrame:
    return per_user_frame.filter(pl.col("value").is_not_null() & pl.col("value").is_not_nan())
