"""Slices of the test users, from each fold's split alone (docs/CONVENTIONS.md#slices).

A slice is written ``kind:parameter`` (``[analysis] slices = ["activity:4", "cold:5"]``):

- ``activity:N``: N groups by the user's number of training interactions in the fold, cut at the
  j/N quantiles of the test users' counts (numpy's linear quantiles; a count on an edge goes to the
  upper group, so equal counts share a group and groups may be fewer than N when counts repeat);
- ``cold:N``: ``cold`` users with fewer than N training interactions, ``warm`` the others;
- ``time:N``: N windows of equal length between the earliest and the latest first test
  interaction tau_u of the test users; a user belongs to the window holding tau_u;
- ``attribute:COLUMN``: the value of a column of a user attributes table (``[analysis]
  user_attributes``, a CSV or Parquet file with a ``user`` column of raw ids); users absent from
  it, or with a null value, form the group ``unknown``;
- ``popularity:S``: not a slice of users but of the units of 1R protocols, by the training
  popularity of their target item (head, mid, tail; :mod:`recsys_eval.compare.slices`, which
  reads the popularity of the beyond-accuracy metrics); parsed here, grouped there.

Each fold's table has one row per (test user, slice): fold, user (raw id), slice (the spec as
written), group (a label that says its range, e.g. ``Q2 (12-31 train)``) and order (the group's
position, for tables and figures).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl

from recsys_eval.core import Split
from recsys_eval.errors import ConfigError, DataError

SLICE_KINDS = {"activity": "quantile groups of training interactions", "cold": "cold (< N training) vs warm",
               "time": "windows of the first test time", "attribute": "a column of [analysis] user_attributes",
               "popularity": "1R units by their item's popularity: head (top share S), mid, tail"}
#: The slice kinds of units (1R protocols) rather than of users.
UNIT_KINDS = ("popularity",)
#: An attribute slice with more distinct values than this is refused: bin the column first.
MAX_ATTRIBUTE_GROUPS = 50


@dataclass(frozen=True)
class SliceSpec:
    kind: str
    n: int = 0
    column: str | None = None
    share: float = 0.0

    @property
    def label(self) -> str:
        value = {"attribute": self.column, "popularity": f"{self.share:g}"}.get(self.kind, self.n)
        return f"{self.kind}:{value}"


def parse_slice(text: str) -> SliceSpec:
    """``activity:4`` -> SliceSpec("activity", 4); a clear error naming the spec otherwise."""
    kind, sep, value = str(text).partition(":")
    kinds = ", ".join(f"{k}:{ {'attribute': 'COLUMN', 'popularity': 'S'}.get(k, 'N')} ({what})"
                      for k, what in SLICE_KINDS.items())
    if not sep or kind not in SLICE_KINDS:
        raise ConfigError(f"slice {text!r}: expected one of {kinds}")
    if kind == "attribute":
        if not value.strip():
            raise ConfigError(f"slice {text!r}: name the attribute column, e.g. attribute:gender")
        return SliceSpec(kind, column=value.strip())
    if kind == "popularity":
        try:
            share = float(value)
        except ValueError:
            share = float("nan")
        if not 0 < share <= 0.5:
            raise ConfigError(f"slice {text!r}: S must be a share in (0, 0.5], the head's and the tail's share "
                              "of the items, e.g. popularity:0.2")
        return SliceSpec(kind, share=share)
    try:
        n = int(value)
    except ValueError:
        raise ConfigError(f"slice {text!r}: N must be a whole number, got {value!r}") from None
    if n < (1 if kind == "cold" else 2):
        raise ConfigError(f"slice {text!r}: N must be at least {1 if kind == 'cold' else 2}")
    return SliceSpec(kind, n)


def user_slices(splits: list[Split], specs: list[str], attributes: pl.DataFrame | None = None) -> pl.DataFrame:
    """Every test user's group in every slice of ``specs``, fold by fold (module docstring);
    ``attributes`` (:func:`read_user_attributes`) serves the ``attribute:COLUMN`` slices."""
    parsed = [spec for spec in map(parse_slice, specs) if spec.kind not in UNIT_KINDS]
    for spec in parsed:
        if spec.kind == "attribute":
            _check_attribute(attributes, spec.column)
    frames = [_fold_slices(split, spec, attributes) for split in splits for spec in parsed]
    return pl.concat(frames) if frames else pl.DataFrame()


def read_user_attributes(path: str | Path) -> pl.DataFrame:
    """A user attributes table (CSV with a header, or Parquet) with a ``user`` column of raw ids,
    one row per user; a DataError naming the file otherwise."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"user attributes {str(path)!r}: no such file")
    frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path, infer_schema_length=10_000)
    if "user" not in frame.columns:
        raise DataError(f"user attributes {str(path)!r}: no 'user' column (the raw user ids); columns are {frame.columns}")
    if frame.get_column("user").is_duplicated().any():
        raise DataError(f"user attributes {str(path)!r}: a user appears on more than one row")
    return frame


def _check_attribute(attributes: pl.DataFrame | None, column: str) -> None:
    if attributes is None:
        raise ConfigError(f"slice 'attribute:{column}' needs [analysis] user_attributes, a file of user attributes")
    if column not in attributes.columns or column == "user":
        raise ConfigError(f"slice 'attribute:{column}': no column {column!r} in the user attributes; "
                          f"columns are {[c for c in attributes.columns if c != 'user']}")
    if attributes.get_column(column).n_unique() > MAX_ATTRIBUTE_GROUPS:
        raise ConfigError(f"slice 'attribute:{column}': more than {MAX_ATTRIBUTE_GROUPS} distinct values; "
                          "bin the column into groups in the attributes file first")


def _fold_slices(split: Split, spec: SliceSpec, attributes: pl.DataFrame | None) -> pl.DataFrame:
    users = _test_users(split, spec.kind == "time")
    if spec.kind == "attribute":
        return _attribute_groups(split, users, spec, attributes)
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
    return users.select(pl.lit(split.name).alias("fold"), raw_users(split, users.get_column("user")).alias("user"),
                        pl.lit(spec.label).alias("slice"), "group", "order").sort("order", "user")


def raw_users(split: Split, users: pl.Series | np.ndarray) -> pl.Series:
    """The raw ids of the user indices ``users``, as the per-unit table holds them (Int64 or String)."""
    raw = split.train.user_ids.gather(users)
    return raw.cast(pl.Int64) if raw.dtype.is_integer() else raw


def _attribute_groups(split: Split, users: pl.DataFrame, spec: SliceSpec, attributes: pl.DataFrame) -> pl.DataFrame:
    """Each test user's value of ``spec.column`` (``unknown`` when absent), groups in value order."""
    raw = raw_users(split, users.get_column("user"))
    values = attributes.select(pl.col("user").cast(raw.dtype, strict=False), pl.col(spec.column).cast(pl.String))
    table = (pl.DataFrame({"user": raw}).join(values, on="user", how="left")
             .with_columns(pl.col(spec.column).fill_null("unknown").alias("group")))
    order = {v: i for i, v in enumerate(sorted(set(table.get_column("group")) - {"unknown"}) + ["unknown"])}
    return table.select(pl.lit(split.name).alias("fold"), "user", pl.lit(spec.label).alias("slice"), "group",
                        pl.col("group").replace_strict(order, return_dtype=pl.Int32).alias("order")).sort("order", "user")


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
