"""Interactions: the user-item table every stage shares (docs/CONVENTIONS.md#notation).

Users and items are indexed once, when the data is loaded: the raw ids are sorted and numbered
0..n-1 (int32). Every later stage (splits, targets, rankings) keeps that index, so that all of them
speak the same ids; :meth:`Interactions.with_frame` builds a subset over the same index.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
import polars as pl

from recsys_eval.errors import DataError, check_choice

DuplicatePolicy = Literal["error", "last", "max", "mean"]
DUPLICATE_POLICIES = ("error", "last", "max", "mean")

_USER, _ITEM, _RATING, _TIME = "user", "item", "rating", "timestamp"
_SCHEMA = {_USER: pl.Int32, _ITEM: pl.Int32, _RATING: pl.Float32, _TIME: pl.Int64}

if TYPE_CHECKING:  # imported where a matrix is built: scipy.sparse costs ~0.15 s to import
    import scipy.sparse as sp


@dataclass(frozen=True, eq=False)
class Interactions:
    """User-item interactions over a shared dense index.

    Attributes:
        frame: columns ``user`` and ``item`` (int32 indices), optionally ``rating`` (float32) and
            ``timestamp`` (int64, seconds).
        user_ids: raw user id of every user index (``user_ids[u]`` is the raw id of index ``u``).
        item_ids: raw item id of every item index.
        items_meta: optional item metadata, one row per item index (column ``item`` plus e.g.
            ``title``, ``year``, ``genres``).
        source: where the data came from, for messages.
    """

    frame: pl.DataFrame
    user_ids: pl.Series
    item_ids: pl.Series
    items_meta: pl.DataFrame | None = None
    source: str = "interactions"
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_frame(
        cls,
        df: pl.DataFrame,
        *,
        user: str = _USER,
        item: str = _ITEM,
        rating: str | None = _RATING,
        timestamp: str | None = _TIME,
        duplicates: DuplicatePolicy = "error",
        items_meta: pl.DataFrame | None = None,
        source: str = "interactions",
    ) -> Interactions:
        """Index raw ids and validate a table of interactions.

        ``rating`` and ``timestamp`` are optional: a name absent from ``df`` is ignored when it is
        the default name, and an error when it was given explicitly. ``items_meta``, if given, is
        keyed by the raw item id in a column named ``item``; items it lists that have no
        interaction are left out.
        """
        check_choice("duplicates policy", duplicates, DUPLICATE_POLICIES)
        if not isinstance(df, pl.DataFrame):
            raise DataError(f"{source}: expected a polars DataFrame, got {type(df).__name__}")
        columns = {_USER: user, _ITEM: item}
        for role, name, default in ((_RATING, rating, _RATING), (_TIME, timestamp, _TIME)):
            if name is None:
                continue
            if name in df.columns:
                columns[role] = name
            elif name != default:
                raise DataError(f"{source}: no column {name!r} for {role}; columns are {df.columns}")
        for role in (_USER, _ITEM):
            if columns[role] not in df.columns:
                raise DataError(
                    f"{source}: missing column {columns[role]!r} for {role}; columns are {df.columns}"
                )
        df = df.select([pl.col(name).alias(role) for role, name in columns.items()])
        _check_raw_ids(df, source)
        df = _cast_values(df, source)
        user_ids = df.get_column(_USER).unique().sort()
        item_ids = df.get_column(_ITEM).unique().sort()
        frame = df.with_columns(
            _index_of(df.get_column(_USER), user_ids).alias(_USER),
            _index_of(df.get_column(_ITEM), item_ids).alias(_ITEM),
        )
        frame = _resolve_duplicates(frame, duplicates, user_ids, item_ids, source)
        meta = _index_meta(items_meta, item_ids, source) if items_meta is not None else None
        return cls(frame, user_ids.rename("user_id"), item_ids.rename("item_id"), meta, source)

    def with_frame(self, frame: pl.DataFrame, source: str | None = None) -> Interactions:
        """A new Interactions over the same index (e.g. the train side of a split)."""
        return Interactions(
            frame.select([c for c in _SCHEMA if c in frame.columns]),
            self.user_ids,
            self.item_ids,
            self.items_meta,
            source or self.source,
        )

    def with_items_meta(self, items_meta: pl.DataFrame) -> Interactions:
        """The same interactions with item metadata ``items_meta`` (keyed by the raw item id in a
        column ``item``; items without interactions are left out, items it does not list get nulls)."""
        meta = _index_meta(items_meta, self.item_ids, self.source)
        return Interactions(self.frame, self.user_ids, self.item_ids, meta, self.source)

    # -- shape ------------------------------------------------------------------------------
    @property
    def n_users(self) -> int:
        """Size of the user index (users of the whole dataset, not only of this subset)."""
        return self.user_ids.len()

    @property
    def n_items(self) -> int:
        """Size of the item index."""
        return self.item_ids.len()

    def __len__(self) -> int:
        return self.frame.height

    @property
    def has_rating(self) -> bool:
        return _RATING in self.frame.columns

    @property
    def has_timestamp(self) -> bool:
        return _TIME in self.frame.columns

    def __repr__(self) -> str:
        cols = ", ".join(self.frame.columns)
        return (
            f"Interactions({self.source!r}: {len(self):,} rows over {self.n_users:,} users x "
            f"{self.n_items:,} items; columns {cols})"
        )

    # -- arrays -----------------------------------------------------------------------------
    @property
    def users(self) -> np.ndarray:
        """User index of every row (int32)."""
        return self.frame.get_column(_USER).to_numpy()

    @property
    def items(self) -> np.ndarray:
        """Item index of every row (int32)."""
        return self.frame.get_column(_ITEM).to_numpy()

    @property
    def ratings(self) -> np.ndarray | None:
        return self.frame.get_column(_RATING).to_numpy() if self.has_rating else None

    @property
    def timestamps(self) -> np.ndarray | None:
        return self.frame.get_column(_TIME).to_numpy() if self.has_timestamp else None

    def csr(self, values: Literal["ones", "rating"] = "ones") -> sp.csr_matrix:
        """The users x items matrix in CSR form, cached; column indices sorted in every row.

        ``values="ones"`` puts 1 for every interaction, ``"rating"`` the rating.
        """
        check_choice("csr values", values, ("ones", "rating"))
        if values == "rating" and not self.has_rating:
            raise DataError(f"{self.source}: no rating column for a rating matrix")
        if values not in self._cache:
            import scipy.sparse as sp

            data = (
                np.ones(len(self), dtype=np.float32)
                if values == "ones"
                else self.ratings.astype(np.float32)
            )
            matrix = sp.csr_matrix(
                (data, (self.users, self.items)), shape=(self.n_users, self.n_items)
            )
            matrix.sort_indices()
            self._cache[values] = matrix
        return self._cache[values]

    def user_counts(self) -> np.ndarray:
        """Interactions per user index (length n_users)."""
        return np.bincount(self.users, minlength=self.n_users)

    def item_counts(self) -> np.ndarray:
        """Interactions per item index (length n_items)."""
        return np.bincount(self.items, minlength=self.n_items)

    # -- id maps ----------------------------------------------------------------------------
    def to_raw(self, frame: pl.DataFrame | None = None) -> pl.DataFrame:
        """``frame`` (default: these interactions) with ``user``/``item`` mapped back to raw ids."""
        frame = self.frame if frame is None else frame
        exprs = []
        for col, ids in ((_USER, self.user_ids), (_ITEM, self.item_ids)):
            if col in frame.columns:
                exprs.append(pl.lit(ids).gather(pl.col(col)).alias(col))
        return frame.with_columns(exprs)

    def user_index(self, raw: pl.Series | list | np.ndarray) -> np.ndarray:
        """Indices of raw user ids; -1 for ids not in the index."""
        return _lookup(self.user_ids, raw)

    def item_index(self, raw: pl.Series | list | np.ndarray) -> np.ndarray:
        """Indices of raw item ids; -1 for ids not in the index."""
        return _lookup(self.item_ids, raw)


# -- helpers ------------------------------------------------------------------------------------
def _check_raw_ids(df: pl.DataFrame, source: str) -> None:
    for col in (_USER, _ITEM):
        dtype = df.schema[col]
        if not (dtype.is_integer() or dtype == pl.String or dtype == pl.Categorical):
            raise DataError(
                f"{source}: column {col!r} has type {dtype}; expected integer or string ids"
            )
        nulls = df.get_column(col).null_count()
        if nulls:
            row = df.with_row_index().filter(pl.col(col).is_null()).get_column("index")[0]
            raise DataError(f"{source}: column {col!r} has {nulls:,} null ids (first at row {row})")


def _cast_values(df: pl.DataFrame, source: str) -> pl.DataFrame:
    if _RATING in df.columns:
        dtype = df.schema[_RATING]
        if not (dtype.is_numeric() or dtype == pl.Boolean):
            raise DataError(f"{source}: column 'rating' has type {dtype}; expected numbers")
        df = df.with_columns(pl.col(_RATING).cast(pl.Float32))
        bad = df.filter(pl.col(_RATING).is_null() | pl.col(_RATING).is_nan() | pl.col(_RATING).is_infinite())
        if bad.height:
            raise DataError(
                f"{source}: column 'rating' has {bad.height:,} null, NaN or infinite values "
                f"(e.g. user {bad[0, _USER]!r}, item {bad[0, _ITEM]!r})"
            )
    if _TIME in df.columns:
        dtype = df.schema[_TIME]
        if dtype.is_temporal():
            df = df.with_columns(pl.col(_TIME).dt.epoch("s"))
        elif not dtype.is_integer():
            if dtype.is_float():
                df = df.with_columns(pl.col(_TIME).cast(pl.Int64, strict=False))
            else:
                raise DataError(
                    f"{source}: column 'timestamp' has type {dtype}; expected integer seconds or a "
                    "datetime (give a timestamp format to parse strings)"
                )
        df = df.with_columns(pl.col(_TIME).cast(pl.Int64))
        nulls = df.get_column(_TIME).null_count()
        if nulls:
            raise DataError(f"{source}: column 'timestamp' has {nulls:,} null or unusable values")
    return df


def _index_of(values: pl.Series, ids: pl.Series) -> pl.Series:
    """Position of every value in the sorted unique ``ids`` (all values are present).

    Integer ids spanning a range of at most a few times the row count go through a lookup table
    (one numpy gather, ~25x faster than a binary search); others through a hash join.
    """
    if ids.len() and ids.dtype.is_integer():
        low, high = int(ids[0]), int(ids[-1])
        if high - low < max(4 * values.len(), 1 << 20):
            table = np.empty(high - low + 1, dtype=np.int32)
            table[ids.to_numpy() - low] = np.arange(ids.len(), dtype=np.int32)
            return pl.Series(values.name, table[values.to_numpy() - low])
    index = pl.DataFrame({"id": ids, "index": pl.int_range(ids.len(), dtype=pl.Int32, eager=True)})
    joined = pl.DataFrame({"id": values}).join(index, on="id", how="left", maintain_order="left")
    return joined.get_column("index").rename(values.name)


def _resolve_duplicates(
    frame: pl.DataFrame,
    policy: str,
    user_ids: pl.Series,
    item_ids: pl.Series,
    source: str,
) -> pl.DataFrame:
    key = frame.get_column(_USER).cast(pl.Int64) * len(item_ids) + frame.get_column(_ITEM)
    dup = key.is_duplicated()
    n_dup = int(dup.sum())
    if n_dup == 0:
        return frame
    if policy == "error":
        first = frame.filter(dup).row(0, named=True)
        pairs = frame.filter(dup).select(_USER, _ITEM).unique().height
        raise DataError(
            f"{source}: {pairs:,} (user, item) pairs occur more than once ({n_dup:,} rows), e.g. "
            f"user {user_ids[first[_USER]]!r}, item {item_ids[first[_ITEM]]!r}; choose a duplicates "
            "policy: 'last', 'max' or 'mean'"
        )
    values = [c for c in (_RATING, _TIME) if c in frame.columns]
    order = [_TIME] if _TIME in frame.columns else []
    frame = frame.with_row_index("_row")
    if policy == "last":
        frame = frame.sort([*order, "_row"]).group_by(_USER, _ITEM, maintain_order=True).last()
    else:
        agg = []
        for col in values:
            if col == _TIME:
                agg.append(pl.col(_TIME).max())
            elif policy == "max":
                agg.append(pl.col(col).max())
            else:
                agg.append(pl.col(col).mean().cast(pl.Float32))
        agg.append(pl.col("_row").min())
        frame = frame.group_by(_USER, _ITEM).agg(agg)
    return frame.sort("_row").drop("_row").select([c for c in _SCHEMA if c in frame.columns])


def _index_meta(meta: pl.DataFrame, item_ids: pl.Series, source: str) -> pl.DataFrame:
    if "item" not in meta.columns:
        raise DataError(f"{source}: item metadata needs an 'item' column; columns are {meta.columns}")
    known = pl.DataFrame({"item": item_ids, "_index": pl.int_range(item_ids.len(), dtype=pl.Int32, eager=True)})
    meta = meta.with_columns(pl.col("item").cast(item_ids.dtype, strict=False))
    repeated = meta.get_column("item").drop_nulls().is_duplicated()
    if repeated.any():  # one metadata row per item, or the rows would no longer follow the index
        example = meta.get_column("item").drop_nulls().filter(repeated)[0]
        raise DataError(f"{source}: item metadata lists item {example!r} more than once")
    joined = known.join(meta, on="item", how="left").sort("_index")
    return joined.drop("item").rename({"_index": "item"}).select("item", pl.exclude("item"))


def _lookup(ids: pl.Series, raw) -> np.ndarray:
    raw = pl.Series(raw) if not isinstance(raw, pl.Series) else raw
    if raw.dtype != ids.dtype:
        raw = raw.cast(ids.dtype, strict=False)
    pos = ids.search_sorted(raw).to_numpy().astype(np.int64)
    pos_c = np.minimum(pos, max(ids.len() - 1, 0))
    found = ids.len() > 0
    if found:
        hit = (ids.gather(pos_c) == raw).fill_null(False).to_numpy()
    else:
        hit = np.zeros(len(raw), dtype=bool)
    return np.where(hit, pos_c, -1).astype(np.int32)
