"""Popularity-based beyond-accuracy metrics of top-k lists (docs/CONVENTIONS.md#popularity-bias,
docs/CONVENTIONS.md#discovery).

Every one reads the train popularity of items, phi(i) = the number of train users with item i
(:class:`ItemPopularity`), and, but for ARP, APLT, ACLT and surprisal, which items of each list are
relevant (a target with gain > 0). All are ratios of sums over every unit's top k that one numba
pass over the lists computes (:func:`list_sums`). Per unit, at cutoff k, over the listed top-k L
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

from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.interactions import Interactions
from recsys_eval.core.units import Rankings, Targets
from recsys_eval.errors import DataError
from recsys_eval.measure.calibration import add_item, genre_rows, miscalibration
from recsys_eval.measure.lists import per_train, train_pairs

#: Per-unit popularity metrics of lists (the run-level pair is :data:`PARITY_METRICS`).
LIST_METRICS = ("arp", "aplt", "aclt", "surprisal", "novelty", "epc", "efd", "unexpectedness", "serendipity")
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
    return ItemPopularity(holders, n_users, per_train(train, ("pop_rank", n_items), lambda: _pop_rank(holders)))


def _pop_rank(holders: np.ndarray) -> np.ndarray:
    """Every item's place in the most-popular order (0 the most popular; ties by item index)."""
    order = np.lexsort((np.arange(len(holders)), -holders))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank


#: Per unit and cutoff, the sums over its listed top k that every list metric is a ratio of.
(LISTED, HOLDERS, TAIL, SURPRISAL, SELF_INFORMATION, DISCOUNT, EPC_SUM, EFD_SUM, RELEVANT, RELEVANT_TAIL,
 UNEXPECTED, SERENDIPITOUS) = range(12)
N_SUMS = 12


@dataclass(frozen=True)
class ListSums:
    """units x cutoffs x :data:`N_SUMS` sums over every unit's top k (:func:`list_sums`), each
    unit's relevant-target count (EPC and EFD are undefined without one), and when asked the
    units x cutoffs miscalibration C_KL (:mod:`recsys_eval.measure.calibration`)."""

    sums: np.ndarray
    n_relevant: np.ndarray
    calibration: np.ndarray | None = None

    def ratio(self, top: int, bottom: int) -> np.ndarray:
        """units x cutoffs: sum ``top`` / sum ``bottom``, NaN where ``bottom`` is 0 (an empty list)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.sums[..., bottom] > 0, self.sums[..., top] / self.sums[..., bottom], np.nan)

    def metric(self, name: str) -> np.ndarray:
        """units x cutoffs: metric ``name`` of :data:`LIST_METRICS`."""
        if name == "aclt":
            return self.sums[..., TAIL].copy()
        if name in ("epc", "efd"):
            values = self.ratio(EPC_SUM if name == "epc" else EFD_SUM, DISCOUNT)
            values[np.isnan(values)] = 0.0  # an empty list discovers nothing
            values[self.n_relevant == 0] = np.nan
            return values
        top = {"arp": HOLDERS, "aplt": TAIL, "surprisal": SURPRISAL, "novelty": SELF_INFORMATION,
               "unexpectedness": UNEXPECTED, "serendipity": SERENDIPITOUS}[name]
        return self.ratio(top, LISTED)


def list_sums(rankings: Rankings, cutoffs: list[int], popularity: ItemPopularity, head: np.ndarray, *,
              targets: Targets | None = None, train=None, most_popular: bool = False, surprisal: bool = False,
              genres: np.ndarray | None = None, alpha: float = 0.01) -> ListSums:
    """The :data:`N_SUMS` sums of every unit's top k, for each cutoff, in one pass over the lists
    (a numba kernel over chunks of units): listed items; their phi(i), long-tail flags, surprisal
    and self-information; the rank discounts disc(r) = 1/log2(r + 1) and EPC's and EFD's discounted relevant
    gains; relevant items (a target with gain > 0: ``targets``, the rankings' own) and relevant
    long-tail ones; with ``train`` and ``most_popular``, the items outside MostPop's top k for the
    unit's user (its most popular items less the user's train items, ties by item index), relevant
    or not. With ``train`` and ``genres`` (items x genres bool), the miscalibration C_KL with
    smoothing ``alpha`` too, in the same walk of each user's train items and list."""
    n_items = len(popularity.holders)
    if targets is not None and targets.n_units != rankings.n_units:
        raise DataError(f"rankings have {rankings.n_units:,} units, targets {targets.n_units:,}: the "
                        "beyond-accuracy metrics that read relevance need the rankings' own targets")
    no_targets = np.zeros(rankings.n_units + 1, dtype=np.int64)
    t_offsets, t_items, t_gain = ((targets.offsets, targets.items, targets.gain) if targets is not None
                                  else (no_targets, np.zeros(0, np.int32), np.zeros(0, np.float32)))  # a Targets' dtypes
    if train is not None:
        indptr, indices = train_rows(train, n_items, n_users=int(rankings.unit_user.max(initial=-1)) + 1)
    else:
        indptr, indices = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)
    calibrate = genres is not None and train is not None
    g_rows, g_weight = genre_rows(genres) if calibrate else (np.zeros((1, 1), dtype=np.uint8), np.zeros(1))
    calibration = np.full((rankings.n_units, len(cutoffs)) if calibrate else (0, 0), np.nan)
    item_rows = np.zeros((n_items, _ITEM_ROW))  # one cache line an item: what a listed item adds
    item_rows[:, :_POP_PLACE] = np.column_stack([
        popularity.holders, (~head).astype(np.float64), popularity.surprisal() if surprisal else np.zeros(n_items),
        1.0 - popularity.holders / popularity.n_users, popularity.discovery_information(),
        popularity.self_information()])
    item_rows[:, _POP_PLACE] = popularity.pop_rank
    discount = 1.0 / np.log2(np.arange(cutoffs[-1], dtype=np.float64) + 2.0)  # by 0-based rank
    out = np.zeros((rankings.n_units, len(cutoffs), N_SUMS))
    run_chunks(_list_sums_chunk, chunk_bounds(rankings.n_units), rankings.offsets, rankings.items, rankings.unit_user,
               t_offsets, t_items, t_gain,
               item_rows, discount, indptr, indices, popularity.pop_rank, most_popular and train is not None,
               np.asarray(cutoffs, dtype=np.int64), out, g_rows, g_weight, genres.shape[1] if calibrate else 0,
               float(alpha), calibration)
    n_relevant = targets.n_relevant if targets is not None else np.zeros(rankings.n_units, dtype=np.int64)
    return ListSums(out, n_relevant, calibration if calibrate else None)


#: An item's row in the list-sums kernel: its phi(i), tail flag, surprisal, EPC gain 1 - phi(i)/|U|,
#: EFD gain -log2 p(i | seen), self-information, then its place in the most-popular order; 8
#: float64, one 64-byte cache line.
_ITEM_ROW, _POP_PLACE = 8, 6


@njit(cache=True, nogil=True)
def _list_sums_chunk(lo, hi, offsets, items, unit_user, t_offsets, t_items, t_gain, item_rows, discount, indptr,
                     indices, pop_rank, most_popular, cutoffs, out, g_rows, g_weight, n_genres, alpha, calibration):
    """The sums of units lo:hi (:func:`list_sums`), and with ``n_genres`` > 0 their C_KL
    (``calibration``; the user's genre profile p from the same walk of its train items that marks
    them for MostPop, the list's genre sums q from the walk of the list)."""
    n_cut = len(cutoffs)
    kmax = cutoffs[n_cut - 1]
    seen = np.zeros(len(pop_rank), dtype=np.bool_)  # by place in that order: the user's train items
    bound = np.zeros(n_cut, dtype=np.int64)  # per cutoff, the first place past MostPop's top k
    listed_rank = np.zeros(kmax, dtype=np.int64)  # each listed item's place in the most-popular order
    relevant = np.zeros(kmax)
    running = np.zeros(N_SUMS)
    marked = np.zeros(len(pop_rank), dtype=np.bool_)  # the unit's relevant targets, unmarked after it
    profile = np.zeros(n_genres)  # calibration's p and q
    listed_genres = np.zeros(n_genres)
    for u in range(lo, hi):
        first, length = offsets[u], min(offsets[u + 1] - offsets[u], kmax)
        for j in range(t_offsets[u], t_offsets[u + 1]):
            marked[t_items[j]] = t_gain[j] > 0
        for g in range(n_genres):
            profile[g] = 0.0
            listed_genres[g] = 0.0
        n_profile, n_listed = 0, 0
        user = unit_user[u]
        walk_train = most_popular or n_genres > 0  # else ``indptr`` is a placeholder: never index it
        for j in range(indptr[user] if walk_train else 0, indptr[user + 1] if walk_train else 0):
            if most_popular:
                seen[pop_rank[indices[j]]] = True
            if n_genres > 0:
                n_profile += add_item(indices[j], g_rows, g_weight, profile)
        for g in range(n_genres):
            profile[g] /= max(n_profile, 1)
        if most_popular:
            _most_popular_bounds(seen, cutoffs, bound)
        for m in range(N_SUMS):
            running[m] = 0.0
        c = 0
        for r in range(length + 1):
            while c < n_cut and (r == cutoffs[c] or r == length):
                for m in range(UNEXPECTED):  # a loop: a slice assignment compiles numba's shape-error code
                    out[u, c, m] = running[m]
                if most_popular:
                    for j in range(r):
                        if seen[listed_rank[j]] or listed_rank[j] >= bound[c]:
                            out[u, c, UNEXPECTED] += 1.0
                            out[u, c, SERENDIPITOUS] += relevant[j]
                if n_profile > 0 and n_listed > 0:
                    calibration[u, c] = miscalibration(profile, listed_genres, n_listed, alpha)
                c += 1
            if r == length:
                break
            item = items[first + r]
            relevant[r] = 1.0 if marked[item] else 0.0
            tail = item_rows[item, 1]
            running[LISTED] += 1.0
            running[HOLDERS] += item_rows[item, 0]
            running[TAIL] += tail
            running[SURPRISAL] += item_rows[item, 2]
            running[SELF_INFORMATION] += item_rows[item, 5]
            running[DISCOUNT] += discount[r]
            running[EPC_SUM] += discount[r] * relevant[r] * item_rows[item, 3]
            running[EFD_SUM] += discount[r] * relevant[r] * item_rows[item, 4]
            running[RELEVANT] += relevant[r]
            running[RELEVANT_TAIL] += relevant[r] * tail
            if n_profile > 0:
                n_listed += add_item(item, g_rows, g_weight, listed_genres)
            listed_rank[r] = np.int64(item_rows[item, _POP_PLACE])
        for j in range(t_offsets[u], t_offsets[u + 1]):
            marked[t_items[j]] = False
        if most_popular:
            for j in range(indptr[unit_user[u]], indptr[unit_user[u] + 1]):
                seen[pop_rank[indices[j]]] = False


@njit(cache=True, nogil=True)
def _most_popular_bounds(seen, cutoffs, bound):
    """Per cutoff k, the first place in the most-popular order past the user's MostPop top k (its
    k-th item not ``seen`` in train, + 1; the catalogue's end when fewer remain): an unseen item
    is in MostPop's top k iff its place is below the bound (walking the order once, no sort)."""
    c, count = 0, 0
    for place in range(len(seen)):
        if c == len(cutoffs):
            return
        if not seen[place]:
            count += 1
            if count == cutoffs[c]:
                bound[c] = place + 1
                c += 1
    for rest in range(c, len(cutoffs)):
        bound[rest] = len(seen)


def train_rows(train, n_items: int, n_users: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The train items of every user index as CSR (``indptr``, ``indices``), each pair once
    (an Interactions' cached matrix; other inputs made unique), with rows for at least ``n_users``
    users (a user without train items has an empty row)."""
    if isinstance(train, Interactions):
        csr = train.csr()
        indptr, indices = csr.indptr, csr.indices
    else:
        users, items = train_pairs(train, n_items)
        pairs = np.unique(users * n_items + items)
        indptr = np.concatenate([[0], np.cumsum(np.bincount(pairs // n_items))]).astype(np.int64)
        indices = pairs % n_items
    if len(indptr) < n_users + 1:
        indptr = np.concatenate([indptr, np.full(n_users + 1 - len(indptr), indptr[-1])])
    return indptr, indices


class PopularityParity:
    """Counts of a run's lists per cutoff and item group (head, tail), added a chunk of units at a
    time, from which ``pop_rsp`` and ``pop_reo`` follow (Zhu et al. 2020):

    P(R@k | g) = sum_u |L_u@k & G_g| / sum_u |G_g - I_u| (I_u: the user's train items), and
    P(R@k | g, y=1) = sum_u |L_u@k & G_g & Rel_u| / sum_u |G_g & Rel_u|; each metric is the
    population std over the two groups / their mean = |a - b| / (a + b), NaN when a group has no
    candidate (no relevant target, for REO) or a + b = 0."""

    def __init__(self, train, n_items: int, cutoffs: Sequence[int], head_share: float) -> None:
        self.cutoffs = sorted(cutoffs)
        self.popularity = item_popularity(train, n_items)
        self.head = self.popularity.head(head_share)
        self._train, self._head_key = train, ("train_head", n_items, head_share)
        self._user_counts: tuple[np.ndarray, np.ndarray] | None = None
        self.listed = np.zeros((len(self.cutoffs), 2))
        self.listed_relevant = np.zeros((len(self.cutoffs), 2))
        self.candidates = np.zeros(2)
        self.relevant = np.zeros(2)

    def add(self, rankings: Rankings, targets: Targets | None, sums: ListSums | None = None) -> None:
        """Add the counts of ``rankings`` (``targets``, their own, give PopREO's; without them its
        counts stay 0 and its value undefined); ``sums``: their :func:`list_sums` when already made
        (with this head, and with ``targets``)."""
        if sums is None:
            sums = list_sums(rankings, self.cutoffs, self.popularity, self.head, targets=targets)
        sums = sums.sums.sum(axis=0)
        self.listed += np.column_stack([sums[:, LISTED] - sums[:, TAIL], sums[:, TAIL]])
        self.listed_relevant += np.column_stack([sums[:, RELEVANT] - sums[:, RELEVANT_TAIL], sums[:, RELEVANT_TAIL]])
        seen_head, seen_all = (_of_users(counts, rankings.unit_user) for counts in self.user_counts())
        n_head = float(self.head.sum())
        self.candidates += [(n_head - seen_head).sum(), (len(self.head) - n_head - (seen_all - seen_head)).sum()]
        if targets is not None:
            rel_head = self.head[targets.items[targets.gain > 0]]
            self.relevant += [rel_head.sum(), (~rel_head).sum()]

    def user_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """Per user index, its train items in the head, and in all: read when lists are first added,
        so that a parity made only to merge others' counts (:meth:`add_state`) reads no user."""
        if self._user_counts is None:
            train, n_items = self._train, self._head_key[1]
            self._user_counts = per_train(train, self._head_key, lambda: _train_head_counts(train, n_items, self.head))
        return self._user_counts

    #: The counts :meth:`values` is made of, per cutoff and group or per group.
    STATE = ("listed", "listed_relevant", "candidates", "relevant")

    def state(self) -> tuple[np.ndarray, ...]:
        """The counts added so far (:data:`STATE`): integers held in floats, exact, so that the
        states of disjoint users add up to the same values in any order."""
        return tuple(getattr(self, name) for name in self.STATE)

    def add_state(self, state: tuple[np.ndarray, ...]) -> None:
        """Add the counts of other users' lists (another parity's :meth:`state`)."""
        for name, counts in zip(self.STATE, state, strict=True):
            setattr(self, name, getattr(self, name) + counts)

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
