"""Beyond accuracy, over all top-k lists of a run (docs/CONVENTIONS.md#beyond-accuracy).

Per unit (one row per unit):
- ``user_coverage``: 1 if the unit's list is non-empty, else 0 (its mean is the share of users
  with a list);
- ``novelty@k``: mean self-information -log2 p(i) of the listed items, p(i) = share of train users
  with item i; items no train user has take the smallest non-zero p. NaN for an empty list;
- ``ild@k``: intra-list diversity, the mean Jaccard distance 1 - |G_i & G_j| / |G_i | G_j| between
  the genre sets of every pair of listed items (0 for two items without genres). NaN below 2 items
  (:mod:`recsys_eval.measure.diversity`);
- ``calibration@k`` (:mod:`recsys_eval.measure.calibration`), and the popularity metrics ARP,
  APLT, ACLT, EPC, EFD, surprisal, unexpectedness and serendipity
  (:mod:`recsys_eval.measure.popularity`), all from one pass over each user's train items and list.

Per run (one row with null user and unit):
- ``catalog_coverage@k``: distinct items in the top-k lists that belong to the catalogue, over the
  catalogue size; the catalogue is the items of train when train is given, else every item;
- ``prediction_coverage``: distinct items ranked anywhere in the lists (no cutoff) over all items;
- ``gini@k``: Gini index of the exposure counts (appearances in top-k lists) of catalogue items,
  sum_i (2i - n - 1) c_(i) / (n sum c) over counts sorted ascending (0: equal exposure);
- ``entropy@k``: Shannon entropy in bits of the exposure distribution over catalogue items;
- ``pop_rsp@k``, ``pop_reo@k``: head/tail parity (:class:`~recsys_eval.measure.popularity.PopularityParity`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from numba import njit

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.results import PER_UNIT_COLUMNS, PER_UNIT_SCHEMA
from recsys_eval.core.units import Rankings, Targets
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.measure import listpass, popularity
from recsys_eval.measure.frames import concat_per_unit, long_frame
from recsys_eval.measure.lists import is_sparse, item_side, per_train, train_pairs, with_item_side
from recsys_eval.measure.metrics import BEYOND_METRICS, METRICS, check_cutoffs, check_metrics, metric_params

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
    targets: Targets | None = None,
    params: Mapping[str, float] | None = None,
    system: str = "system",
    protocol: str = "rankings",
    fold: str = "0",
    user_ids: pl.Series | Sequence | np.ndarray | None = None,
    exposure: RunExposure | None = None,
) -> pl.DataFrame:
    """Beyond-accuracy values in the per-unit schema.

    ``train`` (Interactions, a frame of ``user, item`` indices, or a users x items matrix) gives the
    item popularity (novelty, the popularity metrics), the catalogue and every user's profile
    (calibration, MostPop for unexpectedness); ``genres`` (an items x genres bool matrix, or a
    frame with ``item`` index and ``genres``, a list or a ``|``-separated string) is needed for ILD
    and calibration; ``targets``, the rankings' own, for the metrics that read relevance (EPC, EFD,
    serendipity, PopREO); ``params``: metric parameters (``calibration_alpha``, ``head_share``),
    their defaults where not given. Without ``metrics``, every metric the inputs allow.
    ``exposure``: a run's counts (:func:`run_exposure`, of the same ``train`` and ``params``) to add
    these lists to, for a caller measuring a run in chunks of users; its head/tail counts come from
    this call's list pass instead of a second one.
    """
    names = _beyond_names(metrics, train, genres, targets)
    cutoffs = check_cutoffs(k)
    params = metric_params(params or {})
    if len(rankings.items) and rankings.items.max() >= n_items:
        raise DataError(f"rankings: item index {int(rankings.items.max())} >= n_items {n_items}")
    labels = {"system": system, "protocol": protocol, "fold": str(fold)}

    per_unit = [name for name in names if name not in RUN_METRICS]
    widths = [len(_cutoffs_of(name, cutoffs)) for name in per_unit]
    at = dict(zip(per_unit, np.cumsum([0, *widths]).tolist(), strict=False))  # first rows, metric-major
    values = np.empty((sum(widths), rankings.n_units))  # every row is written
    if "user_coverage" in names:
        values[at["user_coverage"]] = rankings.lengths > 0
    totals = None  # the head/tail counts of PopRSP and PopREO, when the pass makes them
    passed = names + (list(popularity.PARITY_METRICS) if _parity_of(exposure, train, n_items, params) else [])
    if any(name in listpass.PASS_METRICS or name in popularity.PARITY_METRICS for name in passed):
        totals = _list_pass(passed, rankings, cutoffs, train, genres, targets, n_items, params, values,
                            {name: row for name, row in at.items() if name in listpass.PASS_METRICS})
    if exposure is not None:
        exposure.add(rankings, targets, totals if _parity_of(exposure, train, n_items, params) else None)
    frames = []
    if per_unit:
        frames.append(long_frame(values.T, [name for name in per_unit for _ in _cutoffs_of(name, cutoffs)],
                                 [cut for name in per_unit for cut in _cutoffs_of(name, cutoffs)],
                                 rankings.unit_user, user_ids, labels))
    if any(name in RUN_METRICS for name in names):
        counts = run_exposure(n_items, cutoffs, train, names, params)
        counts.add(rankings, targets, totals)
        user_type = frames[0].schema["user"] if frames else PER_UNIT_SCHEMA["user"]
        frames.append(run_frame(counts.values(names), labels, user_type))
    return concat_per_unit(frames)


def _parity_of(exposure: RunExposure | None, train, n_items: int, params: Mapping[str, float]) -> bool:
    """Whether ``exposure`` counts PopRSP's and PopREO's head and tail under the head this call's
    list pass reads (the same train's, kept, and the same share): then the pass makes its counts."""
    return (exposure is not None and exposure.parity is not None and isinstance(train, Interactions)
            and exposure.parity.head is popularity.head_of(train, n_items, params["head_share"]))


def _cutoffs_of(name: str, cutoffs: list[int]) -> list[int | None]:
    """The k of each of a per-unit metric's columns: every cutoff, or None without one."""
    return cutoffs if METRICS[name].cutoff else [None]


def _beyond_names(metrics, train, genres, targets) -> list[str]:
    """The metrics asked (every one the inputs allow without ``metrics``); a metric whose input is
    missing raises, naming it."""
    needs = {"train": train is not None, "genres": genres is not None, "targets": targets is not None}
    if metrics is None:
        return [m for m in BEYOND_METRICS if all(needs[need] for need in BEYOND_INPUTS.get(m, ()))]
    names = check_metrics(metrics, BEYOND_METRICS)
    check_beyond_inputs(names, **needs)
    return names


def check_beyond_inputs(names: Sequence[str], **given: bool) -> None:
    """Raise a ConfigError naming the first metric of ``names`` whose input (``train``, ``genres``,
    ``targets``: :data:`BEYOND_INPUTS`) is not ``given``."""
    for name in names:
        for need in BEYOND_INPUTS.get(name, ()):
            if not given.get(need, True):
                raise ConfigError(f"{name} needs {_INPUTS[need]}")


#: What each beyond-accuracy metric reads besides the lists (``train``, ``genres``, ``targets``).
BEYOND_INPUTS = {
    **{name: ("train",) for name in ("novelty", "arp", "aplt", "aclt", "surprisal", "unexpectedness", "pop_rsp")},
    **{name: ("train", "targets") for name in ("epc", "efd", "serendipity", "pop_reo")},
    "ild": ("genres",),
    "calibration": ("train", "genres"),
}
_INPUTS = {
    "train": "train interactions (item popularity and user profiles among train users)",
    "genres": "item genres (an items x genres matrix or a genres frame)",
    "targets": "the rankings' targets (which listed items are relevant)",
}


def _list_pass(names: list[str], rankings: Rankings, cutoffs: list[int], train, genres, targets, n_items: int,
               params: Mapping[str, float], values: np.ndarray, rows: dict[str, int]) -> np.ndarray | None:
    """The list pass (:func:`recsys_eval.measure.listpass.list_pass`) for the metrics of ``rows``
    among ``names`` (into ``values``), and PopRSP's and PopREO's head/tail counts, reading
    popularity, relevance, MostPop and genres only when a metric asks."""
    wanted = set(names)
    records = (popularity.item_records(train, n_items, params["head_share"], surprisal="surprisal" in wanted)
               if wanted & {*listpass.POPULARITY_METRICS, *popularity.PARITY_METRICS} else None)
    return listpass.list_pass(rankings, cutoffs, values, rows, records=records,
                              targets=targets if wanted & set(popularity.RELEVANCE_METRICS) else None, train=train,
                              genres=genre_bool_matrix(genres, n_items) if wanted & {"calibration", "ild"} else None,
                              alpha=params["calibration_alpha"])


#: The beyond-accuracy metrics of a whole run: functions of the exposure counts of its lists, and
#: the head/tail parity pair.
EXPOSURE_METRICS = ("catalog_coverage", "prediction_coverage", "gini", "entropy")
RUN_METRICS = (*EXPOSURE_METRICS, *popularity.PARITY_METRICS)


def run_exposure(n_items: int, cutoffs: list[int], train, names: Sequence[str],
                 params: Mapping[str, float]) -> RunExposure:
    """The run-level counts that the run metrics among ``names`` need: exposure, and the head/tail
    counts of PopRSP and PopREO (:class:`~recsys_eval.measure.popularity.PopularityParity`) when asked."""
    parity = None
    if any(name in popularity.PARITY_METRICS for name in names):
        if train is None:
            raise ConfigError(f"pop_rsp and pop_reo need {_INPUTS['train']}")
        parity = popularity.PopularityParity(train, n_items, cutoffs, params["head_share"])
    counted = any(name in EXPOSURE_METRICS for name in names)
    return RunExposure(n_items, cutoffs, catalogue_of(train, n_items), parity, counted=counted)


class RunExposure:
    """Exposure counts of a run's lists, added a chunk of units at a time: per cutoff, each item's
    appearances in the top-k lists, and whether it was ranked at all; the run-level metrics
    (catalogue and prediction coverage, Gini, entropy) follow from them, so a run measured in
    chunks of users gets the same values as one measured whole."""

    def __init__(self, n_items: int, cutoffs: list[int], catalogue: np.ndarray,
                 parity: popularity.PopularityParity | None = None, *, counted: bool = True) -> None:
        self.cutoffs = sorted(cutoffs)
        self.catalogue = catalogue
        self.counted = counted  # False: only the parity counts are asked, not the exposure metrics
        self.counts = np.zeros((len(cutoffs) if counted else 0, n_items), dtype=np.int64)
        self.ranked = np.zeros(n_items, dtype=bool)
        self.parity = parity

    def add(self, rankings: Rankings, targets: Targets | None = None, totals: np.ndarray | None = None) -> None:
        """One pass over the lists: each entry counted in its band of cutoffs, then the bands
        summed (an item in the top 5 is in the top 10 too); with PopRSP/PopREO's counts, the
        lists' head and tail counts too (``targets``: the rankings' own, which PopREO needs;
        ``totals``: their head/tail counts when the list pass already made them with the same
        head and relevance)."""
        if self.parity is not None:
            self.parity.add(rankings, targets, totals)
        if not self.counted:
            return
        by_band = np.zeros_like(self.counts)
        band_of_rank = np.searchsorted(np.asarray(self.cutoffs), np.arange(self.cutoffs[-1]), side="right")
        _band_counts(rankings.offsets, rankings.items, band_of_rank, by_band, self.ranked)
        self.counts += np.cumsum(by_band, axis=0)

    def state(self) -> dict[str, np.ndarray]:
        """A copy of the counts added so far, by name: exposure per cutoff and item, the items
        ranked, the parity's counts (:meth:`~recsys_eval.measure.popularity.PopularityParity.state`).
        Arrays over items and groups whose sums over disjoint users are exact in any order
        (:meth:`add_state`): a Spark fold's tasks' states merge on the driver, and a run measured in
        chunks of users can stop after a chunk and go on from the state it saved."""
        state = {"counts": self.counts.copy(), "ranked": self.ranked.copy()}
        return state | (self.parity.state() if self.parity is not None else {})

    def add_state(self, state: dict[str, np.ndarray]) -> None:
        """Add the counts of other users' lists (another exposure's :meth:`state`, of the same
        cutoffs and metrics); into a new exposure, the counts as that state saved them."""
        self.counts += state["counts"]
        self.ranked |= state["ranked"]
        if self.parity is not None:
            self.parity.add_state(state)

    def values(self, names: Sequence[str]) -> list[tuple[str, int | None, float]]:
        """(metric, k, value) of every run-level metric in ``names``, in their order, k ascending."""
        rows = []
        if "prediction_coverage" in names:
            rows.append(("prediction_coverage", None, float(self.ranked.mean())))
        for c, cut in enumerate(self.cutoffs if self.counted else []):
            counts = self.counts[c][self.catalogue]
            if "catalog_coverage" in names:
                rows.append(("catalog_coverage", cut, float((counts > 0).mean()) if len(counts) else np.nan))
            if "gini" in names:
                rows.append(("gini", cut, gini(counts)))
            if "entropy" in names:
                rows.append(("entropy", cut, entropy(counts)))
        if self.parity is not None:
            rows += self.parity.values(names)
        rows.sort(key=lambda row: (list(names).index(row[0]), row[1] or 0))
        return rows


@njit(cache=True, nogil=True)
def _band_counts(offsets, items, band_of_rank, by_band, ranked):
    """Count each list entry inside the largest cutoff in its band (``band_of_rank``: band c holds
    the ranks from cutoffs[c-1] to cutoffs[c] - 1), and mark every ranked item; one thread, one
    pass (the counts are shared)."""
    kmax = len(band_of_rank)
    for u in range(len(offsets) - 1):
        for j in range(offsets[u], offsets[u + 1]):
            if j - offsets[u] < kmax:
                by_band[band_of_rank[j - offsets[u]], items[j]] += 1
            ranked[items[j]] = True


def run_frame(rows: list[tuple[str, int | None, float]], labels: dict[str, str], user_type) -> pl.DataFrame:
    """Run-level values as per-unit rows (null user and unit), the labels as constant columns like
    :func:`~recsys_eval.measure.frames.long_frame`'s: appended to a per-unit table, its label
    columns stay constant instead of being written out row by row (a few ms a million rows)."""
    frame = pl.DataFrame(
        {"user": pl.Series([None] * len(rows), dtype=user_type), "unit": pl.Series([None] * len(rows), dtype=pl.Int64),
         "metric": [m for m, _, _ in rows], "k": [cut for _, cut, _ in rows], "value": [v for *_, v in rows]},
        schema={name: PER_UNIT_SCHEMA[name] if name != "user" else user_type
                for name in ("user", "unit", "metric", "k", "value")},
    )
    return frame.with_columns([pl.lit(labels[c], dtype=pl.String).alias(c) for c in ("system", "protocol", "fold")]
                              ).select(PER_UNIT_COLUMNS)


def catalogue_of(train, n_items: int) -> np.ndarray:
    """The catalogue: the items of train when given, else every item (read-only; kept with an
    Interactions, which every system and protocol of a fold measures against)."""
    if train is None:
        return np.ones(n_items, dtype=bool)
    return per_train(train, ("catalogue", n_items), lambda: _catalogue(train, n_items))


def whole_item_side(train: Interactions, n_items: int, names: Sequence[str],
                    params: Mapping[str, float]) -> dict[tuple, np.ndarray]:
    """Every item-side value the beyond-accuracy metrics ``names`` read of ``train`` (its items'
    popularity, most-popular order, catalogue, head of ``params["head_share"]`` and the list pass's
    item records, :func:`~recsys_eval.measure.lists.item_side`): what a chunk of its users measured
    apart from the others is given (:func:`~recsys_eval.measure.lists.with_item_side`), a few
    arrays over items."""
    popularity.item_popularity(train, n_items)
    catalogue_of(train, n_items)
    head_share = params["head_share"]
    popularity.head_of(train, n_items, head_share)
    popularity.item_records(train, n_items, head_share)  # PopRSP/PopREO's
    popularity.item_records(train, n_items, head_share, surprisal="surprisal" in names)  # the list pass's
    return item_side(train)


def counted_item_side(holders: np.ndarray, n_users: int, names: Sequence[str],
                      params: Mapping[str, float]) -> dict[tuple, np.ndarray]:
    """:func:`whole_item_side` of a train known by its counts alone: per item phi(i), the train
    users holding it (``holders``, over the whole item index), and ``n_users``, the train users;
    what Spark jobs count over a train no process holds (every item-side value is a function of
    these two: the catalogue is the items some train user holds)."""
    n_items = len(holders)
    counted = Interactions(pl.DataFrame(schema={"user": pl.Int32, "item": pl.Int32}), pl.Series("user_id", [], pl.Int64),
                           pl.Series("item_id", np.arange(n_items)))
    with_item_side(counted, {("holders", n_items): np.asarray(holders, dtype=np.float64),
                             ("n_train_users",): np.array(int(n_users)),
                             ("catalogue", n_items): np.asarray(holders) > 0})
    return whole_item_side(counted, n_items, names, params)


def item_genres(frame: pl.DataFrame, item_ids: pl.Series, name: str) -> np.ndarray:
    """The items x genres bool matrix (:func:`genre_matrix`) of a genres file read as ``frame``
    (``item`` raw ids, ``genres``) over the item index of raw ids ``item_ids`` (sorted); items
    outside it are left out, items it lacks have no genre. ``name``: the file, for messages."""
    if "item" not in frame.columns or "genres" not in frame.columns:
        raise DataError(f"{name}: expected columns 'item' and 'genres', got {frame.columns}")
    frame = frame.with_columns(pl.col("item").cast(item_ids.dtype, strict=False))
    known = frame.filter(pl.col("item").is_in(item_ids.implode()))
    known = known.with_columns(item_ids.search_sorted(known.get_column("item")).alias("item"))
    return genre_matrix(known, item_ids.len())


def _catalogue(train, n_items: int) -> np.ndarray:
    catalogue = np.zeros(n_items, dtype=bool)
    catalogue[train_pairs(train, n_items)[1]] = True
    return catalogue


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


def genre_bool_matrix(genres, n_items: int) -> np.ndarray:
    """Genres given as a frame, a sparse or a dense matrix, as an items x genres bool matrix."""
    if isinstance(genres, pl.DataFrame):
        genres = genre_matrix(genres, n_items)
    elif is_sparse(genres):
        genres = genres.toarray()
    genres = np.asarray(genres).astype(bool)
    if genres.ndim != 2 or genres.shape[0] != n_items:
        raise DataError(f"genres: expected an items x genres matrix with {n_items} rows, got shape {genres.shape}")
    return genres
