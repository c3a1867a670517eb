"""Runs and judgments in the layouts other frameworks save them in, and the detection of a layout
when no format is given (docs/CONVENTIONS.md#interchange-layouts).

:mod:`recsys_eval.data.runs` reads our own formats (csv, tsv, parquet, trec, ranx, elliot) and hands
the formats below to :func:`read_framework`, which renames the framework's columns to ours (``user``,
``item``, ``score`` or ``rank`` for runs, ``rating`` for judgments); every check of a run is then the
one of :mod:`recsys_eval.data.runs`, whatever the layout.

============== ================================================================================
format         layout
============== ================================================================================
recbole        RecBole's atomic-file layout (``.inter``): tab-separated, a header of typed fields
               ``user_id:token  item_id:token  score:float`` (or ``rank``, ``rating``), one row
               per (user, item); or one row per user with ``item_id:token_seq`` (the top-k of
               ``full_sort_topk``, best first; ``score:float_seq`` beside it when saved)
lenskit        LensKit 2025 ``ItemListCollection.save_parquet``: native (a row per list, key
               ``user_id``, the list in an ``items`` column of ``item_id, score, rank``
               structs) or flat (``user_id, item_id, score, rank``, also RecTools' columns);
               the classic ``user, item, score, rank`` frames are read as they are
replay         RePlay frames: ``query_id, item_id, rating`` (RePlay >= 0.11) or ``user_idx,
               item_idx, relevance`` (earlier); the relevance or rating of a run is its score
msrecommenders Microsoft Recommenders frames: ``userID, itemID, prediction`` (runs) and
               ``userID, itemID, rating`` (judgments)
============== ================================================================================

Detection (no format given): a DataFrame or a file with a header whose columns are not ours but are
a framework's gets that framework's layout; a ``.inter`` file is RecBole's; a text file whose first
line is no header is TREC (``qid Q0 docid rank score tag``) or Elliot's (``user item score``,
tab-separated). Every detection says what it found in a note, and a file that matches nothing is
refused with the list of formats.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from recsys_eval.core.columns import polars_frame
from recsys_eval.data.delimited import Table, read_delimited
from recsys_eval.errors import DataError


@dataclass(frozen=True)
class Layout:
    """A framework's column names for a run or judgments: theirs -> ours."""

    format: str
    framework: str
    user: str
    item: str
    run: tuple[tuple[str, str], ...]  # value columns of a run: (theirs, ours)
    judgments: tuple[tuple[str, str], ...] = (("rating", "rating"),)

    def names(self, kind: str) -> dict[str, str]:
        """Their column -> ours, for a table of ``kind``."""
        return {self.user: "user", self.item: "item", **dict(self.run if kind == "run" else self.judgments)}


#: Tried in order by detection; the first whose user and item columns a table has is its layout.
LAYOUTS = (
    Layout("lenskit", "LensKit 2025 (flat item lists; RecTools' columns too)", "user_id", "item_id",
           (("score", "score"), ("rank", "rank"))),
    Layout("replay", "RePlay (>= 0.11)", "query_id", "item_id", (("rating", "score"),)),
    Layout("replay", "RePlay (before 0.11)", "user_idx", "item_idx", (("relevance", "score"),),
           (("relevance", "rating"),)),
    Layout("msrecommenders", "Microsoft Recommenders", "userID", "itemID", (("prediction", "score"),)),
)
FRAMEWORK_FORMATS = ("recbole", "lenskit", "replay", "msrecommenders")
#: What each format is, for ``recsys-eval list formats`` and error messages.
FORMAT_MEANINGS = {
    "csv": "comma-separated, a header line naming user, item and score or rank (.csv, .txt)",
    "tsv": "tab-separated, a header line naming the columns (.tsv)",
    "parquet": "columns user, item and score or rank (.parquet, .pq; pandas/polars frames)",
    "trec": "qid Q0 docid rank score tag runs, qid 0 docid rel qrels (.trec, .run, .qrels)",
    "ranx": 'ranx JSON {"user": {"item": score}} (.json)',
    "elliot": "Elliot's recommendation TSVs: user item score, no header (one file per model)",
    "recbole": "RecBole atomic file: user_id:token item_id:token score:float, or item_id:token_seq top-k (.inter)",
    "lenskit": "LensKit ItemListCollection Parquet (native items lists or flat user_id, item_id, score, rank)",
    "replay": "RePlay frames: query_id, item_id, rating or user_idx, item_idx, relevance",
    "msrecommenders": "Microsoft Recommenders frames: userID, itemID, prediction (runs) or rating",
}
RECBOLE_SUFFIX = ".inter"
_SNIFF_BYTES = 1 << 16


# -- detection ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Detected:
    """A format and, when it was detected rather than given or told by the extension, why."""

    format: str
    note: str | None = None


def detect(source: Any, kind: str, by_suffix: str | None, name: str) -> Detected:
    """The format of ``source`` when none is given. ``by_suffix`` is the format its extension tells
    (None for a DataFrame or an extension no format has)."""
    if not isinstance(source, (str, Path)):
        return _detect_columns(list(source.columns), "parquet", name, "its columns")
    path = Path(source)
    if path.suffix.lower() == RECBOLE_SUFFIX:
        return Detected("recbole")
    if not path.is_file():
        return Detected(by_suffix or "csv")  # the reader says the file is missing
    if by_suffix == "parquet":
        try:
            schema = pl.read_parquet_schema(path)
        except (pl.exceptions.PolarsError, OSError):
            return Detected("parquet")  # the reader says it is not Parquet
        if "items" in schema and isinstance(schema["items"], pl.List) and "item" not in schema:
            return Detected("lenskit", f"{name}: read as LensKit's native item-list Parquet "
                                       "(a row per list, an 'items' column of lists)")
        return _detect_columns(list(schema), "parquet", name, "its columns")
    if by_suffix in (None, "csv", "tsv"):
        return _detect_text(path, kind, by_suffix, name)
    return Detected(by_suffix)


def _detect_columns(columns: list[str], ours: str, name: str, what: str) -> Detected:
    """Our own columns, or the first framework layout whose user and item columns are there."""
    if "user" in columns and "item" in columns:
        return Detected(ours)
    for layout in LAYOUTS:
        if layout.user in columns and layout.item in columns:
            return Detected(layout.format, f"{name}: {what} {', '.join(columns)} are the {layout.framework} "
                                           f"layout: read as format {layout.format!r}")
    return Detected(ours)  # the reader names the missing columns


def _detect_text(path: Path, kind: str, by_suffix: str | None, name: str) -> Detected:
    first = _first_line(path)
    fields = first.split()
    tabbed = first.split("\t")
    if any(":" in f and f.rsplit(":", 1)[1] in _RECBOLE_TYPES for f in tabbed):
        return Detected("recbole", f"{name}: a header of typed fields ({first.strip()}): read as RecBole's atomic file")
    header = [f.strip().strip('"') for f in (tabbed if by_suffix == "tsv" or len(tabbed) > 1 else first.split(","))]
    if by_suffix is not None and "user" in header and "item" in header:
        return Detected(by_suffix)
    if len(fields) in (5, 6) and fields[1] in ("Q0", "q0") and _numbers(fields[3:5]):
        return Detected("trec", f"{name}: lines of 'qid Q0 docid rank score tag': read as a TREC run")
    if kind == "judgments" and len(fields) == 4 and fields[1] == "0" and _numbers(fields[3:]):
        return Detected("trec", f"{name}: lines of 'qid 0 docid rel': read as TREC qrels")
    if len(tabbed) in ((3,) if kind == "run" else (3, 4)) and _numbers(tabbed[2:]):
        return Detected("elliot", f"{name}: header-less tab-separated 'user item {'score' if kind == 'run' else 'rating'}'"
                                  " lines: read as Elliot's layout")
    if by_suffix is None:
        raise DataError(f"{name}: cannot tell the format from the extension {path.suffix.lower()!r} nor from "
                        f"the first line ({first.strip()[:80]!r}); give the format, one of {format_list()}")
    return _detect_columns(header, by_suffix, name, "its header's columns")


_RECBOLE_TYPES = ("token", "float", "token_seq", "float_seq")


def _first_line(path: Path) -> str:
    with open(path, "rb") as stream:
        for raw in iter(lambda: stream.readline(_SNIFF_BYTES), b""):
            if raw.strip():
                return raw.decode("utf-8", errors="replace").rstrip("\r\n")
    return ""


def _numbers(fields: list[str]) -> bool:
    try:
        [float(f) for f in fields]
    except ValueError:
        return False
    return bool(fields)


def format_list() -> str:
    """Every format, for messages."""
    return ", ".join(FORMAT_MEANINGS)


# -- reading -----------------------------------------------------------------------------------------
def read_framework(source: Any, fmt: str, kind: str, name: str) -> Table:
    """A run or judgments in a framework's layout, as a Table with our column names (the checks are
    the caller's: :func:`recsys_eval.data.runs.read_table`)."""
    if fmt == "recbole":
        table = _read_recbole(source, name) if isinstance(source, (str, Path)) else _frame_table(source, name)
        table.frame = _strip_types(table.frame)
        table = _explode_sequences(table, kind)
    elif isinstance(source, (str, Path)):
        table = Table(read_parquet(source, name), name, unit="row")
    else:
        table = _frame_table(source, name)
    if fmt == "lenskit" and "items" in table.frame.columns:
        table = Table(_flatten_item_lists(table.frame, name), name, unit="row")
    table.frame = _rename(table.frame, fmt, kind, name)
    return table


def _frame_table(source: Any, name: str) -> Table:
    return Table(polars_frame(source, name), name, unit="row")


def existing_file(source: str | Path, name: str) -> Path:
    """``source`` as a Path, or a DataError when it is no file (a folder of runs is a config's)."""
    path = Path(source)
    if not path.is_file():
        raise DataError(f"{name}: no such file" + (
            " (it is a folder: a folder of runs, one per file, is an external run's path in a config)"
            if path.is_dir() else ""))
    return path


def read_parquet(path: str | Path, name: str) -> pl.DataFrame:
    """A Parquet file, or a DataError naming it when it is missing or unreadable."""
    try:
        return pl.read_parquet(existing_file(path, name))
    except (pl.exceptions.PolarsError, OSError) as exc:
        text = str(exc).strip()
        raise DataError(f"{name}: not a readable Parquet file ({text.splitlines()[0] if text else type(exc).__name__})") from None


def _read_recbole(path: Path, name: str) -> Table:
    return read_delimited(existing_file(path, name), what=name, separator="\t", header=True, quoting=False)


def _strip_types(frame: pl.DataFrame) -> pl.DataFrame:
    """RecBole's ``name:type`` headers as ``name``, with the sequence fields marked ``name:seq``."""
    names = []
    for column in frame.columns:
        field, _, kind = column.rpartition(":") if ":" in column else (column, "", "")
        names.append(f"{field}:seq" if kind.endswith("_seq") else field)
    return frame.rename(dict(zip(frame.columns, names, strict=True)))


def _explode_sequences(table: Table, kind: str) -> Table:
    """A top-k saved as one row per user (``item_id:token_seq``, space-separated, best first) as one
    row per item, ranked by position (scores, from ``score:float_seq``, kept beside)."""
    frame = table.frame
    sequences = [c for c in frame.columns if c.endswith(":seq")]
    if not sequences:
        return table
    item = next((c for c in sequences if c.split(":")[0] in ("item_id", "item_id_list")), None)
    if item is None:
        raise DataError(f"{table.what}: sequence fields {sequences} hold no item ids; expected item_id:token_seq")
    split = [pl.col(c).cast(pl.String).str.strip_chars().str.split(" ").alias(c.split(":")[0]) for c in sequences]
    frame = frame.select(pl.exclude(sequences), *split)
    lists = [c.split(":")[0] for c in sequences]
    lengths = frame.select(pl.col(c).list.len() for c in lists)
    unequal = lengths.select(pl.any_horizontal(pl.col(c) != pl.col(lists[0]) for c in lists)).to_series()
    if unequal.any():
        row = int(unequal.arg_true()[0])
        raise table.error(row, f"the sequences {', '.join(lists)} have different lengths {lengths.row(row)}")
    frame = frame.with_columns(pl.int_ranges(1, pl.col(lists[0]).list.len() + 1).alias("rank"))
    frame = frame.explode([*lists, "rank"]).rename({item.split(":")[0]: "item_id"})
    if kind == "run" and "score" in frame.columns:
        frame = frame.drop("rank")  # ordered by score, like every run with scores
    return Table(frame, table.what, unit="row")


def _flatten_item_lists(frame: pl.DataFrame, name: str) -> pl.DataFrame:
    """LensKit's native layout: one row per item of every list, with the list's key columns."""
    items = frame.get_column("items")
    if not isinstance(items.dtype, pl.List) or not isinstance(items.dtype.inner, pl.Struct):
        raise DataError(f"{name}: column 'items' has type {items.dtype}; expected lists of item_id, score structs")
    flat = frame.explode("items").drop_nulls("items").unnest("items")
    return flat


def _rename(frame: pl.DataFrame, fmt: str, kind: str, name: str) -> pl.DataFrame:
    """The framework's columns renamed to ours (a table already in ours is left as it is)."""
    if fmt in ("recbole", "lenskit") and "user" in frame.columns and "item" in frame.columns:
        return frame
    layouts = [layout for layout in LAYOUTS if layout.format == ("lenskit" if fmt == "recbole" else fmt)]
    for layout in layouts:
        if layout.user in frame.columns and layout.item in frame.columns:
            names = {theirs: ours for theirs, ours in layout.names(kind).items() if theirs in frame.columns}
            return frame.select(list(names)).rename(names)
    expected = " or ".join(f"{layout.user}, {layout.item}" for layout in layouts)
    raise DataError(f"{name}: in the {_name_of(fmt)} layout, expected columns {expected}; "
                    f"the columns are {frame.columns}")


def _name_of(fmt: str) -> str:
    return {"recbole": "RecBole", "lenskit": "LensKit", "replay": "RePlay",
            "msrecommenders": "Microsoft Recommenders"}[fmt]


def read_folder(folder: str | Path, *, pattern: str = "*") -> dict[str, Path]:
    """A folder of runs, one file per system named by the file's stem, sorted by name: Elliot's
    ``recs/`` (``<model>_<params>.tsv``). Hidden files and subfolders are left out."""
    path = Path(folder)
    if not path.is_dir():
        raise DataError(f"{folder}: no such folder")
    files = sorted(p for p in path.glob(pattern) if p.is_file() and not p.name.startswith("."))
    if not files:
        raise DataError(f"{folder}: no run files; expected one recommendation file per model (Elliot's recs/)")
    stems = [p.stem for p in files]
    if len(set(stems)) < len(stems):
        twice = next(s for s in stems if stems.count(s) > 1)
        raise DataError(f"{folder}: two files named {twice!r} (different extensions); one run per system name")
    return {p.stem: p for p in files}
