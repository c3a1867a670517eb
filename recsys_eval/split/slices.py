"""Slices of the test users, from each fold's split alone (docs/CONVENTIONS.md#slices).

A slice is written ``kind:parameter`` (``[analysis] slices = ["activity:4", "cold:5"]``):

- ``activity:N``: N groups by the user's number of training interactions in the fold, cut at the
  j/N quantiles of the test users' counts (numpy's linear quantiles; a count on an edge goes to the
  upper group, so equal counts share a group and groups may be fewer than N when counts repeat);
- ``cold:N``: ``cold`` users with fewer than N training interactions, ``warm`` the others;
- ``time:N``: N windows of equal length between the earliest and the latest first test
  interaction tau_u of the test users; a user belongs to the window holding tau_u.

Each fold's table has one row per (test user, slice): fold, user (raw id), slice (the spec as
written), group (a label that says its range, e.g. ``Q2 (12-31 train)``) and order (the group's
position, for tables and figures).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import polars as pl

from recsys_eval.core import Split
from recsys_eval.errors import ConfigError, DataError

SLICE_KINDS = {"activity": "quantile groups of training interactions", "cold": "cold (< N training) vs warm",
               "time": "windows of the first test time"}


@dataclass(frozen=True)
class SliceSpec:
    kind: str
    n: int

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.n}"


def parse_slice(text: str) -> SliceSpec:
    """``activity:4`` -> SliceSpec("activity", 4); a clear error naming the spec otherwise."""
    kind, sep, value = str(text).partition(":")
    kinds = ", ".join(f"{k}:N ({what})" for k, what in SLICE_KINDS.items())
    if not sep or kind not in SLICE_KINDS:
        raise ConfigError(f"slice {text!r}: expected one of {kinds}")
    try:
        n = int(value)
    except ValueError:
        raise ConfigError(f"slice {text!r}: N must be a whole number, got {value!r}") from None
    if n < (1 if kind == "cold" else 2):
        raise ConfigError(f"slice {text!r}: N must be at least {1 if kind == 'cold' else 2}")
    return SliceSpec(kind, n)


def user_slices(splits: list[Split], specs: list[str]) -> pl.DataFrame:
    """Every test user's group in every slice of ``specs``, fold by fold (module docstring)."""
    parsed = [parse_slice(s) for s in specs]
    frames = [_fold_slices(split, spec) for split in splits for spec in parsed]
    return pl.concat(frames) if frames else pl.DataFrame()


def _fold_slices(split: Split, spec: SliceSpec) -> pl.DataFrame:
    users = _test_users(split, spec.kind == "time")
    if spec.kind == "activity":
        counts = users.get_column("n_train").to_numpy()
        edges = np.quantile(counts, np.arange(1, spec.n) / spec.n) if counts.size else np.array([])
        order = np.searchsorted(np.unique(edges), counts, side="right")
        users = users.with_columns(order=pl.Series(order, dtype=pl.Int32))
        ranges = users.group_by("order").agg(pl.col("n_train").min().alias("lo"), pl.col("n_train").max().alias("hi"))
        users = users.join(ranges, on="order").with_columns(
            group=pl.format("Q{} ({}-{} train)", pl.col("order") + 1, "lo", "hi"))
    elif spec.kind == "cold":
        cold = pl.col("n_train") < spec.n
        users = users.with_columns(order=pl.when(cold).then(0).otherwise(1).cast(pl.Int32),
                                   group=pl.when(cold).then(pl.lit(f"cold (< {spec.n} train)"))
                                   .otherwise(pl.lit(f"warm (>= {spec.n} train)")))
    else:
        users = _time_windows(users, spec.n)
    raw = split.train.user_ids.gather(users.get_column("user"))
    raw = raw.cast(pl.Int64) if raw.dtype.is_integer() else raw  # as the per-unit table holds it
    return users.select(pl.lit(split.name).alias("fold"), raw.alias("user"), pl.lit(spec.label).alias("slice"),
                        "group", "order").sort("order", "user")


def _time_windows(users: pl.DataFrame, n: int) -> pl.DataFrame:
    """Windows of equal length over [min tau_u, max tau_u], the last one closed."""
    taus = users.get_column("test_start").to_numpy()
    low, high = (int(taus.min()), int(taus.max())) if taus.size else (0, 0)
    edges = np.linspace(low, high, n + 1)
    order = np.clip(np.searchsorted(edges, taus, side="right") - 1, 0, n - 1)
    labels = [f"W{i + 1} ({_day(edges[i])} to {_day(edges[i + 1])})" for i in range(n)]
    return users.with_columns(order=pl.Series(order, dtype=pl.Int32),
                              group=pl.Series(np.asarray(labels, dtype=object)[order], dtype=pl.String))


def _day(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d")


def _test_users(split: Split, timed: bool) -> pl.DataFrame:
    """The test users with their training count (and, when ``timed``, their first test time)."""
    test = split.test.frame
    if timed and "timestamp" not in test.columns:
        raise DataError(f"split {split.name!r}: a time slice needs timestamps, and the test side has none")
    aggs = [pl.col("timestamp").min().alias("test_start")] if timed else []
    users = test.group_by("user").agg(*aggs) if aggs else test.select("user").unique()
    counts = split.train.frame.group_by("user").agg(pl.len().alias("n_train"))
    return (users.join(counts, on="user", how="left")
            .with_columns(pl.col("n_train").fill_null(0).cast(pl.Int64)).sort("user"))
