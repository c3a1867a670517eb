"""Runs and judgments from the files people write them in, with one set of checks.

A **run** is a system's ranked lists: ``user, item`` and ``score`` (higher is better) or ``rank`` (1 is
best; with a score too, the order is the rank's and the score breaks nothing, ranks being unique).
**Judgments** are what a run is measured against (test interactions, qrels): ``user, item`` and an
optional ``rating`` (a grade).

Formats, from the file's extension or ``format=``:

========== ===================================== ==========================================
format     extensions                            layout
========== ===================================== ==========================================
csv        .csv, .txt                            header line naming the columns
tsv        .tsv                                  header line naming the columns
parquet    .parquet, .pq                         columns named as above
trec       .trec, .run (runs), .qrels            ``qid Q0 docid rank score tag`` (runs, ordered
                                                 by score as trec_eval and ranx do: the rank
                                                 field is not read); ``qid 0 docid rel`` (qrels)
ranx       .json                                 ``{"user": {"item": score or grade}}``
elliot     (detected, or ``format="elliot"``)    header-less TSV: ``user item score`` (runs),
                                                 ``user item rating [timestamp]`` (judgments)
recbole,   .inter (RecBole), or detected from    other frameworks' layouts, read by
lenskit,   the columns                           :mod:`recsys_eval.data.run_formats`
replay,
msrecomm.
========== ===================================== ==========================================

Without ``format=``, a table whose columns are another framework's, or a text file whose first line
is no header (TREC, Elliot), is detected as such and says so in a note (``RunInput.notes``).

``columns=["user", "item", "score"]`` reads a csv or tsv file without a header line, naming its
fields in order (``_`` skips a field). pandas and polars DataFrames are taken wherever a file is.

The checks, the same for every format and every caller (``recsys-eval evaluate``, an external run in an
experiment config, the API): ids present in every row whatever their type (no empty, NaN or ``nan``
text, see :func:`recsys_eval.core.columns.id_column`), numeric finite scores, ranks and ratings, no
repeated (user, item) pair, ranks exactly 1..L per user, a file with rows. Every message names the
file, the column, the row or line and the value at fault. Repeats and ranks are found in one pass
over each user's rows (after one counting sort by user) that marks the user's items in an item-sized
array and puts each row in the slot of its rank: no hashing of pairs, no sort of the rows. A file
already grouped by user (and a run already in rank order, a TEST in item order) is used in its own
order, without a list of its rows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl

from recsys_eval._lazy import import_meanwhile
from recsys_eval.core import atomic
from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.columns import id_column, numeric_column, polars_frame
from recsys_eval.core.units import Rankings, Targets
from recsys_eval.data import run_formats
from recsys_eval.data.delimited import Table, read_delimited
from recsys_eval.errors import ConfigError, DataError, check_choice

Kind = Literal["run", "judgments"]
FORMATS = ("csv", "tsv", "parquet", "trec", "ranx", "elliot", *run_formats.FRAMEWORK_FORMATS)
SUFFIX_FORMATS = {
    ".csv": "csv", ".txt": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet",
    ".trec": "trec", ".run": "trec", ".qrels": "trec", ".json": "ranx",
}
# Judgment formats whose grades start at 0 for "judged non-relevant" (trec_eval's relevance level 1).
GRADED_FORMATS = ("trec", "ranx")
#: The named fields of header-less files (``_``: a field that is read and ignored).
LAYOUTS = {
    ("trec", "run"): ("user", "_", "item", "_", "score", "_"),
    ("trec", "judgments"): ("user", "_", "item", "rating"),
    ("elliot", "run"): ("user", "item", "score"),
    ("elliot", "judgments"): ("user", "item", "rating", "timestamp"),
}
_VALUES = {"run": ("score", "rank"), "judgments": ("rating",)}
Source = str | Path | pl.DataFrame | Any  # Any: a pandas DataFrame (pandas is only met at this edge)


# -- reading ---------------------------------------------------------------------------------------
def format_of(source: Source, format: str | None = None, kind: Kind = "run") -> str:
    """The format of ``source``: ``format`` if given, else from the file's extension and, where
    that is not enough, its columns or first line (:func:`detect_format`)."""
    return detect_format(source, format, kind, _name(source)).format


def detect_format(source: Source, format: str | None, kind: Kind, name: str, *,
                  sniff: bool = True) -> run_formats.Detected:
    """``format`` checked, or the format detected with a note saying how (see
    :func:`recsys_eval.data.run_formats.detect`); with ``sniff`` false, from the extension only
    (a header-less file whose fields are named)."""
    if format is not None:
        return run_formats.Detected(check_choice("format", format, FORMATS))
    suffix = Path(source).suffix.lower() if isinstance(source, (str, Path)) else None
    known = suffix is None or suffix in SUFFIX_FORMATS or suffix == run_formats.RECBOLE_SUFFIX
    if not known and not Path(source).is_file():
        raise ConfigError(
            f"{source}: cannot tell the format from the extension {suffix!r}; expected one of "
            f"{', '.join(sorted(SUFFIX_FORMATS))}, or give the format ({', '.join(FORMATS)})"
        )
    if not sniff:
        return run_formats.Detected(SUFFIX_FORMATS.get(suffix, "csv") if suffix else "parquet")
    return run_formats.detect(source, kind, SUFFIX_FORMATS.get(suffix) if suffix else None, name)


def averaging_default(test: Source, format: str | None = None) -> tuple[str, str | None]:
    """The undefined-value policy a TEST input implies, and the note that says so: ``zero`` for TREC
    qrels and ranx judgments, whose convention (trec_eval's, ranx's) averages over every judged
    user, one with no relevant item scoring 0; ``skip`` for the others, the documented default
    (docs/CONVENTIONS.md#undefined-values)."""
    if format_of(test, format, "judgments") in GRADED_FORMATS:
        return "zero", ("users with no relevant item count as zero in the means (trec_eval's averaging, for TREC "
                        "and ranx judgments); undefined='skip' (--undefined skip) leaves them out")
    return "skip", None


def read_table(
    source: Source,
    kind: Kind,
    *,
    format: str | None = None,
    columns: Sequence[str] | None = None,
    name: str | None = None,
) -> Table:
    """Read a run or judgments from a file or DataFrame and check its columns (not yet its keys:
    see :func:`read_run` and :func:`read_judgments`, or :func:`load_run` for several files at once).
    The table's frame holds ``user, item`` (Int64 or String ids) and the kind's value columns
    (Float64; ``rank`` Int64)."""
    check_choice("kind of table", kind, ("run", "judgments"))
    name = name or _name(source)
    detected = detect_format(source, format, kind, name, sniff=columns is None)
    table = _read(source, kind, detected.format, columns, name)
    frame, name, locate = table.frame, table.what, table.locate
    required = ["user", "item"]
    missing = [c for c in required if c not in frame.columns]
    values = [c for c in _VALUES[kind] if c in frame.columns]
    if kind == "run" and not values:
        missing.append("score or rank")
    if missing:
        raise DataError(
            f"{name}: missing column(s) {', '.join(missing)}; expected user, item and "
            + ("score (higher is better) or rank (1 is best)" if kind == "run" else "optionally rating")
            + f"; the columns are {frame.columns} (another framework's layout? give the format, one of "
            + f"{', '.join(FORMATS)})"
        )
    if frame.height == 0:
        raise DataError(f"{name}: has a header and no rows; expected at least one {kind} row")
    if kind == "run":
        _one_system(frame, name)
    out = {c: id_column(frame, c, name, locate) for c in required}
    for column in values:
        given = frame.get_column(column)
        if column == "rank" and given.dtype.is_integer() and not given.null_count():
            out[column] = given.cast(pl.Int64)  # whole and finite already
            continue
        number = numeric_column(frame, column, name, locate, whole=column == "rank")
        out[column] = number.cast(pl.Int64) if column == "rank" else number
    # A Parquet file comes in one chunk per row group. The ids stay so (the index reads each chunk in
    # place); each value column is made one chunk, so that every later to_numpy() of it is a view.
    out.update((column, out[column].rechunk()) for column in values)
    notes = (*table.notes, *([detected.note] if detected.note else []))
    return Table(pl.DataFrame(out), name, table.first_line, table.lines, table.unit, notes)


def _one_system(frame: pl.DataFrame, name: str) -> None:
    """A run is one system's lists: a ``system`` column with several labels would repeat the pairs
    the systems share, which is refused here, naming the systems, rather than as repeated pairs."""
    if "system" not in frame.columns:
        return
    labels = frame.get_column("system").unique(maintain_order=True)
    if labels.len() > 1:
        shown = ", ".join(repr(v) for v in labels.head(4).to_list()) + (", ..." if labels.len() > 4 else "")
        raise DataError(
            f"{name}: column 'system' holds {labels.len():,} systems ({shown}); a run is one system's ranked "
            "lists: give each system's rows on their own, or call recsys_eval.evaluate(run, test), which "
            "scores every system of a 'system' column"
        )


def read_run(source: Source, *, format: str | None = None, columns: Sequence[str] | None = None,
             name: str | None = None) -> pl.DataFrame:
    """A run, every check done: ``user, item`` and ``score`` and/or ``rank`` (see the module)."""
    return _read_checked(source, "run", format, columns, name)


def read_judgments(source: Source, *, format: str | None = None, columns: Sequence[str] | None = None,
                   name: str | None = None) -> pl.DataFrame:
    """Judgments, every check done: ``user, item`` and optionally ``rating``."""
    return _read_checked(source, "judgments", format, columns, name)


def _read_checked(source: Source, kind: Kind, format, columns, name) -> pl.DataFrame:
    table = read_table(source, kind, format=format, columns=columns, name=name)
    index = Index.of([table])
    check_rows(table, index.user[0], index.item[0], index)
    return table.frame


def read_frame(source: Source, *, format: str | None = None, name: str | None = None) -> pl.DataFrame:
    """Any table with a header (csv, tsv, parquet or a DataFrame) as it is, e.g. item genres."""
    fmt = format_of(source, format)
    if fmt not in ("csv", "tsv", "parquet"):
        raise ConfigError(f"{name or _name(source)}: a {fmt} file holds a run or judgments, not a table")
    return _read(source, "judgments", fmt, None, name or _name(source)).frame


def _name(source: Source) -> str:
    return str(source) if isinstance(source, (str, Path)) else f"{type(source).__name__} argument"


def _read(source: Source, kind: str, fmt: str, columns: Sequence[str] | None, name: str) -> Table:
    if columns is not None and fmt in ("parquet", "ranx"):
        raise ConfigError(f"{name}: columns name the fields of a header-less text file, not of a {fmt} table")
    if fmt in run_formats.FRAMEWORK_FORMATS:
        return run_formats.read_framework(source, fmt, kind, name)
    if not isinstance(source, (str, Path)):
        return Table(polars_frame(source, name), name, unit="row")
    path = run_formats.existing_file(source, name)
    if fmt == "parquet":
        return Table(run_formats.read_parquet(path, name), name, unit="row")
    if fmt == "ranx":
        return Table(_read_ranx(path, kind, name), name, unit="entry")
    layout = list(columns) if columns is not None else LAYOUTS.get((fmt, kind))
    if layout is None:  # csv, tsv with a header line
        table = read_delimited(path, what=name, separator="\t" if fmt == "tsv" else ",", header=True)
    else:
        separator = "," if fmt == "csv" else "\t" if fmt != "trec" else _trec_separator(path, len(layout), name)
        data = path if separator is not None else re.sub(rb"[ \t]+", b" ", path.read_bytes())
        table = read_delimited(data, what=name, separator=separator or " ", header=False, quoting=fmt != "trec")
        table.frame.columns = _layout_names(table.frame.width, layout, fmt, kind, name)
        table.frame = table.frame.select(c for c in table.frame.columns if not c.startswith("_"))
    return table


def _layout_names(width: int, layout: list[str], fmt: str, kind: str, name: str) -> list[str]:
    """Field names of a header-less file: ``layout``, or its first ``width`` names where the rest
    are optional (Elliot's timestamp, TREC's trailing fields)."""
    required, most = layout_width(layout, fmt, kind)
    if width == 0 or not required <= width <= most:
        shown = " ".join(c if not c.startswith("_") else "(ignored)" for c in layout)
        raise DataError(f"{name}: {width} fields per line; expected {len(layout)} ({shown})")
    names = [c if not c.startswith("_") else f"_{i}" for i, c in enumerate(layout[:width])]
    return names


def layout_width(layout: list[str] | tuple[str, ...], fmt: str, kind: str) -> tuple[int, int]:
    """The fewest and most fields a line of a header-less file may have: all of ``layout``, but
    TREC's tag and the judgments' trailing fields, which may be absent."""
    required = 3 if fmt in ("trec", "elliot") and kind == "judgments" else len(layout)
    if fmt == "trec" and kind == "run":
        required = 5  # qid Q0 docid rank score; the tag may be absent
    return required, len(layout)


def _trec_separator(path: Path, fields: int, name: str) -> str | None:
    """The single separator of a TREC file (space or tab) from its first line; None when fields
    are separated by runs of blanks (the file is then normalised before parsing)."""
    with open(path, "rb") as stream:
        first = stream.readline(1 << 16).strip()
    for separator in (b" ", b"\t"):
        parts = first.split(separator)
        if len(parts) in (fields, fields - 1) and all(p and len(p.split()) == 1 for p in parts):
            return separator.decode()
    if first and len(first.split()) in (fields, fields - 1):
        return None
    if not first:
        raise DataError(f"{name}: is empty; expected lines of {fields} fields")
    raise DataError(f"{name}, line 1: {len(first.split())} fields; expected {fields} (TREC format)")


def _read_ranx(path: Path, kind: str, name: str) -> pl.DataFrame:
    """ranx's JSON (``Run.save``/``Qrels.save``): ``{"user": {"item": value}}``."""
    try:
        data = json.loads(path.read_bytes())
    except UnicodeDecodeError as exc:
        raise DataError(f"{name}: bytes that are not UTF-8 text at byte {exc.start:,}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{name}, line {exc.lineno:,}: not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise DataError(f"{name}: expected a JSON object {{user: {{item: value}}}}, got {type(data).__name__}")
    users, items, values = [], [], []
    for user, ranked in data.items():
        if not isinstance(ranked, dict):
            raise DataError(f"{name}: user {user!r} maps to {type(ranked).__name__}; expected {{item: value}}")
        users.extend([user] * len(ranked))
        items.extend(ranked)
        values.extend(v if isinstance(v, (int, float)) and not isinstance(v, bool) else None for v in ranked.values())
    value = "score" if kind == "run" else "rating"
    return pl.DataFrame(
        {"user": users, "item": items, value: values},
        schema={"user": pl.String, "item": pl.String, value: pl.Float64},
    )


# -- one index over several tables -----------------------------------------------------------------
@dataclass(frozen=True)
class Index:
    """Raw ids of the users and items of several tables, sorted, and every table's codes into them.

    Integer ids whose range is at most a few times the row count are indexed by their offset from
    the smallest (passes over each column's chunks in place, see :func:`_dense_index`), others by
    one sort; text ids by one sort. When tables disagree on the id type (integers in
    one, text in another), ids are compared as text.
    """

    user_ids: pl.Series
    item_ids: pl.Series
    user: list[np.ndarray]  # int32 codes per table
    item: list[np.ndarray]

    @classmethod
    def of(cls, tables: Sequence[Table]) -> Index:
        with _threads() as pool:  # users and items side by side (the kernels release the GIL)
            users = pool.submit(_index, [t.frame.get_column("user") for t in tables])
            item_ids, item = _index([t.frame.get_column("item") for t in tables])
            user_ids, user = users.result()
        return cls(user_ids.rename("user"), item_ids.rename("item"), user, item)


def _index(columns: list[pl.Series]) -> tuple[pl.Series, list[np.ndarray]]:
    if any(c.dtype == pl.String for c in columns):
        columns = [c.cast(pl.String) for c in columns]
    if columns[0].dtype.is_integer():
        indexed = _dense_index(columns)
        if indexed is not None:
            return indexed
    sizes = np.cumsum([0] + [c.len() for c in columns])
    values = pl.concat(columns)  # one sort; equal neighbours share a code
    order = values.arg_sort().to_numpy()
    ordered = values.gather(order)
    new = np.ones(len(order), dtype=bool)
    new[1:] = (ordered.slice(1) != ordered.slice(0, len(order) - 1)).to_numpy()
    codes = np.empty(len(order), dtype=np.int32)
    codes[order] = np.cumsum(new) - 1
    ids = ordered.filter(pl.Series(new))
    return ids, [codes[a:b] for a, b in zip(sizes[:-1], sizes[1:], strict=True)]


def _dense_index(columns: list[pl.Series]) -> tuple[pl.Series, list[np.ndarray]] | None:
    """The index of integer ids whose range is at most a few times the row count (None for a
    wider one): the range in one pass, then codes ``id - low`` written chunk by chunk of each
    column, read in place (no copy into one buffer), renumbered through a lookup table when some
    ids of the range are absent. No sort."""
    from recsys_eval.data import kernels

    chunks = [[chunk.to_numpy() for chunk in column.get_chunks()] for column in columns]  # views: no nulls
    low, high = kernels.id_range([values for column in chunks for values in column if len(values)])
    if high - low >= min(max(4 * sum(c.len() for c in columns), 1 << 20), 1 << 31):  # codes are int32
        return None
    present = np.zeros(high - low + 1, dtype=np.bool_)
    codes = [np.empty(c.len(), dtype=np.int32) for c in columns]
    for column, out in zip(chunks, codes, strict=True):
        at = 0
        for values in column:
            kernels.offset_codes(values, low, present, out[at:at + len(values)])
            at += len(values)
    if not present.all():
        code_of = (np.cumsum(present, dtype=np.int64) - 1).astype(np.int32)
        for out in codes:
            kernels.lookup_codes(out, 0, code_of, out)
    return pl.Series(np.flatnonzero(present) + low), codes


def _threads() -> ThreadPoolExecutor:
    """A pool for a few different kernels side by side. Not the chunk pool of
    :mod:`recsys_eval.core.chunks`: a task here may itself wait on chunks run there."""
    from numba import get_num_threads

    return ThreadPoolExecutor(max_workers=get_num_threads())


# -- grouping and checking each user's rows --------------------------------------------------------
@dataclass(frozen=True)
class Grouped:
    """A table's rows grouped by user code: user ``u``'s rows are ``rows[offsets[u]:offsets[u + 1]]``
    in file order; for a run, ``by_rank`` holds the same rows best first (ties by item). Either is
    empty when it is the table's own order (:func:`recsys_eval.data.kernels.row_at`)."""

    offsets: np.ndarray
    rows: np.ndarray
    by_rank: np.ndarray | None


def check_rows(table: Table, user: np.ndarray, item: np.ndarray, index: Index) -> Grouped:
    """Group ``table``'s rows by user, and refuse repeated (user, item) pairs and ranks that are
    not 1..L: the checks every run and judgments table gets.

    One counting sort by user, then one pass over each user's rows that marks its items in an
    item-sized array (a repeat finds its item marked) and puts each row in the slot of its rank,
    unless the file lists every user's rows in rank order already (one pass over the ranks)."""
    from recsys_eval.data import kernels

    frame = table.frame
    is_run = "score" in frame.columns or "rank" in frame.columns
    has_rank = "rank" in frame.columns
    rank = frame.get_column("rank").to_numpy() if has_rank else np.zeros(0, dtype=np.int64)
    rows, offsets = group_by_user(user, index.user_ids.len())
    if has_rank and not len(rows) and kernels.ranks_in_order(offsets, rank):
        rank = np.zeros(0, dtype=np.int64)  # checked: by_rank is the table's own order
    by_rank = np.full(len(rank), -1, dtype=np.int64)
    n_repeats, repeat, earlier, n_bad, bad_user = kernels.check_user_rows(offsets, rows, item, index.item_ids.len(), rank, by_rank)
    if n_repeats:
        u, i = index.user_ids[int(user[repeat])], index.item_ids[int(item[repeat])]
        raise DataError(
            f"{table.what}: {n_repeats:,} row(s) repeat the (user, item) pair of an earlier row, e.g. "
            f"user {u!r}, item {i!r} ({table.locate(int(earlier))}, again at {table.locate(int(repeat))}); "
            + ("a ranking lists each item once per user" if is_run else "expected one row per (user, item)")
        )
    if n_bad:
        a, b = offsets[bad_user], offsets[bad_user + 1]
        ranks = np.sort(rank[rows[a:b]] if len(rows) else rank[a:b])
        shown = ", ".join(map(str, ranks[:8])) + (", ..." if len(ranks) > 8 else "")
        raise DataError(
            f"{table.what}: column 'rank' is not 1..L for {n_bad:,} user(s), e.g. user "
            f"{index.user_ids[int(bad_user)]!r} has {b - a} rows with ranks {shown}; expected each of "
            f"1, 2, ..., {b - a} once"
        )
    if is_run and not has_rank:  # by score descending, ties by item
        by_rank = kernels.order_by_score(offsets, rows, item, -frame.get_column("score").to_numpy())
    return Grouped(offsets, rows, by_rank if is_run else None)


def group_by_user(user: np.ndarray, n_users: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by user code, stable (a counting sort; none for a file already in user order:
    its rows are then empty, see :func:`recsys_eval.data.kernels.row_at`), and each user's slice
    bounds."""
    from recsys_eval.data import kernels

    offsets, ascending = kernels.count_users(user, n_users)
    if ascending:
        return np.zeros(0, dtype=np.int64), offsets
    rows = np.empty(len(user), dtype=np.int64)
    kernels.scatter_rows(user, offsets, rows)
    return rows, offsets

def _train_pairs(train, test, run, tested, n_items, train_user) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """TRAIN's left-out counts per user, its ranked-train count and its (user, item) pairs once
    (see :func:`recsys_eval.data.kernels.train_chunk`), over chunks of users on the chunk threads.

    The pairs are counted first: when no pair repeats (the usual training split), they are TRAIN's
    rows grouped by user, taken from its codes (the codes themselves for a file in user order whose
    every user has train rows); only repeats make a second pass write each pair once."""
    from recsys_eval.data import kernels

    w_offsets, w_rows, w_item = train
    n_rows = int(w_offsets[-1])
    has_rows = np.diff(w_offsets) > 0
    users_before = np.cumsum(has_rows) - has_rows
    bounds = chunk_bounds(len(tested))
    removed = np.zeros(len(tested), dtype=np.int64)
    ranked_train, n_pairs = np.zeros(len(bounds) - 1, dtype=np.int64), np.zeros(len(bounds) - 1, dtype=np.int64)
    counted = np.zeros(0, dtype=np.int32)
    run_chunks(kernels.train_chunk, bounds, train, test, run, tested, n_items, users_before, counted, counted,
               removed, ranked_train, n_pairs, index=True)
    if n_pairs.sum() == n_rows:
        pair_user = _take(train_user, w_rows)
        if not has_rows.all():  # the train-user index skips the users without train rows
            pair_user = users_before[pair_user].astype(np.int32)
        return removed, int(ranked_train.sum()), pair_user, _take(w_item, w_rows)
    pair_user, pair_item = np.empty(n_rows, dtype=np.int32), np.empty(n_rows, dtype=np.int32)
    run_chunks(kernels.train_chunk, bounds, train, test, run, tested, n_items, users_before, pair_user, pair_item,
               np.zeros_like(removed), np.zeros_like(ranked_train), n_pairs, index=True)
    starts = w_offsets[bounds[:-1]]
    if (starts + n_pairs != w_offsets[bounds[1:]]).any():  # repeated pairs left gaps: close them
        keep = np.concatenate([np.arange(a, a + n) for a, n in zip(starts, n_pairs, strict=True)])
        pair_user, pair_item = pair_user[keep], pair_item[keep]
    return removed, int(ranked_train.sum()), pair_user, pair_item


# -- a run against judgments: what `recsys-eval evaluate` measures ---------------------------------
#: The protocol of a run measured against judgments: every item of the catalogue is a candidate.
FULL_RANKING = "AI+AR+AN"


@dataclass(frozen=True)
class RunInput:
    """A run and its judgments over one index; units are the judged users in sorted raw-id order.

    ``train`` (user: a tested user's unit number, then TRAIN's other users; item: catalogue index)
    feeds the beyond-accuracy metrics; ``notes`` say what was ignored or assumed.
    """

    rankings: Rankings
    targets: Targets
    user_ids: pl.Series
    item_ids: pl.Series
    train: pl.DataFrame | None
    notes: list[str] = field(default_factory=list)
    _pairs: tuple = field(default=(), repr=False)
    _user_ids_all: pl.Series | None = field(default=None, repr=False)

    @cached_property
    def predictions(self) -> pl.DataFrame | None:
        """``user, item, rating, prediction`` (raw ids) for the judged pairs the run scores, when the
        judgments have ratings and the run scores; for the rating metrics."""
        if not self._pairs:
            return None
        user, item, rating, prediction = self._pairs  # codes, by user then item
        return pl.DataFrame({"user": self._user_ids_all.gather(user), "item": self.item_ids.gather(item),
                             "rating": rating, "prediction": prediction})


def load_run(
    test: Source,
    run: Source,
    train: Source | None = None,
    *,
    threshold: float | None = None,
    run_format: str | None = None,
    run_columns: Sequence[str] | None = None,
    test_format: str | None = None,
    test_columns: Sequence[str] | None = None,
) -> RunInput:
    """Read and check TEST (judgments), RUN and TRAIN, and build full-ranking Targets and the
    Rankings over one index.

    - TEST: relevant rows are those with rating >= ``threshold`` (every row without one; for TREC
      qrels and ranx judgments, grade >= 1 as trec_eval counts them); the others are judged
      non-relevant (gain 0). A relevant row's gain is its rating (1 without ratings): the nDCG gain
      and half-life utility are computed from it by the measure stage.
    - RUN: units are the TEST users; a TEST user the run does not list has an empty list; RUN users
      absent from TEST are ignored (noted).
    - TRAIN (optional, ``user, item``): a user's train items leave its AUC candidates unless tested
      or ranked for it; they feed novelty and the coverage catalogue.
    The item catalogue is every item of TEST, RUN and TRAIN: the protocol is full ranking (AI+AR+AN).
    """
    import_meanwhile("recsys_eval.data.kernels:warm_up")  # numba's import overlaps the reading
    test_t = read_table(test, "judgments", format=test_format, columns=test_columns, name=f"TEST {_name(test)}")
    run_t = read_table(run, "run", format=run_format, columns=run_columns, name=f"RUN {_name(run)}")
    train_t = None if train is None else read_table(
        train, "judgments", format=test_format, columns=test_columns, name=f"TRAIN {_name(train)}")
    notes = [note for table in (test_t, run_t, train_t) if table is not None for note in table.notes]
    if threshold is None and format_of(test, test_format, "judgments") in GRADED_FORMATS and "rating" in test_t.frame.columns:
        threshold = 1.0
        notes.append(f"{test_t.what}: relevant rows are those with grade >= 1 (as trec_eval counts them)")
    return run_input(test_t, run_t, train_t, threshold=threshold, notes=notes)


def run_input(test_t: Table, run_t: Table, train_t: Table | None, *, threshold: float | None,
              notes: list[str] | None = None, catalogue: int | None = None) -> RunInput:
    """The RunInput of tables read by :func:`read_table`: their keys checked (repeats, ranks), full-
    ranking Targets and Rankings built (see :func:`load_run`).

    ``catalogue``: the size of the whole item catalogue when the tables hold only some users' rows
    (a partition of the users, as the Spark engine measures them; the units are then those users).
    The item index is the tables' own, an order-preserving numbering of the catalogue, so tie order
    and every metric are those of the whole input; the candidate count of AUC is ``catalogue`` less
    the user's own train items. The checks on the whole input (a relevant row somewhere, a user that
    TEST and RUN share) are then the caller's.
    """
    from recsys_eval.data import kernels

    notes = list(notes or [])
    gain = _gains(test_t, threshold)
    if catalogue is None and not (gain > 0).any():
        raise DataError(f"{test_t.what}: no relevant row (rating >= {threshold}): nothing to evaluate")
    tables = [test_t, run_t] + ([train_t] if train_t is not None else [])
    index = Index.of(tables)
    n_users, n_items = index.user_ids.len(), index.item_ids.len()
    t_user, r_user = index.user[0], index.user[1]
    t_item, r_item = index.item[0], index.item[1]

    with _threads() as pool:  # the tables' kernels release the GIL: one table per core
        checked = [pool.submit(check_rows, test_t, t_user, t_item, index),
                   pool.submit(check_rows, run_t, r_user, r_item, index)]
        train_grouped = pool.submit(group_by_user, index.user[2], n_users) if train_t is not None else None
        test_g, run_g = (future.result() for future in checked)
    tested = np.diff(test_g.offsets) > 0
    listed = np.diff(run_g.offsets) > 0
    if catalogue is None and not (tested & listed).any():
        raise DataError(
            f"{run_t.what} and {test_t.what} share no user: nothing to evaluate (e.g. RUN user "
            f"{index.user_ids[int(np.argmax(listed))]!r}, TEST user {index.user_ids[int(np.argmax(tested))]!r})"
        )
    only_run = listed & ~tested
    if only_run.any():
        notes.append(f"{int(only_run.sum()):,} RUN users are not in TEST and were ignored "
                     f"(e.g. {index.user_ids[int(np.argmax(only_run))]!r})")
    missing = int((tested & ~listed).sum())
    if missing:
        notes.append(f"{missing:,} TEST users have no ranked list in RUN: they count as empty lists")

    units = np.flatnonzero(tested)
    test_grouped = (test_g.offsets, test_g.rows, t_item)
    run_grouped = (run_g.offsets, run_g.rows, r_item)
    removed = np.zeros(n_users, dtype=np.int64)
    train_out = None
    with _threads() as pool:
        if train_grouped is not None:
            w_rows, w_offsets = train_grouped.result()
            train_pass = pool.submit(_train_pairs, (w_offsets, w_rows, index.item[2]), test_grouped,
                                     run_grouped, tested, n_items, index.user[2])
        t_rows = kernels.by_item(test_g.offsets, test_g.rows, t_item)  # every TEST row, by user then item
        r_rows = run_g.by_rank  # rows of TEST users, best first
        if only_run.any():
            r_rows = np.empty(int(np.diff(run_g.offsets)[units].sum()), dtype=np.int64)
            kernels.gather_users(run_g.by_rank, run_g.offsets, units, r_rows)
    if train_grouped is not None:
        removed, ranked_train, pair_user, pair_item = train_pass.result()
        if ranked_train:
            notes.append(f"RUN ranks {ranked_train:,} items that are in the same user's TRAIN: they count "
                         "as non-relevant (and as candidates for AUC)")
        train_out = pl.DataFrame({"user": _unit_numbered(pair_user, w_offsets, units, n_users), "item": pair_item})
    has_rank = "rank" in run_t.frame.columns
    scores = None if has_rank else _take(run_t.frame.get_column("score").to_numpy(), r_rows)
    unit_user = np.arange(len(units), dtype=np.int32)
    targets = Targets(
        unit_user=unit_user,
        offsets=_unit_offsets(test_g.offsets, units),
        items=_take(t_item, t_rows),
        gain=_take(gain, t_rows),
        n_items=catalogue or n_items,
        protocol=FULL_RANKING,
        all_candidates=True,
        n_candidates=(catalogue or n_items) - removed[units],
    )
    rankings = Rankings(unit_user, _unit_offsets(run_g.offsets, units), _take(r_item, r_rows), scores)
    pairs = ()
    if "rating" in test_t.frame.columns and scores is not None:
        test_rows, run_rows = kernels.judged_pairs((test_g.offsets, t_rows, t_item), run_grouped, n_items)
        pairs = (t_user[test_rows], t_item[test_rows], test_t.frame.get_column("rating").to_numpy()[test_rows],
                 run_t.frame.get_column("score").to_numpy()[run_rows])
    user_ids = index.user_ids.gather(units)
    return RunInput(rankings, targets, user_ids, index.item_ids, train_out, notes, pairs, index.user_ids)


def _unit_numbered(pair_user: np.ndarray, w_offsets: np.ndarray, units: np.ndarray, n_users: int) -> np.ndarray:
    """TRAIN's users (numbered among the users with TRAIN rows) renumbered as the units are: a tested
    user takes its unit's number, so that a unit reads its own user's profile; the users TRAIN holds
    but TEST does not (they still count in the items' popularity) come after them."""
    with_rows = np.flatnonzero(np.diff(w_offsets) > 0)
    if np.array_equal(with_rows, units):  # the usual split: the same users, already numbered alike
        return pair_user
    number = np.empty(n_users, dtype=np.int32)
    number[units] = np.arange(len(units), dtype=np.int32)
    others = np.ones(n_users, dtype=bool)
    others[units] = False
    number[others] = len(units) + np.arange(int(others.sum()), dtype=np.int32)
    return number[with_rows[pair_user]]


def _take(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values`` in the order of ``rows``: ``values`` itself when ``rows`` is empty (its own order)."""
    return values[rows] if len(rows) else values


def _unit_offsets(offsets: np.ndarray, units: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.diff(offsets)[units])]).astype(np.int64)


def _gains(test: Table, threshold: float | None) -> np.ndarray:
    """Gain of every TEST row: its rating (1 without ratings) when relevant, else 0."""
    frame = test.frame
    if "rating" not in frame.columns:
        if threshold is not None:
            raise ConfigError(f"a threshold needs ratings, but {test.what} has no 'rating' column")
        return np.ones(frame.height, dtype=np.float32)
    rating = frame.get_column("rating").to_numpy()
    relevant = rating >= threshold if threshold is not None else np.ones(len(rating), dtype=bool)
    bad = relevant & (rating <= 0)
    if bad.any():
        row = int(np.argmax(bad))
        raise DataError(
            f"{test.what}: {int(bad.sum()):,} relevant rows have a rating <= 0, which cannot be a gain "
            f"(first at {test.locate(row)}: user {frame[row, 'user']!r}, item {frame[row, 'item']!r}, "
            f"rating {rating[row]!r}); give a threshold (relevant: rating >= threshold)"
        )
    return np.where(relevant, rating, 0.0).astype(np.float32)


# -- writing ---------------------------------------------------------------------------------------
def write_trec(rankings: Rankings, path: str | Path, *, user_ids: pl.Series | None = None,
               item_ids: pl.Series | None = None, tag: str = "recsys_eval") -> None:
    """A TREC run (``user Q0 item rank score tag``), ranks 1..L; without scores, score = L - rank + 1
    (so that trec_eval and ranx, which order by score, see the same order)."""
    frame = _ranked_frame(rankings, user_ids, item_ids)
    lines = frame.select(
        pl.format("{} Q0 {} {} {} {}", "user", "item", "rank", "score", pl.lit(tag)).alias("line")
    )
    _write_atomically(Path(path), lambda p: lines.write_csv(p, include_header=False, quote_style="never"))


def write_ranx(rankings: Rankings, path: str | Path, *, user_ids: pl.Series | None = None,
               item_ids: pl.Series | None = None) -> None:
    """A ranx JSON run ``{"user": {"item": score}}`` (``ranx.Run.from_file`` reads it)."""
    data = _ranx_dict(rankings, user_ids, item_ids)
    _write_atomically(Path(path), lambda p: Path(p).write_text(json.dumps(data)))


def _ranked_frame(rankings: Rankings, user_ids: pl.Series | None, item_ids: pl.Series | None) -> pl.DataFrame:
    frame = rankings.to_frame()
    if rankings.scores is None:
        length = np.diff(rankings.offsets)[frame.get_column("unit").to_numpy()]
        frame = frame.with_columns(pl.Series("score", length - frame.get_column("rank").to_numpy() + 1.0))
    return _raw_ids(frame, user_ids, item_ids).select("user", "item", "rank", "score")


def _raw_ids(frame: pl.DataFrame, user_ids: pl.Series | None, item_ids: pl.Series | None) -> pl.DataFrame:
    """``frame``'s ``user`` and ``item`` indices replaced by the raw ids, where given."""
    for column, ids in (("user", user_ids), ("item", item_ids)):
        if ids is not None:
            frame = frame.with_columns(pl.Series(ids).gather(frame.get_column(column)).alias(column))
    return frame


def _ranx_dict(rankings: Rankings, user_ids, item_ids) -> dict[str, dict[str, float]]:
    frame = _ranked_frame(rankings, user_ids, item_ids)
    users, items, scores = (frame.get_column(c).to_list() for c in ("user", "item", "score"))
    out: dict[str, dict[str, float]] = {}
    for user, item, score in zip(users, items, scores, strict=True):
        out.setdefault(str(user), {})[str(item)] = float(score)
    return out


def _write_atomically(path: Path, write) -> None:
    """``write`` a file through :mod:`recsys_eval.core.atomic`: never a half-written file, the
    previous one intact and an OutputError naming the path when writing fails."""
    with atomic.atomic_path(path) as temp:
        write(temp)


def to_ranx(values: Rankings | Targets | pl.DataFrame, *, user_ids: pl.Series | None = None,
            item_ids: pl.Series | None = None, name: str | None = None):
    """ranx objects from ours, for ranx's statistics on our values (ranx is imported here only).

    - Rankings -> ``ranx.Run`` (scores, or L - rank + 1 without them).
    - Targets (listed, not full ranking) -> ``ranx.Qrels`` of the relevant items, grade = the gain
      (whole numbers only: ranx's grades are integers).
    - a per-unit table (``measure``'s output) -> ``{system: ranx.Run}`` whose ``scores[label][user]``
      and ``mean_scores[label]`` hold our per-unit values (labels like ``ndcg@10``), which
      ``ranx.statistical_tests.compute_statistical_significance`` takes as ``metric_scores``.
    """
    try:
        import ranx
    except ImportError:
        raise ConfigError("to_ranx needs ranx: pip install ranx (or uv sync --group dev)") from None
    if isinstance(values, Rankings):
        return ranx.Run(_ranx_dict(values, user_ids, item_ids), name=name)
    if isinstance(values, Targets):
        frame = values.to_frame().filter(pl.col("gain") > 0)
        gain = frame.get_column("gain")
        if (gain != gain.floor()).any():
            raise DataError("to_ranx: ranx grades are integers; these targets have fractional gains")
        frame = _raw_ids(frame, user_ids, item_ids)
        qrels: dict[str, dict[str, int]] = {}
        for user, item, grade in frame.select("user", "item", "gain").iter_rows():
            qrels.setdefault(str(user), {})[str(item)] = int(grade)
        return ranx.Qrels(qrels, name=name)
    if isinstance(values, pl.DataFrame):
        return _per_unit_runs(ranx, values)
    raise ConfigError(f"to_ranx takes Rankings, Targets or a per-unit table, got {type(values).__name__}")


def _per_unit_runs(ranx, per_unit: pl.DataFrame) -> dict[str, Any]:
    missing = [c for c in ("system", "user", "unit", "metric", "k", "value") if c not in per_unit.columns]
    if missing:
        raise DataError(f"to_ranx: a per-unit table needs columns {missing}; the columns are {per_unit.columns}")
    frame = per_unit.drop_nulls("user").with_columns(
        pl.when(pl.col("k").is_null()).then(pl.col("metric"))
        .otherwise(pl.format("{}@{}", "metric", "k")).alias("label"),
    )
    if frame.select(pl.struct("system", "label", "user").is_duplicated().any()).item():
        raise DataError("to_ranx: several units per user (1R protocols, folds): average them per user first")
    runs = {}
    for (system,), rows in frame.partition_by("system", as_dict=True, maintain_order=True).items():
        run = ranx.Run(name=str(system))
        for (label,), part in rows.partition_by("label", as_dict=True, maintain_order=True).items():
            value = part.get_column("value").to_numpy()
            run.scores[label] = dict(zip(map(str, part.get_column("user").to_list()), value.tolist(), strict=True))
            run.mean_scores[label] = float(np.nanmean(value))
        runs[str(system)] = run
    return runs
