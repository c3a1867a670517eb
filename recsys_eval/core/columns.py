"""Checks of the columns of a user's table (interactions, a run, judgments): ids and numbers.

Every reader of a user's file goes through these, so that the same bad file gets the same message,
naming the file, the column, the row (or line) and the value at fault, and what was expected.
``locate`` turns a row number (0-based, of the parsed table) into the place a user can find: a line
of a text file, a row of a Parquet file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from recsys_eval.errors import DataError

Locate = Callable[[int], str]

# Text that stands for a missing value in the files people write (pandas' NaN written by to_csv,
# R's NA, SQL's NULL, Python's None): never an id.
MISSING_TEXT = ("", "nan", "na", "n/a", "null", "none", "<na>")


def polars_frame(frame: Any, name: str) -> pl.DataFrame:
    """``frame`` as a polars DataFrame: a polars one as it is, a pandas one converted (pandas is
    taken wherever a table is, at the interop edge), anything else refused naming ``name``."""
    if isinstance(frame, pl.DataFrame):
        return frame
    if type(frame).__module__.split(".")[0] == "pandas" and type(frame).__name__ == "DataFrame":
        try:
            return pl.from_pandas(frame)
        except (pl.exceptions.PolarsError, TypeError, ValueError, ImportError) as exc:
            text = str(exc).strip()
            reason = text.splitlines()[0] if text else type(exc).__name__
            raise DataError(f"{name}: this pandas DataFrame cannot be read ({reason})") from None
    raise DataError(f"{name}: expected a polars or a pandas DataFrame, got {type(frame).__name__}")


def row_of(row: int) -> str:
    """The default ``locate``: rows counted from 1."""
    return f"row {row + 1:,}"


def id_column(frame: pl.DataFrame, column: str, source: str, locate: Locate = row_of) -> pl.Series:
    """``column`` as ids a shared index accepts: Int64 or String.

    Refused, whatever the column's type: empty values, NaN, and text that stands for a missing value
    (``MISSING_TEXT``, e.g. the ``nan`` pandas writes into an integer column, which makes the whole
    column text). Float ids must be whole numbers (``12.0`` is the id 12); text ids that are all
    integers become integers, so that they match the same ids written as numbers in another file.
    """
    values = frame.get_column(column)
    dtype = values.dtype
    if dtype in (pl.Categorical, pl.Enum) or isinstance(dtype, (pl.Categorical, pl.Enum)):
        values, dtype = values.cast(pl.String), pl.String
    if dtype.is_integer():
        bad = values.is_null() if values.null_count() else None
        expected, converted = "an id", values.cast(pl.Int64)
    elif dtype.is_float():
        bad = values.is_null() | values.is_nan() | values.is_infinite() | (values != values.floor())
        expected, converted = "a whole-number id", values
    elif dtype == pl.String:
        bad = values.is_null() | values.str.strip_chars().str.to_lowercase().is_in(MISSING_TEXT)
        expected, converted = "an id (this text stands for a missing value)", values
    else:
        raise DataError(f"{source}: column {column!r} has type {dtype}; expected integer or text ids")
    if bad is not None and bad.any():
        row = int(bad.arg_true()[0])
        raise DataError(
            f"{source}: column {column!r} has {int(bad.sum()):,} missing or unusable ids (first at "
            f"{locate(row)}: {values[row]!r}); expected {expected} in every row"
        )
    if dtype.is_float():
        converted = values.cast(pl.Int64)
    elif dtype == pl.String:
        as_int = values.cast(pl.Int64, strict=False)
        converted = as_int if not as_int.null_count() else values
    return converted.rename(column)


def numeric_column(
    frame: pl.DataFrame, column: str, source: str, locate: Locate = row_of, *, whole: bool = False
) -> pl.Series:
    """``column`` as Float64. Text (a CSV column holding "nan" or "inf" is read as text) is parsed;
    text that is no number, a non-numeric type, and empty, NaN or infinite values are errors; with
    ``whole``, so are numbers with a fraction (ranks)."""
    values = frame.get_column(column)
    if values.dtype == pl.String:
        parsed = values.str.strip_chars().cast(pl.Float64, strict=False)
        unparsed = parsed.is_null() & values.is_not_null()
        if unparsed.any():
            row = int(unparsed.arg_true()[0])
            raise DataError(
                f"{source}: column {column!r} is not numeric (first at {locate(row)}: {values[row]!r}); "
                "expected numbers"
            )
        values = parsed
    elif not (values.dtype.is_numeric() or values.dtype == pl.Boolean):
        raise DataError(f"{source}: column {column!r} has type {values.dtype}; expected numbers")
    values = values.cast(pl.Float64)
    bad = values.is_null() | values.is_nan() | values.is_infinite()
    if bad.any():
        row = int(bad.arg_true()[0])
        keys = "".join(f", {c} {frame[row, c]!r}" for c in ("user", "item") if c in frame.columns)
        raise DataError(
            f"{source}: column {column!r} has {int(bad.sum()):,} NaN or infinite (or empty) values "
            f"(first at {locate(row)}{keys}); expected finite numbers"
        )
    if whole:
        fraction = values != values.floor()
        if fraction.any():
            row = int(fraction.arg_true()[0])
            raise DataError(
                f"{source}: column {column!r} holds non-integer values (first at {locate(row)}: "
                f"{values[row]!r}); expected whole numbers"
            )
    return values.rename(column)
