"""Popularity-based beyond-accuracy metrics of top-k lists (docs/CONVENTIONS.md#popularity-bias,
docs/CONVENTIONS.md#discovery).

Every one reads the train popularity of items, phi(i) = the number of train users with item i
(:class:`ItemPopularity`), and, but for ARP, APLT, ACLT and surprisal, which items of each list are
relevant (a target with gain > 0: :func:`listed_relevant`). Per unit, at cutoff k, over the listed
top-k L (|L| <= k), rank r from 1:

- ``arp``: mean phi(i) over L (Abdollahpouri et al. 2019); NaN for an empty list;
- ``aplt``: share of L in the long tail T (the items outside the popular head);
- ``aclt``: count of L in the long tail (0 for an empty list);
- ``surprisal``: mean over L of -log2(phi(i)/|U|) / log2|U|, an item no train user has counting 1
  (RePlay's normalised self-information); NaN for an empty list;
- ``epc``: sum over L of disc(r) rel(r) (1 - phi(i)/|U|), / the sum of disc(r) over L, disc(r) =
  1/log2(r + 1) (Vargas & Castells 2011, as Elliot has it); NaN for a unit without relevant item;
- ``efd``: the same with -log2 p(i | seen), p(i | seen) = phi(i) / sum_j phi(j) (an item without
  train user takes the smallest non-zero p);
- ``unexpectedness``: share of L outside MostPop's top k for the unit's user (the most popular
  items the user has not in train, ties by item index; Kaminskas & Bridge 2016's primitive model);
- ``serendipity``: share of L both relevant and unexpected (Kaminskas & Bridge 2016).

Per run, from counts summed over every unit (so chunks of users add up, :class:`PopularityParity`):
``pop_rsp`` and ``pop_reo`` (Zhu et al. 2020), std / mean of the head and tail groups'
recommendation probabilities, which for two groups is |a - b| / (a + b).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.interactions import Interactions
from recsys_eval.core.units import Rankings, Targets
from recsys_eval.errors import DataError
from recsys_eval.measure.lists import list_means, per_train, train_pairs

#: Per-unit popularity metrics of lists (the run-level pair is :data:`PARITY_METRICS`).
LIST_METRICS = ("arp", "aplt", "aclt", "surprisal", "epc", "efd", "unexpectedness", "serendipity")
#: The metrics that read which listed items are relevant.
RELEVANCE_METRICS = ("epc", "efd", "serendipity", "pop_reo")
#: Run-level fairness between the popular head and the long tail.
PARITY_METRICS = ("pop_rsp", "pop_reo")


@dataclass(frozen=True)
class ItemPopularity:
    """Train popularity of every item: ``holders`` (phi(i), train users with the item), the train
    user count ``n_users``, and each item's place in the most-popular order ``pop_rank`` (0 the
    most popular; ties by item index)."""

    holders: np.ndarray
    n_users: int

    @property
    def pop_rank(self) -> np.ndarray:
        order = np.lexsort((np.arange(len(self.holders)), -self.holders))
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        return rank

    def head(self, share: float) -> np.ndarray:
        """The popular head as a bool mask: the ceil(share x |C|) most popular catalogue items (C:
        the items some train user has; ties by item index). The long tail is every other item."""
        n_head = int(np.ceil(share * np.count_nonzero(self.holders)))
        head = np.zeros(len(self.holders), dtype=bool)
        head[np.argsort(self.pop_rank)[:n_head]] = True
        return head

    def self_information(self) -> np.ndarray:
        """-log2 phi(i)/|U|, an item without train user taking the smallest non-zero phi (novelty)."""
        return -np.log2(_floor_zero(self.holders / self.n_users))

    def discovery_information(self) -> np.ndarray:
        """-log2 p(i | seen), p(i | seen) = phi(i) / sum_j phi(j), an item without train user taking
        the smallest non-zero p (EFD; Vargas & Castells, as Elliot computes it)."""
        return -np.log2(_floor_zero(self.holders / self.holders.sum()))

    def surprisal(self) -> np.ndarray:
        """-log2(phi(i)/|U|) / log2 |U|, an item without train user counting as one user (RePlay)."""
        if self.n_users < 2:
            raise DataError("train: surprisal needs at least 2 train users (it divides by log2 |U|)")
        return -np.log2(np.maximum(self.holders, 1.0) / self.n_users) / np.log2(self.n_users)


def _floor_zero(p: np.ndarray) -> np.ndarray:
    p = p.copy()
    p[p == 0] = p[p > 0].min() if np.any(p > 0) else 1.0
    return p


def item_popularity(train, n_items: int) -> ItemPopularity:
    """:class:`ItemPopularity` of ``train`` (Interactions hold each pair once; other inputs, a frame
    of ``user, item`` or a users x items matrix, are made unique first)."""
    if isinstance(train, Interactions):
        holders = per_train(train, ("holders", n_items),
                            lambda: np.bincount(train.items, minlength=n_items).astype(np.float64))
        n_users = int(per_train(train, ("n_train_users",), lambda: np.array(np.count_nonzero(train.user_counts()))))
    else:
        users, items = train_pairs(train, n_items)
        pairs = np.unique(users * n_items + items)
        holders = np.bincount(pairs % n_items, minlength=n_items).astype(np.float64)
        n_users = len(np.unique(users))
    if n_users == 0:
        raise DataError("train: no interactions, so no item popularity")
    return ItemPopularity(holders, n_users)


def listed_relevant(rankings: Rankings, targets: Targets) -> np.ndarray:
    """Per list entry, 1.0 if its item is a relevant target (gain > 0) of its unit, else 0.0.
    Targets list a unit's items once each, ascending: a search of (unit, item) keys."""
    if targets.n_units != rankings.n_units:
        raise DataError(f"rankings have {rankings.n_units:,} units, targets {targets.n_units:,}: "
                        "the beyond-accuracy metrics that read relevance need the rankings' own targets")
    n_items = np.int64(targets.n_items)
    relevant = targets.gain > 0
    unit = np.repeat(np.arange(targets.n_units, dtype=np.int64), np.diff(targets.offsets))
    keys = (unit * n_items + targets.items)[relevant]  # ascending: units in order, items sorted
    entry_unit = np.repeat(np.arange(rankings.n_units, dtype=np.int64), rankings.lengths)
    wanted = entry_unit * n_items + rankings.items
    at = np.searchsorted(keys, wanted)
    found = at < len(keys)
    found[found] = keys[at[found]] == wanted[found]
    return found.astype(np.float64)


def entry_ranks(rankings: Rankings) -> np.ndarray:
    """Per list entry its 1-based rank in its unit's list."""
    unit = np.repeat(np.arange(rankings.n_units, dtype=np.int64), rankings.lengths)
    return np.arange(len(rankings.items), dtype=np.int64) - rankings.offsets[unit] + 1


def most_popular_ranks(rankings: Rankings, train: Interactions, pop_rank: np.ndarray) -> np.ndarray:
    """Per list entry, its item's 0-based place in the MostPop list of the unit's user: its global
    most-popular rank less the user's train items ranked above it (MostPop leaves those out); for
    an item of the user's train, which MostPop never lists, the item count (past every cutoff)."""
    indptr, indices = train_rows(train, len(pop_rank), n_users=int(rankings.unit_user.max(initial=-1)) + 1)
    out = np.empty(len(rankings.items), dtype=np.int64)
    run_chunks(_most_popular_chunk, chunk_bounds(rankings.n_units), rankings.offsets.astype(np.int64),
               rankings.items.astype(np.int64), rankings.unit_user.astype(np.int64), indptr, indices, pop_rank, out)
    return out


def train_rows(train, n_items: int, n_users: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The train items of every user index as CSR (``indptr``, ``indices``, int64), each pair once
    (an Interactions' cached matrix; other inputs made unique), with rows for at least ``n_users``
    users (a user without train items has an empty row)."""
    if isinstance(train, Interactions):
        csr = train.csr()
        indptr, indices = csr.indptr.astype(np.int64), csr.indices.astype(np.int64)
    else:
        users, items = train_pairs(train, n_items)
        pairs = np.unique(users * n_items + items)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(pairs // n_items))]).astype(np.int64)
        indices = pairs % n_items
    if len(indptr) < n_users + 1:
        indptr = np.concatenate([indptr, np.full(n_users + 1 - len(indptr), indptr[-1])])
    return indptr, indices


@njit(cache=True, nogil=True)
def _most_popular_chunk(lo, hi, offsets, items, unit_user, indptr, indices, pop_rank, out):
    for u in range(lo, hi):
        user = unit_user[u]
        seen = np.sort(pop_rank[indices[indptr[user]:indptr[user + 1]]])
        for e in range(offsets[u], offsets[u + 1]):
            g = pop_rank[items[e]]
            above = np.searchsorted(seen, g)
            # an item of the user's train is never in MostPop's list: past every cutoff
            out[e] = len(pop_rank) if above < len(seen) and seen[above] == g else g - above


def list_metric_values(name: str, rankings: Rankings, cutoffs: list[int], popularity: ItemPopularity, *,
                       head: np.ndarray | None = None, relevant: np.ndarray | None = None,
                       targets: Targets | None = None, train: Interactions | None = None) -> np.ndarray:
    """units x cutoffs: metric ``name`` of :data:`LIST_METRICS` on every unit's top-k lists."""
    items = rankings.items
    if name == "arp":
        return list_means(rankings, popularity.holders[items], cutoffs)
    if name in ("aplt", "aclt"):
        return list_means(rankings, (~head[items]).astype(np.float64), cutoffs, mean=name == "aplt")
    if name == "surprisal":
        return list_means(rankings, popularity.surprisal()[items], cutoffs)
    if name in ("epc", "efd"):
        gain = 1.0 - popularity.holders / popularity.n_users if name == "epc" else popularity.discovery_information()
        discount = 1.0 / np.log2(entry_ranks(rankings) + 1.0)
        values = list_means(rankings, relevant * gain[items], cutoffs, weights=discount)
        values[np.isnan(values)] = 0.0  # an empty list discovers nothing
        values[targets.n_relevant == 0] = np.nan
        return values
    place = most_popular_ranks(rankings, train, popularity.pop_rank)
    weight = relevant if name == "serendipity" else np.ones(len(items))
    return np.column_stack([list_means(rankings, weight * (place >= cut), [cut])[:, 0] for cut in cutoffs])


class PopularityParity:
    """Counts of a run's lists per cutoff and item group (head, tail), added a chunk of units at a
    time, from which ``pop_rsp`` and ``pop_reo`` follow (Zhu et al. 2020):

    P(R@k | g) = sum_u |L_u@k & G_g| / sum_u |G_g - I_u| (I_u: the user's train items), and
    P(R@k | g, y=1) = sum_u |L_u@k & G_g & Rel_u| / sum_u |G_g & Rel_u|; each metric is the
    population std over the two groups / their mean = |a - b| / (a + b), NaN when a group has no
    candidate (no relevant target, for REO) or a + b = 0."""

    def __init__(self, train, n_items: int, cutoffs: Sequence[int], head_share: float) -> None:
        self.cutoffs = sorted(cutoffs)
        self.head = item_popularity(train, n_items).head(head_share)
        indptr, indices = train_rows(train, n_items)
        rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        #: per user index: train items in the head, and in all
        self.train_head = np.bincount(rows, weights=self.head[indices], minlength=len(indptr) - 1)
        self.train_size = np.diff(indptr).astype(np.float64)
        self.listed = np.zeros((len(self.cutoffs), 2))
        self.listed_relevant = np.zeros((len(self.cutoffs), 2))
        self.candidates = np.zeros(2)
        self.relevant = np.zeros(2)

    def add(self, rankings: Rankings, targets: Targets | None) -> None:
        """Add the counts of ``rankings`` (``targets``, their own, give PopREO's; without them its
        counts stay 0 and its value undefined)."""
        tail = (~self.head[rankings.items]).astype(np.float64)
        relevant = listed_relevant(rankings, targets) if targets is not None else np.zeros(len(tail))
        for values, out in ((np.ones(len(tail)), self.listed), (relevant, self.listed_relevant)):
            in_tail = list_means(rankings, values * tail, self.cutoffs, mean=False).sum(axis=0)
            listed = list_means(rankings, values, self.cutoffs, mean=False).sum(axis=0)
            out += np.column_stack([listed - in_tail, in_tail])
        seen_head, seen_all = (_of_users(counts, rankings.unit_user) for counts in (self.train_head, self.train_size))
        n_head = float(self.head.sum())
        self.candidates += [(n_head - seen_head).sum(), (len(self.head) - n_head - (seen_all - seen_head)).sum()]
        if targets is not None:
            rel_head = self.head[targets.items[targets.gain > 0]]
            self.relevant += [rel_head.sum(), (~rel_head).sum()]

    def values(self, names: Sequence[str]) -> list[tuple[str, int, float]]:
        """(metric, k, value) of ``pop_rsp`` and ``pop_reo`` among ``names``, at every cutoff."""
        rows = []
        for name in PARITY_METRICS:
            if name not in names:
                continue
            top, bottom = (self.listed, self.candidates) if name == "pop_rsp" else (self.listed_relevant,
                                                                                     self.relevant)
            for c, cut in enumerate(self.cutoffs):
                rows.append((name, cut, _parity(top[c], bottom)))
        return rows


def _of_users(per_user: np.ndarray, users: np.ndarray) -> np.ndarray:
    """``per_user[users]``, 0 for a user index past its end (a user without train rows)."""
    users = users.astype(np.int64)
    padded = np.zeros(max(len(per_user), int(users.max(initial=-1)) + 1))
    padded[: len(per_user)] = per_user
    return padded[users]


def _parity(hits: np.ndarray, pool: np.ndarray) -> float:
    """std / mean of the two groups' probabilities hits / pool: |a - b| / (a + b)."""
    if np.any(pool == 0):
        return float("nan")
    a, b = hits / pool
    return float(abs(a - b) / (a + b)) if a + b > 0 else float("nan")
