"""Your own interactions from a CSV (or other delimited text) or Parquet file.

``load_file("ratings.csv", columns={"user": "userId", "item": "movieId", "rating": "rating"})``
maps the roles user, item, rating and timestamp to the file's columns, parses timestamps given as
text with ``timestamp_format`` (strftime codes), and validates the data as
:meth:`Interactions.from_frame` does, naming the line of the first bad value.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

from recsys_eval.core.columns import id_column
from recsys_eval.core.interactions import DuplicatePolicy, Interactions
from recsys_eval.data.delimited import Table, read_delimited
from recsys_eval.data.descriptors import ROLES
from recsys_eval.errors import ConfigError, DataError, closest

PARQUET_SUFFIXES = (".parquet", ".pq")
_SEPARATORS = ("::", "\t", ",", ";", "|")


def load_file(
    path: str | Path,
    columns: Mapping[str, str] | None = None,
    *,
    timestamp_format: str | None = None,
    separator: str | None = None,
    header: bool = True,
    duplicates: DuplicatePolicy = "error",
) -> Interactions:
    """Interactions from a CSV or Parquet file.

    Args:
        path: the file; ``.parquet``/``.pq`` is read as Parquet, anything else as delimited text.
        columns: role -> column name for the roles user, item (required), rating and timestamp;
            default: the columns named ``user``, ``item``, ``rating``, ``timestamp`` that exist.
            Without a header line the columns are named ``column_1``, ``column_2``, ...
        timestamp_format: strftime format of timestamps written as text (e.g. ``"%Y-%m-%d %H:%M:%S"``);
            without it timestamps are integer seconds (or Parquet datetimes).
        separator: field separator (may be several characters, e.g. ``"::"``); default: guessed
            from the first line among ``::``, tab, ``,``, ``;``, ``|``.
        header: whether the first line of a text file names the columns.
        duplicates: policy for repeated (user, item) pairs: error, last, max or mean.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"no file {path}" + (" (it is a folder)" if path.is_dir() else ""))
    if path.suffix.lower() in PARQUET_SUFFIXES:
        table = _read_parquet(path)
    else:
        table = read_delimited(
            path,
            what=str(path),
            separator=separator or guess_separator(path),
            header=header,
        )
    roles = roles_of(columns, table.frame.columns, str(path))
    table.check_not_null(list(roles.values()))
    frame = pl.DataFrame(
        {role: _convert(table, role, name, timestamp_format) for role, name in roles.items()}
    )
    return Interactions.from_frame(
        frame,
        rating="rating" if "rating" in roles else None,
        timestamp="timestamp" if "timestamp" in roles else None,
        duplicates=duplicates,
        source=str(path),
    )


def _read_parquet(path: Path) -> Table:
    try:
        frame = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{path}: not a readable Parquet file ({first})") from None
    return Table(frame, str(path), first_line=1, unit="row")


def guess_separator(path: Path) -> str:
    with open(path, "rb") as stream:
        first = stream.readline(1 << 16).decode("utf-8", errors="replace")
    return separator_of(first, path)


def separator_of(first: str, path: str | Path) -> str:
    """The field separator of a delimited file whose first line is ``first``: ``::`` where it
    occurs, else the one of tab, comma, semicolon, ... it has most of."""
    counts = {sep: first.count(sep) for sep in _SEPARATORS}
    if counts["::"]:
        return "::"
    best = max(_SEPARATORS[1:], key=lambda sep: counts[sep])
    if counts[best] == 0:
        raise DataError(
            f"{path}: cannot tell the field separator from the first line {first.strip()[:80]!r}; "
            "give separator=..."
        )
    return best


def roles_of(columns: Mapping[str, str] | None, available: list[str], what: str) -> dict[str, str]:
    """role -> column name, checked against the roles and the file's columns."""
    if columns is None:
        roles = {role: role for role in ROLES if role in available}
        if "user" not in roles or "item" not in roles:
            raise DataError(
                f"{what}: no columns named 'user' and 'item' (the file has {available}); "
                "map them with columns={'user': ..., 'item': ...}"
            )
        return roles
    if not isinstance(columns, Mapping):
        raise ConfigError(f"columns must map roles to column names, got {type(columns).__name__}")
    for role in columns:
        if role not in ROLES:
            raise ConfigError(f"unknown role {role!r} in columns: {closest(str(role), ROLES)}")
    for role in ("user", "item"):
        if role not in columns:
            raise ConfigError(f"columns must map the role {role!r} to a column of {what}")
    for role, name in columns.items():
        if name not in available:
            raise DataError(f"{what}: no column {name!r} (for {role}); {closest(str(name), available)}")
    return {role: columns[role] for role in ROLES if role in columns}


def _convert(table: Table, role: str, name: str, timestamp_format: str | None) -> pl.Series:
    """The column of ``role`` in a type Interactions accepts, naming the line of a bad value."""
    series = table.frame.get_column(name)
    dtype = series.dtype
    if role in ("user", "item"):  # the checks every reader of ids makes (nan, empty, 12.0)
        return id_column(table.frame, name, table.what, table.locate)
    if role == "rating":
        if dtype.is_numeric() or dtype == pl.Boolean:
            return series
        return table.cast(name, pl.Float64, "a number")
    # timestamp
    if timestamp_format is not None and dtype == pl.String:
        parsed = series.str.to_datetime(timestamp_format, strict=False, time_unit="us")
        parsed = table.check_converted(name, parsed, f"a time in the format {timestamp_format!r}")
        return parsed.dt.epoch("s")
    if dtype.is_temporal() or dtype.is_numeric():
        return series
    return table.cast(
        name, pl.Int64, "integer seconds since 1970 (give timestamp_format to parse text times)"
    )
