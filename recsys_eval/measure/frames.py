"""Per-unit tables from kernel matrices: the long ``system, protocol, fold, user, unit, metric, k,
value`` layout every measure function returns."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl
import pyarrow as pa

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
    per matrix column, built whole from numpy runs (a chunk per run costs twice to ten times as much)
    which polars takes without a copy: at ML-25M size a table has millions of rows, and the kernel's
    zeroing of fresh pages for them was most of its cost; numpy asks for huge pages, a fault each
    2 MB instead of each 4 kB (the metric column alone, 16 bytes a row, cost 35,000 faults built by
    polars).
    """
    n_units, n_cols = values.shape
    unit = np.arange(n_units, dtype=np.int64)
    frame = pl.DataFrame(
        {
            "user": _runs_of_users(_users(unit_user, user_ids), n_cols),
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
    """Each name repeated n times, in order, as a String column whose Arrow views (polars' string
    layout, 16 bytes a row) are a numpy run of each name's view, taken by polars without a copy."""
    distinct = list(dict.fromkeys(names))
    data = [name.encode() for name in distinct]
    views = np.zeros(len(distinct), dtype=_VIEW)
    start = np.cumsum([0, *map(len, data)])
    views["length"] = [len(text) for text in data]
    for j, text in enumerate(data):
        if len(text) <= _INLINE:  # the whole string in the view
            views["inline"][j, : len(text)] = np.frombuffer(text, dtype=np.uint8)
        else:  # its first 4 bytes, then its place in the one data buffer (buffer 0)
            views["inline"][j, :4] = np.frombuffer(text[:4], dtype=np.uint8)
            views["inline"][j, 8:] = np.array([start[j]], dtype="<u4").view(np.uint8)
    code = {name: j for j, name in enumerate(distinct)}
    column = np.repeat(views[[code[name] for name in names]], n)
    array = pa.Array.from_buffers(pa.string_view(), len(column), [None, pa.py_buffer(column),
                                                                   pa.py_buffer(b"".join(data))])
    return pl.Series(array)


#: An Arrow string view: the length, then the string when at most :data:`_INLINE` bytes, else its
#: first 4 bytes, the data buffer's index and the offset in it (little-endian u32 each).
_INLINE = 12
_VIEW = np.dtype([("length", "<u4"), ("inline", np.uint8, 12)])


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


def _runs_of_users(user: pl.Series, n: int) -> pl.Series:
    """The units' users ``user`` n times over: integer ids as a numpy run, taken without a copy."""
    if user.dtype == pl.Int64 and not user.has_nulls():
        return pl.Series("user", np.tile(user.to_numpy(), n))
    return user.gather(np.tile(np.arange(user.len(), dtype=np.uint32), n))


def concat_per_unit(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Concatenate per-unit tables (the user column may be integer or string ids)."""
    frames = [f for f in frames if f.height or len(frames) == 1]
    if not frames:
        return pl.DataFrame(schema=PER_UNIT_SCHEMA)
    return pl.concat(frames, how="vertical_relaxed")
