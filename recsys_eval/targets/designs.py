"""Popularity-bias neutralising designs (Bellogín's thesis, section 4.6; docs/CONVENTIONS.md#designs).

- Uniform test: every item left in test has the same number of relevant test ratings, so that no
  item is easier to hit for being popular.
- Percentiles: items are split into m bins of (nearly) equal training ratings; each bin's items form
  a separate target set, evaluated on its own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from recsys_eval.core.split import Split
from recsys_eval.core.units import Targets
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.targets.build import DEFAULT_CHUNK_SIZE, UnitPlan, check_options, plan_units
from recsys_eval.targets.protocol import Protocol
from recsys_eval.targets.relevance import qrels, test_gains
from recsys_eval.targets.totals import ItemTotals

#: One line per design (the protocol's ``design`` in configs), for listings and glossaries.
DESIGNS = {
    "uniform_test": "test keeps per_item relevant ratings of every item it keeps (the rest move to "
                    "train), so that no item is easier to hit for being popular",
    "percentiles": "items cut into `bins` popularity bins of equal training ratings; each bin's items "
                   "form a target set of their own, results per bin",
}


def uniform_test(
    split: Split, n_per_item: int, *, threshold: float | None = None, seed: int = 0
) -> tuple[Split, dict[str, Any]]:
    """A new Split whose test side holds exactly ``n_per_item`` relevant ratings of every item it
    keeps, and what was moved.

    Items with at least ``n_per_item`` relevant test ratings keep a seeded uniform choice of that many
    (and their non-relevant test ratings); their other relevant test ratings move to train. Items
    with fewer are left out of test: all their test ratings move to train. Nothing is discarded.
    """
    stay, report = uniform_test_rows(split, n_per_item, threshold=threshold, seed=seed)
    return move_to_train(split, stay, report), report


def uniform_test_rows(
    split: Split, n_per_item: int, *, threshold: float | None = None, seed: int = 0
) -> tuple[np.ndarray, dict[str, Any]]:
    """Which test rows of ``split`` stay in test under :func:`uniform_test` (a bool per row, in the
    test side's row order), and the design's report. The choice is per item, among every user's
    relevant test ratings of the item: an engine that holds some users only takes these flags
    from where the whole test side is."""
    if isinstance(n_per_item, bool) or not isinstance(n_per_item, int) or n_per_item < 1:
        raise ConfigError(f"uniform test: n_per_item must be an integer >= 1, got {n_per_item!r}")
    gain = test_gains(split, threshold)
    test = split.test
    items = test.items
    relevant = gain > 0
    per_item = np.bincount(items[relevant], minlength=split.n_items)
    kept_items = per_item >= n_per_item
    if not kept_items.any():
        raise DataError(
            f"split {split.name!r}: uniform test with {n_per_item} relevant ratings per item leaves no "
            f"item in test (the most relevant test ratings of any item is {int(per_item.max())}); "
            "choose a smaller n_per_item"
        )
    candidates = np.flatnonzero(relevant & kept_items[items])
    keys = np.random.default_rng(seed).random(len(candidates))
    order = candidates[np.lexsort((keys, items[candidates]))]
    group_start = np.searchsorted(items[order], items[order], side="left")
    chosen = np.zeros(len(test), dtype=bool)
    chosen[order[np.arange(len(order)) - group_start < n_per_item]] = True
    stay = chosen | (~relevant & kept_items[items])
    report = {
        "design": "uniform_test",
        "n_per_item": n_per_item,
        "threshold": threshold,
        "seed": seed,
        "items_in_test": int(kept_items.sum()),
        "items_left_out": int(((per_item > 0) & ~kept_items).sum()),
        "relevant_moved_to_train": int((relevant & kept_items[items] & ~chosen).sum()),
        "left_out_moved_to_train": int((~kept_items[items]).sum()),
        "test_rows_before": len(test),
        "test_rows_after": int(stay.sum()),
    }
    return stay, report


def move_to_train(split: Split, stay: np.ndarray, report: dict[str, Any]) -> Split:
    """``split`` with the test rows not flagged in ``stay`` moved to the end of its train side
    (:func:`uniform_test_rows`), the design's ``report`` in its info."""
    stay_series = pl.Series(stay)
    test = split.test
    moved = test.frame.filter(~stay_series)
    train_frame = pl.concat([split.train.frame, moved.select(split.train.frame.columns)])
    info = {**split.info, "uniform_test": report}
    return Split(split.train.with_frame(train_frame), test.with_frame(test.frame.filter(stay_series)), split.name, info)


def popularity_bins(
    split: Split,
    m: int,
    protocol: Protocol | str,
    *,
    threshold: float | None = None,
    seed: int = 0,
    fresh_negatives: bool = False,
    sampling: str = "uniform",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    one_relevant: bool = False,
) -> list[tuple[dict[str, Any], Targets]]:
    """One Targets per popularity bin, with the bin's description (``one_relevant``: 1R targets in
    the compact form of :func:`~recsys_eval.targets.build_targets`).

    Items are ordered by training ratings (ascending, ties by item index) and cut into ``m`` bins of
    consecutive items holding (nearly) equal numbers of training ratings: an item goes to the bin
    where the midpoint of its ratings falls, every bin keeping at least one item. Bin 1 is the least
    popular (items never rated in training fall there). Within a bin, the protocol applies with
    candidates and test items restricted to the bin's items.
    """
    return [(info, plan.targets()) for info, plan in popularity_bin_plans(
        split, m, protocol, threshold=threshold, seed=seed, fresh_negatives=fresh_negatives, sampling=sampling,
        chunk_size=chunk_size, one_relevant=one_relevant)]


def popularity_bin_plans(
    split: Split,
    m: int,
    protocol: Protocol | str,
    *,
    threshold: float | None = None,
    seed: int = 0,
    fresh_negatives: bool = False,
    sampling: str = "uniform",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    one_relevant: bool = False,
    totals: ItemTotals | None = None,
) -> list[tuple[dict[str, Any], UnitPlan]]:
    """:func:`popularity_bins` as plans (:func:`~recsys_eval.targets.build.plan_targets`): each
    bin's units filled a chunk of users at a time by the caller. ``totals``: the whole fold's
    item totals when ``split`` holds only some of its users (the bins are the fold's)."""
    protocol = Protocol.parse(protocol)
    check_options(protocol, fresh_negatives, sampling, chunk_size)
    n_items = split.n_items
    totals = ItemTotals.of(split) if totals is None else totals
    counts = totals.train_counts
    check_bins(split.name, m, counts)
    judged = qrels(split, threshold)
    if protocol.relevant == "1R" and not (judged.gain > 0).any():
        raise DataError(f"split {split.name!r}: protocol {protocol.name} needs relevant test items")
    order, edges = _equal_rating_bins(counts, m)
    out = []
    for b in range(m):
        members = order[edges[b] : edges[b + 1]]
        pool = np.zeros(n_items, dtype=bool)
        pool[members] = True
        bin_seed = int(np.random.SeedSequence([seed, b]).generate_state(1, np.uint64)[0])
        plan = plan_units(split, protocol, judged, bin_seed, fresh_negatives, sampling, chunk_size, pool,
                          one_relevant=one_relevant, totals=totals)
        info = {
            "bin": b + 1,
            "bins": m,
            "items": len(members),
            "train_ratings": int(counts[members].sum()),
            "min_item_ratings": int(counts[members].min()),
            "max_item_ratings": int(counts[members].max()),
            "seed": bin_seed,
        }
        out.append((info, plan))
    return out


def check_bins(split_name: str, m: int, counts: np.ndarray) -> None:
    """Raise for a number of bins ``m`` the fold's train ``counts`` per item cannot be cut into."""
    if isinstance(m, bool) or not isinstance(m, int) or not 2 <= m <= len(counts):
        raise ConfigError(
            f"popularity percentiles: the number of bins must be an integer from 2 to the number of "
            f"items ({len(counts):,}), got {m!r}"
        )
    if counts.sum() == 0:
        raise DataError(f"split {split_name!r}: the train side is empty; items have no popularity")


def item_popularity_bins(counts: np.ndarray, m: int) -> np.ndarray:
    """The popularity bin (1 = least popular) of every item under the percentile design's binning
    of the training counts ``counts``: m bins of (nearly) equal numbers of training ratings."""
    order, edges = _equal_rating_bins(counts, m)
    bins = np.empty(len(counts), dtype=np.int32)
    bins[order] = np.repeat(np.arange(1, m + 1, dtype=np.int32), np.diff(edges))
    return bins


def _equal_rating_bins(counts: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Items by ascending count, and ``m + 1`` bin edges (positions) over that order."""
    n = len(counts)
    order = np.lexsort((np.arange(n), counts))
    sorted_counts = counts[order]
    midpoint = np.cumsum(sorted_counts) - sorted_counts / 2
    bin_of = np.minimum((midpoint * m / sorted_counts.sum()).astype(np.int64), m - 1)
    edges = np.searchsorted(bin_of, np.arange(m + 1), side="left")
    for b in range(1, m):  # every bin keeps at least one item (a handful of bins: no hot loop)
        edges[b] = min(max(edges[b], edges[b - 1] + 1), n - (m - b))
    edges[m] = n
    return order, edges
