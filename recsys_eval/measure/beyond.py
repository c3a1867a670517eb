"""Beyond accuracy, over all top-k lists of a run (docs/CONVENTIONS.md#beyond-accuracy).

Per unit (one row per unit):
- ``user_coverage``: 1 if the unit's list is non-empty, else 0 (its mean is the share of users
  with a list);
- ``novelty@k``: mean self-information -log2 p(i) of the listed items, p(i) = share of train users
  with item i; items no train user has take the smallest non-zero p. NaN for an empty list;
- ``ild@k``: intra-list diversity, the mean Jaccard distance 1 - |G_i & G_j| / |G_i | G_j| between
  the genre sets of every pair of listed items (0 for two items without genres). NaN below 2 items.

Per run (one row with null user and unit):
- ``catalog_coverage@k``: distinct items in the top-k lists that belong to the catalogue, over the
  catalogue size; the catalogue is the items of train when train is given, else every item;
- ``prediction_coverage``: distinct items ranked anywhere in the lists (no cutoff) over all items;
- ``gini@k``: Gini index of the exposure counts (appearances in top-k lists) of catalogue items,
  sum_i (2i - n - 1) c_(i) / (n sum c) over counts sorted ascending (0: equal exposure);
- ``entropy@k``: Shannon entropy in bits of the exposure distribution over catalogue items.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from numba import njit, prange

from recsys_eval.core.chunks import chunk_bounds
from recsys_eval.core.interactions import Interactions
from recsys_eval.core.results import PER_UNIT_SCHEMA
from recsys_eval.core.units import Rankings
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.measure.frames import concat_per_unit, long_frame
from recsys_eval.measure.metrics import BEYOND_METRICS, check_cutoffs, check_metrics
from recsys_eval.measure.ties import unit_of_position

if TYPE_CHECKING:
    import scipy.sparse as sp


def beyond_accuracy(
    rankings: Rankings,
    *,
    k: int | Iterable[int],
    n_items: int,
    metrics: str | Iterable[str] | None = None,
    train: Interactions | pl.DataFrame | sp.spmatrix | None = None,
    genres: np.ndarray | sp.spmatrix | pl.DataFrame | None = None,
    system: str = "system",
    protocol: str = "rankings",
    fold: str = "0",
    user_ids: pl.Series | Sequence | np.ndarray | None = None,
) -> pl.DataFrame:
    """Beyond-accuracy values in the per-unit schema.

    ``train`` (Interactions, a frame of ``user, item`` indices, or a users x items matrix) gives the
    item popularity for novelty and the catalogue; ``genres`` (an items x genres bool matrix, or a
    frame with ``item`` index and ``genres``, a list or a ``|``-separated string) is needed for ILD.
    Without ``metrics``, every metric the inputs allow.
    """
    if metrics is None:
        names = [m for m in BEYOND_METRICS
                 if not (m == "novelty" and train is None) and not (m == "ild" and genres is None)]
    else:
        names = check_metrics(metrics, BEYOND_METRICS)
    if "novelty" in names and train is None:
        raise ConfigError("novelty needs train interactions (item popularity among train users)")
    if "ild" in names and genres is None:
        raise ConfigError("ild needs item genres (an items x genres matrix or a genres frame)")
    cutoffs = check_cutoffs(k)
    if len(rankings.items) and rankings.items.max() >= n_items:
        raise DataError(f"rankings: item index {int(rankings.items.max())} >= n_items {n_items}")
    labels = {"system": system, "protocol": protocol, "fold": str(fold)}

    n_units = rankings.n_units
    frames: list[pl.DataFrame] = []
    per_unit_cols: list[np.ndarray] = []
    per_unit_names: list[str] = []
    per_unit_ks: list[int | None] = []

    if "user_coverage" in names:
        per_unit_cols.append((rankings.lengths > 0).astype(np.float64))
        per_unit_names.append("user_coverage")
        per_unit_ks.append(None)
    novelty = _novelty(rankings, _self_information(train, n_items), cutoffs) if "novelty" in names else None
    masks = _genre_masks(genres, n_items) if "ild" in names else None
    for c, cut in enumerate(cutoffs):
        if novelty is not None:
            per_unit_cols.append(novelty[:, c])
            per_unit_names.append("novelty")
            per_unit_ks.append(cut)
        if "ild" in names:
            per_unit_cols.append(_ild_kernel(rankings.offsets, rankings.items, masks, cut,
                                             chunk_bounds(n_units)))
            per_unit_names.append("ild")
            per_unit_ks.append(cut)
    run_rows = []
    if any(name in RUN_METRICS for name in names):
        exposure = RunExposure(n_items, cutoffs, catalogue_of(train, n_items))
        exposure.add(rankings)
        run_rows = exposure.values(names)
    if per_unit_cols:
        order = sorted(range(len(per_unit_names)), key=lambda j: names.index(per_unit_names[j]))
        frames.append(
            long_frame(
                np.column_stack([per_unit_cols[j] for j in order]),
                [per_unit_names[j] for j in order], [per_unit_ks[j] for j in order],
                rankings.unit_user, user_ids, labels,
            )
        )
    if run_rows:
        user_type = frames[0].schema["user"] if frames else PER_UNIT_SCHEMA["user"]
        frames.append(run_frame(run_rows, labels, user_type))
    return concat_per_unit(frames)


def _cutoff_bands(rankings: Rankings, cutoffs: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every list entry's unit and band of (ascending) cutoffs: band c holds the positions from
    cutoffs[c-1] to cutoffs[c] - 1, so the top-k of cutoff c are bands 0..c. Also the mask of the
    entries inside the largest cutoff."""
    unit = unit_of_position(rankings.offsets)
    position = np.arange(len(rankings.items), dtype=np.int64) - rankings.offsets[unit]
    band = np.searchsorted(np.asarray(cutoffs), position, side="right")  # first cutoff above it
    return unit, band, band < len(cutoffs)


def _novelty(rankings: Rankings, info: np.ndarray, cutoffs: list[int]) -> np.ndarray:
    """units x cutoffs: the mean self-information of each unit's top-k items (NaN for an empty
    list). One pass over the lists: each entry's information summed into its band of cutoffs,
    then the bands summed in cutoff order (the top 5 are in the top 10 too)."""
    n_units, n_bands = rankings.n_units, len(cutoffs)
    unit, band, inside = _cutoff_bands(rankings, cutoffs)
    cell = unit[inside] * n_bands + band[inside]
    total = np.cumsum(np.bincount(cell, weights=info[rankings.items[inside]], minlength=n_units * n_bands)
                      .reshape(n_units, n_bands), axis=1)
    listed = np.cumsum(np.bincount(cell, minlength=n_units * n_bands).reshape(n_units, n_bands), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(listed > 0, total / np.maximum(listed, 1), np.nan)


#: The beyond-accuracy metrics of a whole run, functions of the exposure counts of its lists.
RUN_METRICS = ("catalog_coverage", "prediction_coverage", "gini", "entropy")


class RunExposure:
    """Exposure counts of a run's lists, added a chunk of units at a time: per cutoff, each item's
    appearances in the top-k lists, and whether it was ranked at all; the run-level metrics
    (catalogue and prediction coverage, Gini, entropy) follow from them, so a run measured in
    chunks of users gets the same values as one measured whole."""

    def __init__(self, n_items: int, cutoffs: list[int], catalogue: np.ndarray) -> None:
        self.cutoffs = sorted(cutoffs)
        self.catalogue = catalogue
        self.counts = np.zeros((len(cutoffs), n_items), dtype=np.int64)
        self.ranked = np.zeros(n_items, dtype=bool)

    def add(self, rankings: Rankings) -> None:
        """One pass over the lists: each entry counted in its band of cutoffs, then the bands
        summed (an item in the top 5 is in the top 10 too)."""
        n_items = self.counts.shape[1]
        _, band, inside = _cutoff_bands(rankings, self.cutoffs)
        by_band = np.bincount(band[inside] * n_items + rankings.items[inside], minlength=len(self.cutoffs) * n_items)
        self.counts += np.cumsum(by_band.reshape(len(self.cutoffs), n_items), axis=0)
        self.ranked[rankings.items] = True

    def values(self, names: Sequence[str]) -> list[tuple[str, int | None, float]]:
        """(metric, k, value) of every run-level metric in ``names``, in their order, k ascending."""
        rows = []
        if "prediction_coverage" in names:
            rows.append(("prediction_coverage", None, float(self.ranked.mean())))
        for c, cut in enumerate(self.cutoffs):
            counts = self.counts[c][self.catalogue]
            if "catalog_coverage" in names:
                rows.append(("catalog_coverage", cut, float((counts > 0).mean()) if len(counts) else np.nan))
            if "gini" in names:
                rows.append(("gini", cut, gini(counts)))
            if "entropy" in names:
                rows.append(("entropy", cut, entropy(counts)))
        rows.sort(key=lambda row: (list(names).index(row[0]), row[1] or 0))
        return rows


def run_frame(rows: list[tuple[str, int | None, float]], labels: dict[str, str], user_type) -> pl.DataFrame:
    """Run-level values as per-unit rows (null user and unit)."""
    return pl.DataFrame(
        [{**labels, "user": None, "unit": None, "metric": m, "k": cut, "value": v} for m, cut, v in rows],
        schema={**PER_UNIT_SCHEMA, "user": user_type},
    )


def catalogue_of(train, n_items: int) -> np.ndarray:
    """The catalogue: the items of train when given, else every item (read-only; kept with an
    Interactions, which every system and protocol of a fold measures against)."""
    if train is None:
        return np.ones(n_items, dtype=bool)
    return _per_train(train, ("catalogue", n_items), lambda: _catalogue(train, n_items))


def _catalogue(train, n_items: int) -> np.ndarray:
    catalogue = np.zeros(n_items, dtype=bool)
    catalogue[_train_pairs(train, n_items)[1]] = True
    return catalogue


def _per_train(train, key: tuple, compute) -> np.ndarray:
    """``compute()``, kept in an Interactions' cache under ``key`` (other inputs: computed each
    time), read-only."""
    if not isinstance(train, Interactions):
        return compute()
    if key not in train._cache:
        value = compute()
        value.flags.writeable = False
        train._cache[key] = value
    return train._cache[key]


def gini(counts: np.ndarray) -> float:
    """Gini index of non-negative counts: 0 when all are equal, (n-1)/n when one item has all."""
    counts = np.sort(np.asarray(counts, dtype=np.float64))
    n, total = len(counts), counts.sum()
    if n == 0 or total == 0:
        return float("nan")
    i = np.arange(1, n + 1)
    return float(((2 * i - n - 1) * counts).sum() / (n * total))


def entropy(counts: np.ndarray) -> float:
    """Shannon entropy in bits of the distribution proportional to ``counts``."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total == 0:
        return float("nan")
    p = counts[counts > 0] / total
    return float(-(p * np.log2(p)).sum())


def genre_matrix(frame: pl.DataFrame, n_items: int) -> np.ndarray:
    """An items x genres bool matrix from a frame with an ``item`` index and ``genres`` column
    (a list of names or a ``|``-separated string); genres in sorted order."""
    if "item" not in frame.columns or "genres" not in frame.columns:
        raise DataError(f"genres: expected columns 'item' and 'genres', got {frame.columns}")
    genres = pl.col("genres")
    if frame.schema["genres"] == pl.String:
        genres = genres.str.split("|")
    long = frame.select(pl.col("item").cast(pl.Int64), genres).explode("genres").drop_nulls()
    long = long.filter(pl.col("genres").str.len_chars() > 0)
    items = long.get_column("item").to_numpy()
    if len(items) and (items.min() < 0 or items.max() >= n_items):
        raise DataError(f"genres: item index outside 0..{n_items - 1}")
    names = long.get_column("genres").unique().sort()
    column = names.search_sorted(long.get_column("genres")).to_numpy()
    matrix = np.zeros((n_items, len(names)), dtype=bool)
    matrix[items, column] = True
    return matrix


def _is_sparse(value) -> bool:
    """A scipy sparse matrix or array, without importing scipy (0.2 s) when nothing made one."""
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and sparse.issparse(value)


def _train_pairs(train, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(train, Interactions):
        users, items = train.users, train.items
    elif isinstance(train, pl.DataFrame):
        if "user" not in train.columns or "item" not in train.columns:
            raise DataError(f"train: expected columns 'user' and 'item', got {train.columns}")
        users = train.get_column("user").to_numpy()
        items = train.get_column("item").to_numpy()
    elif _is_sparse(train):
        coo = train.tocoo()
        users, items = coo.row, coo.col
    else:
        raise DataError(f"train: expected Interactions, a polars frame or a sparse matrix, got {type(train).__name__}")
    items = np.asarray(items, dtype=np.int64)
    if len(items) and (items.min() < 0 or items.max() >= n_items):
        raise DataError(f"train: item index outside 0..{n_items - 1}")
    return np.asarray(users, dtype=np.int64), items


def _self_information(train, n_items: int) -> np.ndarray:
    """-log2 p(i), p(i) = share of train users with item i (smallest non-zero p where 0).

    Interactions hold each (user, item) pair once (their duplicates policy resolves repeats), so
    their holders are a bincount of the train items; other inputs are made unique first."""
    return _per_train(train, ("self_information", n_items), lambda: _information(train, n_items))


def _information(train, n_items: int) -> np.ndarray:
    if isinstance(train, Interactions):
        holders = np.bincount(train.items, minlength=n_items).astype(np.float64)
        n_users = int(np.count_nonzero(np.bincount(train.users)))
    else:
        users, items = _train_pairs(train, n_items)
        pairs = np.unique(users * n_items + items)
        holders = np.bincount(pairs % n_items, minlength=n_items).astype(np.float64)
        n_users = len(np.unique(users))
    if n_users == 0:
        raise DataError("train: no interactions, so no item popularity for novelty")
    p = holders / n_users
    p[p == 0] = p[p > 0].min()
    return -np.log2(p)


def _genre_masks(genres, n_items: int) -> np.ndarray:
    if isinstance(genres, pl.DataFrame):
        genres = genre_matrix(genres, n_items)
    elif _is_sparse(genres):
        genres = genres.toarray()
    genres = np.asarray(genres).astype(bool)
    if genres.ndim != 2 or genres.shape[0] != n_items:
        raise DataError(f"genres: expected an items x genres matrix with {n_items} rows, got shape {genres.shape}")
    n_words = max(1, -(-genres.shape[1] // 64))
    padded = np.zeros((n_items, n_words * 64), dtype=bool)
    padded[:, : genres.shape[1]] = genres
    bits = np.packbits(padded.reshape(n_items, n_words, 64), axis=2, bitorder="little")
    return bits.view(np.uint64).reshape(n_items, n_words)


@njit(cache=True)
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(parallel=True, cache=True)
def _ild_kernel(offsets, items, masks, cut, bounds):
    n_units = len(offsets) - 1
    out = np.full(n_units, np.nan)
    n_words = masks.shape[1]
    for chunk in prange(len(bounds) - 1):
        for u in range(bounds[chunk], bounds[chunk + 1]):
            lo = offsets[u]
            hi = min(offsets[u + 1], lo + cut)
            n = hi - lo
            if n < 2:
                continue
            total = 0.0
            for a in range(lo, hi):
                for b in range(a + 1, hi):
                    inter = 0
                    union = 0
                    for w in range(n_words):
                        x = masks[items[a], w]
                        y = masks[items[b], w]
                        inter += _popcount(x & y)
                        union += _popcount(x | y)
                    if union > 0:
                        total += 1.0 - inter / union
            out[u] = total / (n * (n - 1) / 2.0)
    return out
