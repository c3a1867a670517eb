"""Delimited text files read fast with polars, with the line at fault named when reading fails.

The fast path is one ``polars.read_csv`` call. A multi-character separator (MovieLens ``::``) is
replaced by a control character first, and a file in another encoding is re-encoded to UTF-8.
A file whose fields are all plain non-negative integers (ids, ranks: the usual run and split file)
is parsed by a numba scan instead, one chunk of lines per core, about 2-3x faster than polars on
two cores; the first byte that does not fit that layout sends the file to polars, so the result
(names, Int64 columns, errors) is polars' either way.
When polars fails, a slow scan of the lines (only on that error path) finds the first line with the
wrong number of fields or a value of the wrong type, and the error names its line number.
"""

from __future__ import annotations

import codecs
import csv
import io
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from recsys_eval.core.chunks import run_chunks
from recsys_eval.errors import DataError

_UNIT_SEPARATOR = "\x1f"  # stands in for a multi-character separator; never found in text data


@dataclass
class Table:
    """A parsed table and the way back from a row to its line in the file, for error messages.

    Attributes:
        frame: the parsed rows, blank lines left out.
        what: the file (or archive member) for messages.
        first_line: line number of row 0.
        lines: line number of every row when blank lines were left out (else rows are consecutive).
        unit: "line" for text files, "row" for tables without lines (Parquet).
        notes: what was assumed in reading it (a detected format), for logs.
    """

    frame: pl.DataFrame
    what: str
    first_line: int = 1
    lines: np.ndarray | None = None
    unit: str = "line"
    notes: tuple[str, ...] = ()

    def line(self, row: int) -> int:
        """Line number (1-based) of row ``row``."""
        return int(self.lines[row]) if self.lines is not None else self.first_line + row

    def locate(self, row: int) -> str:
        """Where row ``row`` is, for messages: e.g. ``line 12``."""
        return f"{self.unit} {self.line(row):,}"

    def error(self, row: int, message: str) -> DataError:
        return DataError(f"{self.what}, {self.locate(row)}: {message}")

    def check_not_null(self, columns: Sequence[str]) -> None:
        """Raise naming the first line where one of ``columns`` is empty or missing."""
        for col in columns:
            series = self.frame.get_column(col)
            if series.null_count():
                row = int(series.is_null().arg_true()[0])
                raise self.error(row, f"no value in column {col!r} (field missing or empty)")

    def cast(self, col: str, dtype: pl.DataType, expected: str) -> pl.Series:
        """Column ``col`` cast to ``dtype``; raise naming the first value that does not convert."""
        series = self.frame.get_column(col)
        if series.dtype == dtype:
            return series
        return self.check_converted(col, series.cast(dtype, strict=False), expected)

    def check_converted(self, col: str, converted: pl.Series, expected: str) -> pl.Series:
        """``converted`` (column ``col`` converted, null where that failed), after raising naming
        the first value that was present but did not convert."""
        series = self.frame.get_column(col)
        bad = converted.is_null() & series.is_not_null()
        if bad.any():
            row = int(bad.arg_true()[0])
            raise self.error(row, f"column {col!r} has {series[row]!r}; expected {expected}")
        return converted


def read_delimited(
    source: Path | bytes,
    *,
    what: str,
    separator: str,
    header: bool,
    columns: Sequence[str] | None = None,
    dtypes: Mapping[str, pl.DataType] | None = None,
    encoding: str = "utf-8",
    quoting: bool = True,
) -> Table:
    """Parse a delimited file into a :class:`Table`.

    ``columns`` names every field in order (a header line, if any, is skipped); without it the
    names come from the header line, or are ``column_1``, ``column_2``, ... when there is none.
    ``dtypes`` fixes the type of some named fields: the others are strings when ``columns`` is
    given, else inferred by polars. Blank lines are left out.
    """
    utf8 = codecs.lookup(encoding).name == "utf-8"
    if columns is None:  # inferred types: polars reads a file of plain integers as Int64 columns
        integers = not dtypes or all(dtype.is_integer() for dtype in dtypes.values())
    else:  # unnamed types are strings
        integers = all(c in (dtypes or {}) and dtypes[c].is_integer() for c in columns)
    if isinstance(source, Path) and integers and utf8 and len(separator) == 1:
        frame = _read_integers(source, separator, header, columns)
        if frame is not None:
            types = {c: dtype for c, dtype in (dtypes or {}).items() if c in frame.columns}
            return Table(frame.cast(types) if types else frame, what, first_line=1 + int(header))
    if columns is not None and utf8 and len(separator) > 1 and len(set(separator)) == 1:
        frame = _read_repeated_separator(source, separator, header, columns, dtypes or {}, quoting)
        if frame is not None:
            return _without_blank_lines(frame, what, first_line=1 + int(header))
    data: Path | bytes = source
    if len(separator) > 1 or not utf8:
        data = _as_utf8(source, encoding, what)
        if len(separator) > 1:
            data = data.replace(separator.encode(), _UNIT_SEPARATOR.encode())
            separator = _UNIT_SEPARATOR
    options = dict(separator=separator, quote_char='"' if quoting else None, raise_if_empty=False)
    if columns is not None:
        dtypes = dict(dtypes or {})
        schema = {c: dtypes.get(c, pl.String) for c in columns}
        options.update(has_header=False, skip_rows=1 if header else 0, schema=schema)
    else:
        options.update(has_header=header, schema_overrides=dict(dtypes or {}), infer_schema_length=10_000)
    try:
        frame = pl.read_csv(_reader(data), **options)
    except (pl.exceptions.PolarsError, OSError) as exc:
        frame = _retry_as_strings(data, options, columns, dtypes, exc, what, header)
    if columns is None and not header:  # numbered from 1, as people count fields
        frame.columns = [f"column_{i}" for i in range(1, frame.width + 1)]
    return _without_blank_lines(frame, what, first_line=1 + int(header))


def _read_integers(path: Path, separator: str, header: bool, columns: Sequence[str] | None) -> pl.DataFrame | None:
    """The file as Int64 columns when every field of every line is a non-negative integer of at
    most 18 digits (lines end in ``\n`` or ``\r\n``, no blank line, no quote), else None.

    Names come from ``columns``, the header line or ``column_1``, ``column_2``, ...; a header
    that is not plain ASCII names (quotes, repeats, empty names) also gives None."""
    # mapped, not copied: the page cache holds the bytes
    data = np.memmap(path, dtype=np.uint8, mode="r") if path.stat().st_size else np.zeros(0, dtype=np.uint8)
    first_newline = data[: 1 << 16].tobytes().find(b"\n")
    if first_newline < 0:
        return None  # a one-line file, or a first line of 64 KB: not an id file
    start = 0
    if header:
        end = first_newline
        try:
            line = bytes(data[:end]).rstrip(b"\r").decode("ascii")
        except UnicodeDecodeError:
            return None
        names = line.split(separator)
        if '"' in line or len(set(names)) < len(names) or not all(n.isprintable() and n for n in names):
            return None
        start = end + 1
    else:
        first = data[:first_newline]
        names = [f"column_{i}" for i in range(1, int((first == ord(separator)).sum()) + 2)]
    if columns is not None:
        if len(columns) != len(names):
            return None
        names = list(columns)
    if start >= len(data):
        return None
    from numba import get_num_threads

    from recsys_eval.data import kernels

    bounds = _chunk_bounds(data, start, 4 * get_num_threads())  # a few per thread, for balance
    lines = np.zeros(len(bounds) - 1, dtype=np.int64)
    run_chunks(kernels.count_lines, bounds, data, lines, index=True)
    out = np.empty((len(names), int(lines.sum())), dtype=np.int64)
    first_rows = np.cumsum(lines) - lines
    failed = np.full(len(bounds) - 1, -1, dtype=np.int64)
    run_chunks(kernels.parse_integers, bounds, data, ord(separator), out, first_rows, failed, index=True)
    if (failed >= 0).any():
        return None
    return pl.DataFrame([pl.Series(name, out[f]) for f, name in enumerate(names)])


def _chunk_bounds(data: np.ndarray, start: int, n: int) -> np.ndarray:
    """``n`` (or fewer) byte ranges of whole lines, ``start`` to the end; small files are one."""
    n = max(1, min(n, (len(data) - start) >> 22))
    bounds = [start]
    for j in range(1, n):
        cut = start + (len(data) - start) * j // n
        newline = data[cut : cut + (1 << 16)].tobytes().find(b"\n")  # lines are short: look near the cut
        if newline >= 0 and cut + newline + 1 > bounds[-1]:
            bounds.append(cut + newline + 1)
    return np.array([*bounds, len(data)], dtype=np.int64)

def _read_repeated_separator(source, separator, header, columns, dtypes, quoting) -> pl.DataFrame | None:
    """A separator of one repeated character (``::``) read as that character with empty fields
    between the real ones, without copying the file; None when a line does not fit that layout
    (a single ``:`` inside a field), and the caller reads the file the general way."""
    schema: dict[str, pl.DataType] = {}
    for position, name in enumerate(columns):
        if position:
            schema.update({f"_gap{position}_{j}": pl.String for j in range(len(separator) - 1)})
        schema[name] = dtypes.get(name, pl.String)
    gaps = [name for name in schema if name.startswith("_gap")]
    try:
        frame = pl.read_csv(
            _reader(source),
            has_header=False,
            skip_rows=int(header),
            separator=separator[0],
            quote_char='"' if quoting else None,
            schema=schema,
            raise_if_empty=False,
        )
    except (pl.exceptions.PolarsError, OSError):
        return None
    if any(frame.select(pl.col(gaps).is_not_null().any()).row(0)):
        return None
    return frame.drop(gaps)


def _as_utf8(source: Path | bytes, encoding: str, what: str) -> bytes:
    raw = source.read_bytes() if isinstance(source, Path) else source
    if codecs.lookup(encoding).name == "utf-8":
        return raw
    try:
        return raw.decode(encoding).encode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"{what}, line {line:,}: bytes that are not {encoding} text") from None


def _reader(data: Path | bytes) -> Path | io.BytesIO:
    return io.BytesIO(data) if isinstance(data, bytes) else data


def _retry_as_strings(data, options, columns, dtypes, error, what, header) -> pl.DataFrame:
    """After a failed typed read: find the bad line, or read every field as a string."""
    if columns is not None:
        n_fields: int | None = len(columns)
        types = {i: dtypes[c] for i, c in enumerate(columns) if c in (dtypes or {})}
    else:  # inferred types: re-read every field as a string, the caller casts and names lines
        try:
            return pl.read_csv(_reader(data), **{**options, "infer_schema": False, "schema_overrides": None})
        except (pl.exceptions.PolarsError, OSError):
            n_fields, types = None, {}
    found = _scan_for_bad_line(
        data, options["separator"], options["quote_char"] is not None, header, n_fields, types, columns
    )
    if found is not None:
        raise DataError(f"{what}, line {found[0]:,}: {found[1]}") from None
    text = str(error).strip()
    raise DataError(
        f"{what}: cannot be parsed: {text.splitlines()[0] if text else type(error).__name__}"
    ) from None


class _NotUtf8(Exception):
    def __init__(self, line: int) -> None:
        self.line = line


def _lines(data: Path | bytes) -> Iterator[str]:
    stream = data.open("rb") if isinstance(data, Path) else io.BytesIO(data)
    with stream:
        for number, raw in enumerate(stream, start=1):
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError:
                raise _NotUtf8(number) from None


def _expected(dtype: pl.DataType) -> tuple[type, str] | None:
    if dtype.is_integer():
        return int, "an integer"
    if dtype.is_float():
        return float, "a number"
    return None


def _scan_for_bad_line(data, separator, quoting, header, n_fields, types, columns):
    """(line number, problem) of the first bad line, or None. Slow: only run after an error."""
    quotes = csv.QUOTE_MINIMAL if quoting else csv.QUOTE_NONE
    reader = csv.reader(_lines(data), delimiter=separator, quoting=quotes, strict=True)
    shown = "the separator" if separator == _UNIT_SEPARATOR else repr(separator)
    try:
        for record in reader:
            if header and reader.line_num == 1:
                n_fields = n_fields if n_fields is not None else len(record)
                continue
            if not record:
                continue
            n_fields = len(record) if n_fields is None else n_fields
            if len(record) != n_fields:
                return reader.line_num, f"{len(record)} fields separated by {shown}; expected {n_fields}"
            for index, dtype in types.items():
                expected = _expected(dtype)
                if expected is None or record[index] == "":
                    continue
                try:
                    expected[0](record[index])
                except ValueError:
                    name = columns[index] if columns else f"field {index + 1}"
                    return reader.line_num, f"column {name!r} has {record[index]!r}; expected {expected[1]}"
    except _NotUtf8 as exc:
        return exc.line, "bytes that are not UTF-8 text"
    except csv.Error as exc:
        return reader.line_num, f"malformed line ({exc})"
    return None


def _without_blank_lines(frame: pl.DataFrame, what: str, first_line: int) -> Table:
    """Leave out rows that are null in every column (blank lines), keeping their line numbers."""
    if frame.width == 0 or not any(frame.null_count().row(0)):
        return Table(frame, what, first_line)
    blank = frame.select(pl.all_horizontal(pl.all().is_null())).to_series()
    if not blank.any():
        return Table(frame, what, first_line)
    keep = (~blank).to_numpy()
    lines = (np.arange(frame.height, dtype=np.int64) + first_line)[keep]
    return Table(frame.filter(~blank), what, first_line, lines)
