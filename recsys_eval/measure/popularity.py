"""Popularity-based beyond-accuracy metrics of top-k lists (docs/CONVENTIONS.md#popularity-bias,
docs/CONVENTIONS.md#discovery).

Every one reads the train popularity of items, phi(i) = the number of train users with item i
(:class:`ItemPopularity`), and, but for ARP, APLT, ACLT and surprisal, which items of each list are
relevant (a target with gain > 0). All are ratios of sums over every unit's top k, which the one
pass over the lists for every beyond-accuracy metric computes
(:func:`~recsys_eval.measure.listpass.list_pass`). Per unit, at cutoff k, over the listed top-k L
(|L| <= k), rank r from 1:

- ``arp``: mean phi(i) over L (Abdollahpouri et al. 2019); NaN for an empty list;
- ``aplt``: share of L in the long tail T (the items outside the popular head);
- ``aclt``: count of L in the long tail (0 for an empty list);
- ``novelty``: mean self-information -log2 phi(i)/|U| over L (:meth:`ItemPopularity.self_information`);
  NaN for an empty list;
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

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.units import Rankings, Targets
from recsys_eval.errors import DataError
from recsys_eval.measure.listpass import (
    LISTED,
    LISTED_RELEVANT,
    LISTED_RELEVANT_TAIL,
    LISTED_TAIL,
    ItemRecords,
    item_table,
    list_pass,
)
from recsys_eval.measure.lists import per_train, train_pairs, train_rows

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
    pop_rank: np.ndarray

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

    def discovery_shift(self) -> float:
        """log2(sum_j phi(j) / |U|): EFD's -log2 p(i | seen), p(i | seen) = phi(i) / sum_j phi(j),
        an item without train user taking the smallest non-zero p (Vargas & Castells, as Elliot
        computes it), is the self-information plus it (p(i | seen) = phi(i)/|U| x |U| / sum_j phi(j),
        the same item taking the smallest non-zero value of both)."""
        return float(np.log2(self.holders.sum() / self.n_users))

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
    return ItemPopularity(holders, n_users, per_train(train, ("pop_rank", n_items), lambda: _pop_rank(holders)))


def item_records(train, n_items: int, head_share: float, *, surprisal: bool = False) -> ItemRecords:
    """The list pass's record of every item (:func:`~recsys_eval.measure.listpass.item_table`)
    under the head of ``head_share``, kept with an Interactions (every system and protocol of a
    fold reads the same)."""
    return per_train(train, ("item records", n_items, head_share, surprisal),
                     lambda: item_table(item_popularity(train, n_items), head_of(train, n_items, head_share),
                                        surprisal=surprisal))


def head_of(train, n_items: int, head_share: float) -> np.ndarray:
    """:meth:`ItemPopularity.head` of ``train``, kept with an Interactions."""
    return per_train(train, ("head", n_items, head_share), lambda: item_popularity(train, n_items).head(head_share))


def _pop_rank(holders: np.ndarray) -> np.ndarray:
    """Every item's place in the most-popular order (0 the most popular; ties by item index)."""
    order = np.lexsort((np.arange(len(holders)), -holders))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank


#: The counts :class:`PopularityParity` adds a chunk of units at a time.
_ADDED = ("listed", "listed_relevant", "candidates", "relevant")


class PopularityParity:
    """Counts of a run's lists per cutoff and item group (head, tail), added a chunk of units at a
    time, from which ``pop_rsp`` and ``pop_reo`` follow (Zhu et al. 2020):

    P(R@k | g) = sum_u |L_u@k & G_g| / sum_u |G_g - I_u| (I_u: the user's train items), and
    P(R@k | g, y=1) = sum_u |L_u@k & G_g & Rel_u| / sum_u |G_g & Rel_u|; each metric is the
    population std over the two groups / their mean = |a - b| / (a + b), NaN when a group has no
    candidate (no relevant target, for REO) or a + b = 0."""

    def __init__(self, train, n_items: int, cutoffs: Sequence[int], head_share: float) -> None:
        self.cutoffs = sorted(cutoffs)
        self.head = head_of(train, n_items, head_share)
        self.records = item_records(train, n_items, head_share)
        self._train, self._head_key = train, ("train_head", n_items, head_share)
        self._user_counts: tuple[np.ndarray, np.ndarray] | None = None
        self.listed = np.zeros((len(self.cutoffs), 2))
        self.listed_relevant = np.zeros((len(self.cutoffs), 2))
        self.candidates = np.zeros(2)
        self.relevant = np.zeros(2)

    def add(self, rankings: Rankings, targets: Targets | None, totals: np.ndarray | None = None) -> None:
        """Add the counts of ``rankings`` (``targets``, their own, give PopREO's; without them its
        counts stay 0 and its value undefined); ``totals``: their head/tail counts when the list
        pass already made them (:func:`~recsys_eval.measure.listpass.list_pass`, with this head and
        with ``targets``)."""
        if totals is None:
            totals = list_pass(rankings, self.cutoffs, records=self.records, targets=targets)
        self.listed += np.column_stack([totals[:, LISTED] - totals[:, LISTED_TAIL], totals[:, LISTED_TAIL]])
        self.listed_relevant += np.column_stack([totals[:, LISTED_RELEVANT] - totals[:, LISTED_RELEVANT_TAIL],
                                                 totals[:, LISTED_RELEVANT_TAIL]])
        seen_head, seen_all = (_of_users(counts, rankings.unit_user) for counts in self.user_counts())
        n_head = float(self.head.sum())
        self.candidates += [(n_head - seen_head).sum(), (len(self.head) - n_head - (seen_all - seen_head)).sum()]
        if targets is not None:
            in_head, relevant = _relevant_in(targets.items, targets.gain, self.head)
            self.relevant += [in_head, relevant - in_head]

    def user_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Per user index, its train items in the head, and in all: read when lists are first added,
        so that a parity made only to merge others' counts (:meth:`add_state`) reads no user."""
        if self._user_counts is None:
            train, n_items = self._train, self._head_key[1]
            self._user_counts = per_train(train, self._head_key, lambda: _train_head_counts(train, n_items, self.head))
        return self._user_counts

    def state(self) -> dict[str, np.ndarray]:
        """A copy of the counts added so far (:data:`_ADDED`), by name (``parity_``...): integers
        held in floats, exact, so that the states of disjoint users add up to the same values in any
        order (:meth:`add_state`)."""
        return {f"parity_{name}": getattr(self, name).copy() for name in _ADDED}

    def add_state(self, state: dict[str, np.ndarray]) -> None:
        """Add the counts of other users' lists, or of the chunks done before a resume (another
        parity's :meth:`state`)."""
        for name in _ADDED:
            getattr(self, name)[...] += state[f"parity_{name}"]

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


def _train_head_counts(train, n_items: int, head: np.ndarray) -> np.ndarray:
    """2 x users: per user index, its train items in the head, and in all."""
    indptr, indices = train_rows(train, n_items)
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return np.vstack([np.bincount(rows, weights=head[indices], minlength=len(indptr) - 1),
                      np.diff(indptr).astype(np.float64)])


@njit(cache=True, nogil=True)
def _relevant_in(items, gain, head):
    """The relevant targets (gain > 0) of ``items`` in the ``head``, and in all: one pass, instead
    of masking, gathering and summing arrays as long as the targets (a few ms a million)."""
    in_head = relevant = 0
    for j in range(len(items)):
        if gain[j] > 0:
            relevant += 1
            in_head += head[items[j]]
    return in_head, relevant


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
