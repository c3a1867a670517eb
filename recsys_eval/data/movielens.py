"""MovieLens loaders: parse the files a descriptor names into Interactions with item metadata.

``load_dataset("ml-100k")`` finds the dataset in the data home (fetching it if needed), reads the
Parquet cache when it is fresh, and otherwise parses the ratings (``u.data`` tab-separated,
``ratings.dat`` with ``::``, ``ratings.csv``) and the item file (title, year, genres) with polars,
indexes users and items, and writes the cache.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from recsys_eval.core.interactions import Interactions
from recsys_eval.data import home as _home
from recsys_eval.data.cache import ParquetCache
from recsys_eval.data.delimited import read_delimited
from recsys_eval.data.descriptors import ROLES, Descriptor, get_descriptor
from recsys_eval.data.sources import Source, locate

_RATING_TYPES = {"user": pl.Int64, "item": pl.Int64, "rating": pl.Float32, "timestamp": pl.Int64}
_NO_GENRES = "(no genres listed)"
# A year in parentheses in a title, the last one counting: "Toy Story (1995)", "Land Before Time
# III (1995) (V)", "Fawlty Towers (1975-1979)".
_TITLE_YEAR = r"\(\d{4}(?:\s*[-\u2013]\s*\d{0,4})?\)"


def load_dataset(
    name: str | Descriptor,
    data_home: str | Path | None = None,
    *,
    download: bool = True,
) -> Interactions:
    """Load MovieLens dataset ``name`` (see :func:`list_datasets`) as Interactions.

    ``items_meta`` holds ``title``, ``year`` and ``genres`` (a list of strings) per item index.
    Without ``download``, a dataset absent from the data home is an error.
    """
    desc = get_descriptor(name)
    home = _home.data_home(data_home)
    source = locate(desc, home, download=download)
    cache = ParquetCache(_home.derived_folder(home, desc.name) / "parquet")
    key = {"dataset": desc.name, "descriptor": desc.digest}
    stamps = source.stamp_paths()
    data = cache.load(key, stamps, source=desc.name)
    if data is None:
        data = parse_dataset(source)
        cache.store(data, key, stamps)
    return data


def parse_dataset(source: Source) -> Interactions:
    """Parse a dataset's files (no cache): ratings, then item metadata when there is some."""
    source.verify()
    ratings = read_ratings(source)
    items = read_items(source) if source.desc.items is not None else None
    return Interactions.from_frame(ratings, items_meta=items, source=source.desc.name)


def read_ratings(source: Source) -> pl.DataFrame:
    """The ratings file with raw ids: columns user, item, and rating, timestamp where present."""
    spec = source.desc.ratings
    table = read_delimited(
        source.read(spec.file),
        what=source.describe(spec.file),
        separator=spec.separator,
        header=spec.header,
        columns=spec.columns,
        dtypes={c: t for c, t in _RATING_TYPES.items() if c in spec.columns},
        encoding=spec.encoding,
        quoting=spec.quoting,
    )
    roles = [c for c in ROLES if c in spec.columns]
    table.check_not_null(roles)
    return table.frame.select(roles)


def read_items(source: Source) -> pl.DataFrame:
    """Item metadata keyed by raw item id: columns item, title, year (or null), genres (list)."""
    spec = source.desc.items
    flags = spec.genre_names if spec.genres == "flags" else []
    table = read_delimited(
        source.read(spec.file),
        what=source.describe(spec.file),
        separator=spec.separator,
        header=spec.header,
        columns=[*spec.columns, *flags],
        dtypes={"item": pl.Int64, **{g: pl.Int8 for g in flags}},
        encoding=spec.encoding,
        quoting=spec.quoting,
    )
    table.check_not_null(["item"])
    title = pl.col("title").fill_null("").str.strip_chars()
    if spec.genres == "flags":
        genres = pl.concat_list([pl.when(pl.col(g) == 1).then(pl.lit(g)) for g in flags]).list.drop_nulls()
    elif spec.genres == "pipe":
        genres = (
            pl.col("genres")
            .fill_null("")
            .str.split("|")
            .list.eval(pl.element().filter((pl.element() != "") & (pl.element() != _NO_GENRES)))
        )
    else:
        genres = pl.lit([], dtype=pl.List(pl.String))
    return table.frame.select(
        pl.col("item"),
        title.alias("title"),
        title.str.extract_all(_TITLE_YEAR).list.last().str.slice(1, 4).cast(pl.Int32).alias("year"),
        genres.alias("genres"),
    ).unique("item", keep="first", maintain_order=True)
