"""Per-unit tables from kernel matrices: the long ``system, protocol, fold, user, unit, metric, k,
value`` layout every measure function returns."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from recsys_eval.core.results import PER_UNIT_COLUMNS, PER_UNIT_SCHEMA
from recsys_eval.errors import DataError


def long_frame(
    values: np.ndarray,
    metrics: Sequence[str],
    ks: Sequence[int | None],
    unit_user: np.ndarray,
    user_ids,
    labels: dict[str, str],
) -> pl.DataFrame:
    """A ``(units x columns)`` matrix as per-unit rows, metric-major; column j is metrics[j]@ks[j].

    One chunk of rows per matrix column, every chunk's columns shared, not copied: its values a
    slice of ``values.T`` flattened (no copy when ``values`` is the transpose of a C-contiguous
    array, the kernels' metric-major output), its user and unit columns the same arrays in every
    chunk, its metric name and cutoff one run of n per distinct name or cutoff. Rows written out
    whole (8.8M rows of issue 30's metrics, 44 bytes each) cost mostly the page faults of their
    fresh memory; readers and writers take the chunks as they are.
    """
    n_units = len(values)
    flat = pl.Series("value", np.ascontiguousarray(values.T).ravel())
    user, unit = _users(unit_user, user_ids), pl.Series("unit", np.arange(n_units, dtype=np.int64))
    names = {name: _run(name, pl.String, n_units) for name in dict.fromkeys(metrics)}
    cuts = {k: _run(k, pl.Int32, n_units) for k in dict.fromkeys(ks)}
    columns = {"user": [user] * len(metrics), "unit": [unit] * len(metrics), "metric": [names[m] for m in metrics],
               "k": [cuts[k] for k in ks], "value": [flat.slice(j * n_units, n_units) for j in range(len(metrics))]}
    if not metrics:  # no row, in the columns' types
        columns = {name: [column.clear()] for name, column in (("user", user), ("unit", unit), ("value", flat),
                                                                 ("metric", pl.Series([], dtype=pl.String)),
                                                                 ("k", pl.Series([], dtype=pl.Int32)))}
    frame = pl.DataFrame([pl.concat(parts, rechunk=False).rename(name) for name, parts in columns.items()])
    return frame.with_columns(
        [pl.lit(labels[c], dtype=pl.String).alias(c) for c in ("system", "protocol", "fold")]
    ).select(PER_UNIT_COLUMNS)


def _run(value, dtype: pl.DataType, n: int) -> pl.Series:
    """``value`` n times (``new_from_index``: a tenth of ``pl.repeat``'s overhead, ~0.1 ms a call)."""
    return pl.Series([value], dtype=dtype).new_from_index(0, n)


def _users(unit_user: np.ndarray, user_ids) -> pl.Series:
    if user_ids is None:
        return pl.Series("user", unit_user, dtype=pl.Int64)
    ids = user_ids if isinstance(user_ids, pl.Series) else pl.Series(user_ids)
    if len(unit_user) and int(unit_user.max()) >= ids.len():
        raise DataError(
            f"user_ids has {ids.len():,} ids but the units reach user index {int(unit_user.max())}"
        )
    user = ids.gather(unit_user)
    if user.dtype.is_integer():
        user = user.cast(pl.Int64)
    elif user.dtype != pl.String:
        user = user.cast(pl.String)
    return user.rename("user")


def concat_per_unit(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Concatenate per-unit tables (the user column may be integer or string ids)."""
    frames = [f for f in frames if f.height or len(frames) == 1]
    if not frames:
        return pl.DataFrame(schema=PER_UNIT_SCHEMA)
    return pl.concat(frames, how="vertical_relaxed")
