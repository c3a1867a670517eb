"""Per-user frames as matrices: the layout every interval and test in this package computes on.

The per-user frame is long: (system, protocol, fold, user, metric, k, value). Within one
(protocol, fold) the same users are measured for every system, metric and cutoff, so it becomes a
users x (system, metric, k) matrix (NaN where a value is undefined or missing) plus a mask of the
cells that had a row at all. Resampling users then serves all columns at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import polars as pl

from recsys_eval.core.columns import polars_frame
from recsys_eval.errors import DataError

PER_USER_COLUMNS: tuple[str, ...] = ("system", "protocol", "fold", "user", "metric", "k", "value")
PARTITION_KEYS: tuple[str, ...] = ("protocol", "fold")
COLUMN_KEYS: tuple[str, ...] = ("system", "metric", "k")


def check_per_user(frame: pl.DataFrame, source: str = "per-user results") -> pl.DataFrame:
    """Check that ``frame`` (polars or pandas) has the per-user columns; return them in order,
    value as Float64."""
    frame = polars_frame(frame, source)
    missing = [c for c in PER_USER_COLUMNS if c not in frame.columns]
    if missing:
        raise DataError(f"{source}: missing columns {missing}; expected {list(PER_USER_COLUMNS)}")
    if frame.is_empty():
        raise DataError(f"{source}: no rows")
    return frame.select(PER_USER_COLUMNS).with_columns(
        pl.col("value").cast(pl.Float64), pl.col("k").cast(pl.Int32)
    )


@dataclass(frozen=True)
class Partition:
    """One (protocol, fold) of a per-user frame as a users x columns matrix."""

    protocol: str
    fold: str
    columns: pl.DataFrame  # system, metric, k: one row per matrix column
    values: np.ndarray  # users x columns, NaN where undefined or not measured
    present: np.ndarray  # users x columns, True where the frame had a row
    users: pl.Series | None = None  # the user of each matrix row (ascending)

    def subset(self, rows: np.ndarray) -> Partition:
        """The partition of the users at ``rows`` (a bool mask over the matrix rows) alone: what
        :func:`partitions` makes of their rows of the frame, users and columns without a row left out."""
        present = self.present[rows]
        users, cols = present.any(axis=1), present.any(axis=0)
        kept = np.flatnonzero(rows)[users]
        return Partition(self.protocol, self.fold, self.columns.filter(pl.Series(cols)),
                         self.values[np.ix_(kept, cols)], self.present[np.ix_(kept, cols)],
                         None if self.users is None else self.users.gather(kept))

    def select(self, cols: np.ndarray) -> Partition:
        """The partition of the columns at ``cols`` (ascending) alone: what :func:`partitions` makes
        of their rows of the frame, the users without a value in any of them left out."""
        present = self.present[:, cols]
        kept = np.flatnonzero(present.any(axis=1))
        return Partition(self.protocol, self.fold, self.columns[cols], self.values[np.ix_(kept, cols)], present[kept],
                         None if self.users is None else self.users.gather(kept))

    def column(self, system: str, metric: str, k: int | None) -> int | None:
        """Index of the (system, metric, k) column, None if that system lacks it here."""
        return self._index.get((system, metric, k))

    @cached_property
    def _index(self) -> dict[tuple, int]:
        return {key: i for i, key in enumerate(self.columns.iter_rows())}


def partitions(frame: pl.DataFrame, source: str = "per-user results") -> list[Partition]:
    """Split a per-user frame by (protocol, fold), sorted, each as a :class:`Partition`."""
    frame = check_per_user(frame, source)
    result = []
    for (protocol, fold), part in sorted(
        frame.partition_by(list(PARTITION_KEYS), as_dict=True).items(), key=lambda kv: tuple(map(str, kv[0]))
    ):
        columns = part.select(COLUMN_KEYS).unique().sort(COLUMN_KEYS, nulls_last=True)
        coded = part.with_columns(row=pl.col("user").rank("dense").cast(pl.Int64) - 1).join(
            columns.with_row_index("col"), on=list(COLUMN_KEYS), how="left", nulls_equal=True
        )
        result.append(partition_of_cells(
            str(protocol), str(fold), columns, coded["row"].to_numpy(), coded["col"].to_numpy().astype(np.int64),
            coded["value"].to_numpy(), part.get_column("user").unique().sort(), source))
    return result


def partition_of_cells(protocol: str, fold: str, columns: pl.DataFrame, rows: np.ndarray, cols: np.ndarray,
                       values: np.ndarray, users: pl.Series, source: str = "per-user results") -> Partition:
    """The :class:`Partition` of one (protocol, fold) from its cells: the value of the user
    ``users[rows[i]]`` (``users`` ascending) in the column ``cols[i]`` of ``columns`` (system,
    metric, k, sorted); a cell given twice is an error naming it."""
    n_rows, n_cols = len(users), columns.height
    flat = rows * n_cols + cols
    if len(flat) and np.bincount(flat, minlength=n_rows * n_cols).max() > 1:
        at = np.flatnonzero(np.bincount(flat, minlength=n_rows * n_cols) > 1)[0]
        system, metric, k = columns.row(int(at % n_cols))
        raise _more_than_one(source, {"system": system, "protocol": protocol, "fold": fold,
                                      "user": users[int(at // n_cols)], "metric": metric, "k": k})
    matrix = np.full(n_rows * n_cols, np.nan)
    matrix[flat] = values
    present = np.zeros(n_rows * n_cols, dtype=bool)
    present[flat] = True
    return Partition(protocol, fold, columns, matrix.reshape(n_rows, n_cols), present.reshape(n_rows, n_cols), users)


def check_one_row_per_user(frame: pl.DataFrame, source: str = "per-user results") -> None:
    """A per-user frame (checked) has one row per (system, protocol, fold, metric, k, user)."""
    repeated = frame.filter(pl.struct(*PARTITION_KEYS, *COLUMN_KEYS, "user").is_duplicated())
    if repeated.height:
        raise _more_than_one(source, repeated.row(0, named=True))


def _more_than_one(source: str, dup: dict) -> DataError:
    return DataError(
        f"{source}: more than one value for system {dup['system']!r}, protocol {dup['protocol']!r}, "
        f"fold {dup['fold']!r}, user {dup['user']!r}, metric {dup['metric']!r}, k {dup['k']!r}; "
        "expected one row per user (aggregate units with per_user first)"
    )


def mask_groups(defined: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Group the columns of a boolean users x columns mask by identical pattern.

    Returns (rows, columns) index pairs, in the order of each pattern's first column, columns
    ascending: columns that are defined on exactly the same users share one set of resamples.
    """
    n_cols = defined.shape[1]
    if not n_cols:
        return []
    packed = np.ascontiguousarray(np.packbits(defined, axis=0).T)  # a column's pattern as one row of bytes
    if not packed.shape[1]:  # no users: every column has the empty pattern
        return [(np.zeros(0, dtype=np.int64), np.arange(n_cols))]
    patterns = packed.view(np.dtype((np.void, packed.shape[1]))).ravel()
    _, first, group = np.unique(patterns, return_index=True, return_inverse=True)
    by_group = np.argsort(group, kind="stable")  # each pattern's columns ascending
    cols = np.split(by_group, np.cumsum(np.bincount(group))[:-1])
    return [(np.flatnonzero(defined[:, first[g]]), cols[g]) for g in np.argsort(first)]
