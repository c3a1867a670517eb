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

    The value column is ``values.T`` flattened: no copy when ``values`` is the transpose of a
    C-contiguous array (the kernels' metric-major output). The other columns are runs of one value
    per matrix column, built whole from numpy runs (a chunk per run costs twice to ten times as much).
    """
    n_units, n_cols = values.shape
    unit = np.arange(n_units, dtype=np.int64)
    user = _users(unit_user, user_ids)
    frame = pl.DataFrame(
        {
            "user": pl.concat([user] * n_cols) if n_cols > 1 else user,
            "unit": np.tile(unit, n_cols),
            "metric": _runs_of_names(metrics, n_units),
            "k": _runs_of_cutoffs(ks, n_units),
            "value": np.ascontiguousarray(values.T).ravel(),
        }
    )
    return frame.with_columns(
        [pl.lit(labels[c], dtype=pl.String).alias(c) for c in ("system", "protocol", "fold")]
    ).select(PER_UNIT_COLUMNS)


def _runs_of_names(names: Sequence[str], n: int) -> pl.Series:
    """Each name repeated n times, in order: the distinct names gathered by a numpy run of codes,
    uint32 (polars' own index type, which an int64 run would first be cast to: a quarter of the
    column's cost at 8.6 million rows)."""
    codes: dict[str, int] = {}
    column_code = np.array([codes.setdefault(name, len(codes)) for name in names], dtype=np.uint32)
    return pl.Series(list(codes), dtype=pl.String).gather(pl.Series(np.repeat(column_code, n)))


def _runs_of_cutoffs(ks: Sequence[int | None], n: int) -> pl.Series:
    """Each cutoff repeated n times, in order, as Int32 (null for None)."""
    runs = pl.Series(np.repeat(np.array([0 if k is None else int(k) for k in ks], dtype=np.int32), n))
    if all(k is not None for k in ks):
        return runs
    valid = pl.Series(np.repeat(np.array([k is not None for k in ks]), n))
    return pl.select(pl.when(valid).then(runs)).to_series()


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
