"""Checks of the columns of a user's table (a run, a test file): numbers and unique keys.

Shared by the run readers of the measure and recommend stages so that the same bad file gets the
same message, naming the file, the column and an example of the value or pair at fault.
"""

from __future__ import annotations

import polars as pl

from recsys_eval.errors import DataError


def numeric_column(frame: pl.DataFrame, column: str, source: str) -> pl.Series:
    """``column`` as Float64. Text (a CSV column holding "nan" or "inf" is read as text) is parsed;
    text that is no number, a non-numeric type, and empty, NaN or infinite values are errors."""
    values = frame.get_column(column)
    if values.dtype == pl.String:
        parsed = values.str.strip_chars().cast(pl.Float64, strict=False)
        unparsed = parsed.is_null() & values.is_not_null()
        if unparsed.any():
            raise DataError(f"{source}: column {column!r} is not numeric (e.g. {values.filter(unparsed)[0]!r})")
        values = parsed
    elif not values.dtype.is_numeric():
        raise DataError(f"{source}: column {column!r} has type {values.dtype}; expected numbers")
    values = values.cast(pl.Float64)
    bad = values.is_null() | values.is_nan() | values.is_infinite()
    if bad.any():
        first = int(bad.arg_true()[0])
        row = frame.row(first, named=True)
        raise DataError(
            f"{source}: column {column!r} has {int(bad.sum()):,} NaN or infinite (or empty) values "
            f"(first at row {first + 1}: user {row['user']!r}, item {row['item']!r})"
        )
    return values


def check_unique(frame: pl.DataFrame, key: list[str], source: str, hint: str) -> None:
    """An error naming the count and an example when rows repeat a ``key`` combination."""
    dup = frame.select(key).is_duplicated()
    if dup.any():
        row = frame.filter(dup).row(0, named=True)
        shown = ", ".join(f"{c} {row[c]!r}" for c in key)
        raise DataError(
            f"{source}: {int(dup.sum()):,} rows repeat a ({', '.join(key)}) pair, e.g. {shown}; {hint}"
        )


def check_ranks(run: pl.DataFrame, source: str) -> None:
    """Integer ranks (column ``rank``) must be unique per user and run 1..L for a list of L items."""
    check_unique(run, ["user", "rank"], source, "each rank appears once per user")
    wrong = run.group_by("user").agg(
        pl.col("rank").min().alias("low"), pl.col("rank").max().alias("high"), pl.len().alias("n")
    ).filter((pl.col("low") != 1) | (pl.col("high") != pl.col("n")))
    if wrong.height:
        row = wrong.sort("user").row(0, named=True)
        raise DataError(
            f"{source}: ranks of {wrong.height:,} users are not 1..L, e.g. user {row['user']!r} has "
            f"{row['n']} rows with ranks {row['low']}..{row['high']}; expected 1, 2, ..., L"
        )
