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

Everything is read from one sort (:class:`SortedValues`): each group's values sorted once, with
their running sums, laid end to end; every statistic and both curves of every group are then index
arithmetic over those arrays, with no loop over groups or users. The analysis sorts the columns of
the matrix it read of each (fold, protocol) (:meth:`SortedValues.of_columns`), a per-user frame is
sorted by group (:meth:`SortedValues.of`): the same bits. :class:`CurveMeans` averages the curves
over folds part by part, so that the analysis keeps a few numbers per group, never the users.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import polars as pl

from recsys_eval.compare.frames import Partition
from recsys_eval.measure.aggregate import ALL_FOLDS

QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)
#: The grid of p the Lorenz curve and the quantile function are read on (0, 0.01, ..., 1): 101
#: points draw either curve as smoothly as the eye sees, whatever the number of users.
GRID = np.linspace(0.0, 1.0, 101)
_GROUP = ["system", "protocol", "fold", "metric", "k"]
_CURVE_GROUP = ["system", "protocol", "metric", "k"]


@dataclass(frozen=True)
class SortedValues:
    """The defined per-user values of every (system, protocol, fold, metric, k) group of a
    per-user frame, each group's sorted ascending, the groups end to end in order of first
    appearance: ``values``, ``running`` (the sum of the group's values up to and including each
    position) and ``counts`` (n per group); ``keys`` has a row per group."""

    keys: pl.DataFrame
    values: np.ndarray
    running: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, per_user_frame: pl.DataFrame) -> SortedValues:
        """One sort of each group of ``per_user_frame``'s users with a defined value."""
        x = pl.col("value").sort()
        grouped = (per_user_frame.filter(pl.col("value").is_not_null() & pl.col("value").is_not_nan())
                   .group_by(_GROUP, maintain_order=True).agg(x.alias("x"), x.cum_sum().alias("running")))
        return cls(grouped.select(_GROUP), grouped.get_column("x").explode().to_numpy(),
                   grouped.get_column("running").explode().to_numpy(),
                   grouped.get_column("x").list.len().to_numpy().astype(np.int64))

    @classmethod
    def of_columns(cls, part: Partition, columns: np.ndarray) -> SortedValues:
        """The same of the ``columns`` of a (fold, protocol)'s matrix, in that order, each column
        one group: its defined values sorted (numpy's sort leaves NaN last) and summed along, no
        frame of the users built."""
        ordered = np.sort(part.values[:, columns].T, axis=1)
        counts = np.count_nonzero(~np.isnan(ordered), axis=1)
        kept = counts > 0
        ordered, counts = ordered[kept], counts[kept]
        defined = np.arange(ordered.shape[1])[None, :] < counts[:, None]
        keys = part.columns[columns[kept]].with_columns(pl.lit(part.protocol).alias("protocol"),
                                                        pl.lit(part.fold).alias("fold")).select(_GROUP)
        return cls(keys, ordered[defined], np.cumsum(ordered, axis=1)[defined], counts.astype(np.int64))

    @cached_property
    def starts(self) -> np.ndarray:
        """Where each group begins in ``values``."""
        return np.cumsum(self.counts) - self.counts

    @cached_property
    def totals(self) -> np.ndarray:
        """sum x per group."""
        return self.running[self.starts + self.counts - 1] if self.counts.size else np.empty(0)

    @cached_property
    def defined(self) -> np.ndarray:
        """Where the Gini and the Lorenz curve are defined: no negative value and a positive sum."""
        return (self.values[self.starts] >= 0) & (self.totals > 0) if self.counts.size else np.empty(0, bool)

    def quantiles(self, p: np.ndarray) -> np.ndarray:
        """groups x len(p): each group's quantiles at ``p`` by numpy's default (linear) rule: the
        virtual index p (n - 1) between the order statistics below and above it, interpolated as
        ``np.quantile`` does (the same bits)."""
        n = self.counts[:, None]
        index = (n - 1) * p[None, :]  # numpy's virtual index of the linear rule
        below = np.clip(np.floor(index), 0, n - 1).astype(np.int64)
        above = np.minimum(below + 1, n - 1)
        t = index - below
        a, b = self.values[self.starts[:, None] + below], self.values[self.starts[:, None] + above]
        diff = b - a
        return np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)

    def lorenz(self, p: np.ndarray) -> np.ndarray:
        """groups x len(p): each group's Lorenz curve at the shares of users ``p``, linear between
        (i/n, S_i / S_n) with S_i the sum of the i smallest values (S_0 = 0); NaN rows where it is
        undefined (:attr:`defined`)."""
        n = self.counts[:, None]
        position = n * p[None, :]
        below = np.minimum(np.floor(position), n - 1).astype(np.int64)
        t = position - below
        lower = np.where(below > 0, self.running[self.starts[:, None] + below - 1], 0.0)
        upper = self.running[self.starts[:, None] + below]
        with np.errstate(invalid="ignore", divide="ignore"):
            curve = (lower + t * (upper - lower)) / self.totals[:, None]
        return np.where(self.defined[:, None], curve, np.nan)

    def gini(self) -> np.ndarray:
        """Per group: sum_i (2i - n - 1) x_(i) / (n sum x), NaN where undefined (:attr:`defined`)."""
        n = np.repeat(self.counts, self.counts)
        rank = np.arange(self.values.size) - np.repeat(self.starts, self.counts) + 1
        weighted = np.add.reduceat((2 * rank - n - 1) * self.values, self.starts) if self.counts.size else n
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.defined, weighted / (self.counts * self.totals), np.nan)

    def summary(self) -> pl.DataFrame:
        """:func:`distribution_summary` of these groups."""
        quantiles = self.quantiles(np.asarray(QUANTILES))
        zeros = np.add.reduceat(self.values == 0, self.starts) if self.counts.size else self.counts
        return self.keys.with_columns(
            pl.Series("n", self.counts, dtype=pl.UInt32), pl.Series("mean", self.totals / self.counts),
            *[pl.Series(f"q{round(100 * q)}", quantiles[:, i]) for i, q in enumerate(QUANTILES)],
            pl.Series("share_zero", zeros / self.counts), pl.Series("gini", self.gini()))

    def curves(self, grid: np.ndarray = GRID) -> pl.DataFrame:
        """:func:`distribution_curves` of these groups."""
        if not self.counts.size:
            return pl.DataFrame()
        return self.keys.select(pl.all().repeat_by(len(grid)).explode()).with_columns(
            pl.Series("p", np.tile(grid, self.counts.size)), pl.Series("quantile", self.quantiles(grid).ravel()),
            pl.Series("lorenz", self.lorenz(grid).ravel())).with_columns(pl.col("k").cast(pl.Int32))


def distribution_summary(per_user_frame: pl.DataFrame) -> pl.DataFrame:
    """One row per (system, protocol, fold, metric, k) of a per-user frame: n (users with a defined
    value), mean, q10, q25, q50, q75, q90, share_zero and gini (module docstring)."""
    return SortedValues.of(per_user_frame).summary()


def distribution_curves(per_user_frame: pl.DataFrame, grid: np.ndarray = GRID) -> pl.DataFrame:
    """Per (system, protocol, fold, metric, k): the quantile function and the Lorenz curve on
    ``grid``; columns the group, p, quantile, lorenz (NaN where the Gini is undefined)."""
    return SortedValues.of(per_user_frame).curves(grid)


def lorenz(values: np.ndarray, grid: np.ndarray = GRID) -> np.ndarray:
    """The Lorenz curve of ``values`` (sorted ascending) at the shares of users ``grid``: linear
    between (i/n, cumulative share of the i smallest); NaN when a value is negative or all are 0."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return np.full(np.shape(grid), np.nan)
    one = SortedValues(pl.DataFrame(), values, np.cumsum(values), np.array([values.size]))
    return one.lorenz(np.asarray(grid, dtype=np.float64))[0]


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


@dataclass
class CurveMeans:
    """The report's curves, gathered part by part during the analysis: each (system, protocol,
    metric, k) group's quantile function and Lorenz curve on :data:`GRID`, averaged point by point
    over the folds that have the group (a quantile average, Vincent's; fold ``all``), or the one
    fold's curves when the run has one. Only a running sum of each group's curves is held (folds
    added in the run's order, as :meth:`table` divides them), never users, nor a fold's curves."""

    folds: list[str]
    _groups: dict[tuple, int] = field(default_factory=dict)  # (system, protocol, metric, k) -> its row
    _sums: list[np.ndarray] = field(default_factory=lambda: [np.zeros((0, GRID.size)) for _ in range(2)])
    _counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def add(self, groups: SortedValues) -> None:
        """The curves of one part's groups."""
        if not groups.counts.size:
            return
        rows = np.array([self._groups.setdefault(key, len(self._groups))
                         for key in groups.keys.select(_CURVE_GROUP).rows()], dtype=np.int64)
        grown = len(self._groups) - len(self._counts)
        if grown:
            self._sums = [np.concatenate([total, np.zeros((grown, GRID.size))]) for total in self._sums]
            self._counts = np.concatenate([self._counts, np.zeros(grown, dtype=np.int64)])
        for total, curve in zip(self._sums, (groups.quantiles(GRID), groups.lorenz(GRID)), strict=True):
            np.add.at(total, rows, curve)
        np.add.at(self._counts, rows, 1)

    def table(self) -> pl.DataFrame:
        """Columns system, protocol, fold, metric, k, p, quantile, lorenz; rows in order of first
        appearance, p ascending (NaN Lorenz where a fold's is undefined)."""
        if not self._groups:
            return pl.DataFrame()
        unique = pl.DataFrame(list(self._groups), schema={"system": pl.String, "protocol": pl.String,
                                                          "metric": pl.String, "k": pl.Int32}, orient="row")
        folds_of = self._counts[:, None]
        fold = ALL_FOLDS if len(self.folds) > 1 else self.folds[0]
        return unique.select(pl.all().repeat_by(GRID.size).explode()).with_columns(
            pl.lit(fold).alias("fold"), pl.Series("p", np.tile(GRID, unique.height)),
            pl.Series("quantile", (self._sums[0] / folds_of).ravel()),
            pl.Series("lorenz", (self._sums[1] / folds_of).ravel()),
        ).select("system", "protocol", "fold", "metric", "k", "p", "quantile", "lorenz")
