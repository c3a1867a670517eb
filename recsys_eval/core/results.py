"""The per-unit results table every summary, test and plot is computed from (docs/CONVENTIONS.md#notation).

One row per (system, protocol, fold, user, unit, metric, k). ``user`` holds the raw user id (integer
or string, as in the data); ``unit`` numbers the evaluation units of one (system, protocol, fold)
(a user under AR, one relevant item of a user under 1R); ``k`` is null for metrics without a cutoff;
``value`` is NaN where the metric is undefined for the unit (e.g. recall with no relevant item),
so that the averaging policy, not the kernel, decides what to do with it.
"""

from __future__ import annotations

import polars as pl

from recsys_eval.errors import DataError

PER_UNIT_SCHEMA: dict[str, pl.DataType] = {
    "system": pl.String,
    "protocol": pl.String,
    "fold": pl.String,
    "user": pl.Int64,  # or pl.String for string raw ids
    "unit": pl.Int64,
    "metric": pl.String,
    "k": pl.Int32,
    "value": pl.Float64,
}
PER_UNIT_COLUMNS: tuple[str, ...] = tuple(PER_UNIT_SCHEMA)


def check_per_unit(frame: pl.DataFrame, source: str = "per-unit results") -> pl.DataFrame:
    """Check that ``frame`` has the per-unit columns; return it with them in order."""
    missing = [c for c in PER_UNIT_COLUMNS if c not in frame.columns]
    if missing:
        raise DataError(f"{source}: missing columns {missing}; expected {list(PER_UNIT_COLUMNS)}")
    return frame.select(PER_UNIT_COLUMNS)
