"""Targets from a Split and a Protocol (docs/CONVENTIONS.md#protocols).

For user u: C(u) the candidates (AI: every item; TI: the items with a test interaction; UT: Te(u)),
never including Tr(u); Rel(u) the relevant test items; N(u) the non-relevant target items, all of
C(u) \\ Rel(u) (AN) or a seeded sample of n of them (NN). Items u rated in test below the threshold
are non-relevant candidates.

Units: under AR one per user with at least one test item (a user whose test items are all
non-relevant is still a unit, with no relevant item), holding Rel(u) and N(u); under 1R one per
relevant (user, item) pair in (user, item) order, holding that item and N(u), the same N(u) for all of
a user's units unless ``fresh_negatives`` (a new sample per unit, as Cremonesi et al. 2010).

Full ranking (AI+AR+AN, TI+AR+AN) is never listed: the Targets hold only the relevant items, with
``all_candidates=True``, ``n_candidates`` per unit and, for TI, the ``candidates`` mask.

``one_relevant=True`` gives 1R protocols in their compact form (``Targets.one_relevant``): each
unit lists its relevant item only; the non-relevant items are listed once per user (a shared
sample, or UT+1R+AN's non-relevant test items), once per unit (fresh samples), or, for AI/TI+1R+AN,
not at all (every candidate less the user's relevant items). The samples are the same items the
listed form holds (same seed, same random streams), in a fraction of the memory, and 1R+AN needs
no cap on its size.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numba
import numpy as np

from recsys_eval.core.split import Split
from recsys_eval.core.units import Targets
from recsys_eval.errors import ConfigError, DataError, check_choice
from recsys_eval.targets.negatives import Negatives, check_negatives, fill_fixed
from recsys_eval.targets.protocol import Protocol
from recsys_eval.targets.relevance import (
    Qrels,
    check_disjoint,
    count_in_pool,
    qrels,
    row_sums,
    train_rows,
)
from recsys_eval.targets.sampling import Design, Plan, Pool, UserItems, alias_table, fill_units
from recsys_eval.targets.totals import ItemTotals

SAMPLING = ("uniform", "popularity")
DEFAULT_CHUNK_SIZE = 16_384
MAX_LISTED = 500_000_000  # listed (unit, item) entries: 4 GB of items and gains


def build_targets(
    split: Split,
    protocol: Protocol | str,
    *,
    threshold: float | None = None,
    seed: int = 0,
    fresh_negatives: bool = False,
    sampling: str = "uniform",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    one_relevant: bool = False,
    negatives: Negatives | None = None,
) -> Targets:
    """The target sets of every unit of ``split`` under ``protocol`` (e.g. ``"AI+1R+NN100"``).

    ``sampling="popularity"`` draws NN items in proportion to their training interactions (items
    never seen in training are then never drawn). The same seed gives the same targets whatever the
    ``chunk_size`` (users per chunk, which bounds the working memory). ``one_relevant``: 1R
    protocols in their compact form (module docstring; no effect on AR protocols). ``negatives``
    (NN protocols): each user's non-relevant items fixed by a file instead of drawn
    (:mod:`recsys_eval.targets.negatives`).
    """
    return plan_targets(split, protocol, threshold=threshold, seed=seed, fresh_negatives=fresh_negatives,
                        sampling=sampling, chunk_size=chunk_size, one_relevant=one_relevant,
                        negatives=negatives).targets()


def iter_targets(
    split: Split,
    protocol: Protocol | str,
    *,
    threshold: float | None = None,
    seed: int = 0,
    fresh_negatives: bool = False,
    sampling: str = "uniform",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    one_relevant: bool = False,
    negatives: Negatives | None = None,
) -> Iterator[Targets]:
    """The targets of :func:`build_targets`, a chunk of ``chunk_size`` users at a time (memory
    bounded by the chunk); concatenated, the chunks are exactly ``build_targets``'s units."""
    plan = plan_targets(split, protocol, threshold=threshold, seed=seed, fresh_negatives=fresh_negatives,
                        sampling=sampling, chunk_size=chunk_size, one_relevant=one_relevant, negatives=negatives)
    for lo in range(0, max(len(plan.users), 1), chunk_size):
        yield plan.targets(lo, min(lo + chunk_size, len(plan.users)))


def plan_targets(
    split: Split,
    protocol: Protocol | str,
    *,
    threshold: float | None = None,
    seed: int = 0,
    fresh_negatives: bool = False,
    sampling: str = "uniform",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    one_relevant: bool = False,
    negatives: Negatives | None = None,
    totals: ItemTotals | None = None,
) -> UnitPlan:
    """What :func:`build_targets` fills units from, without filling any: ``plan.users`` (the
    users with units, ascending user indices) and ``plan.targets(lo, hi)``, the units of
    ``users[lo:hi]``, for a caller that picks its own chunks (e.g. the same user range across
    several protocols). ``totals``: the item totals of the whole fold when ``split`` holds only
    some of its users (:class:`~recsys_eval.targets.totals.ItemTotals`; default: ``split``'s)."""
    protocol = Protocol.parse(protocol)
    check_options(protocol, fresh_negatives, sampling, chunk_size, negatives is not None)
    judged = qrels(split, threshold)
    if protocol.relevant == "1R" and not (judged.gain > 0).any():
        raise DataError(
            f"split {split.name!r}: protocol {protocol.name} needs relevant test items, and none "
            f"reaches the threshold {threshold}"
        )
    return plan_units(split, protocol, judged, seed, fresh_negatives, sampling, chunk_size, one_relevant=one_relevant,
                      negatives=negatives, totals=totals)


def check_options(protocol: Protocol, fresh_negatives: bool, sampling: str, chunk_size: int,
                  fixed: bool = False) -> None:
    """Raise ConfigError for an option the protocol does not take or a bad chunk size."""
    check_choice("sampling", sampling, SAMPLING)
    sampled = protocol.nonrelevant == "NN"
    check_fixed(protocol, fresh_negatives, sampling, fixed)
    if fresh_negatives and not (sampled and protocol.relevant == "1R"):
        raise ConfigError(
            f"fresh_negatives applies to 1R+NN protocols (a new sample per ranking), not {protocol.name}"
        )
    if sampling != "uniform" and not sampled:
        raise ConfigError(f"sampling={sampling!r} applies to NN protocols, not {protocol.name}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ConfigError(f"chunk_size must be a positive number of users, got {chunk_size!r}")


def check_fixed(protocol: Protocol, fresh_negatives: bool, sampling: str, fixed: bool) -> None:
    """Negatives from a file replace one shared uniform sample per user, within AI or TI
    candidates: a ConfigError for any other protocol or option."""
    if not fixed:
        return
    if protocol.nonrelevant != "NN" or protocol.candidates == "UT":
        raise ConfigError(f"negatives from a file replace the sample of an AI or TI +NN protocol, not {protocol.name}")
    if fresh_negatives or sampling != "uniform":
        raise ConfigError("negatives from a file are one list per user: they take neither fresh_negatives "
                          "nor popularity sampling")


def plan_units(
    split: Split,
    protocol: Protocol,
    judged: Qrels,
    seed: int,
    fresh_negatives: bool = False,
    sampling: str = "uniform",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    item_pool: np.ndarray | None = None,
    *,
    one_relevant: bool = False,
    negatives: Negatives | None = None,
    totals: ItemTotals | None = None,
) -> UnitPlan:
    """Units, sizes and sampling inputs of a protocol; ``item_pool`` (a bool mask over items)
    restricts candidates and test items to a subset (a popularity bin); ``one_relevant``: 1R
    targets in their compact form; ``totals``: the whole fold's test items (TI) and train counts
    (popularity sampling), default ``split``'s."""
    n_items = split.n_items
    totals = ItemTotals.of(split) if totals is None else totals
    tr_ptr, tr_idx = train_rows(split.train)
    check_disjoint(split, tr_ptr, tr_idx, judged)
    if item_pool is not None:
        judged = judged.restrict(item_pool)
    relevant = judged.gain > 0
    n_rel = row_sums(relevant, judged.indptr)
    if protocol.relevant == "AR":
        users = np.flatnonzero(judged.counts() > 0).astype(np.int32)
    else:
        users = np.flatnonzero(n_rel > 0).astype(np.int32)

    candidates = None  # the global candidate pool, None = every item
    if protocol.candidates == "TI":
        candidates = totals.in_test
    if item_pool is not None:
        candidates = item_pool if candidates is None else candidates & item_pool
    pool = np.ones(n_items, dtype=bool) if candidates is None else candidates

    if protocol.full_ranking:
        n_train_in_pool = count_in_pool(tr_ptr, tr_idx, pool, users)
        return UnitPlan(
            protocol, n_items, users, judged, candidates=candidates,
            n_candidates=int(pool.sum()) - n_train_in_pool,
        )

    weighted = sampling == "popularity"
    weight = totals.train_counts.astype(np.float64) if weighted else np.ones(n_items)
    if weighted:
        pool = pool & (weight > 0)
    if protocol.candidates == "UT":
        usable = ~relevant & (weight[judged.items] > 0)
        avail = row_sums(usable, judged.indptr)[users]
    else:
        relevant_in_pool = row_sums(relevant & pool[judged.items], judged.indptr)[users]
        avail = int(pool.sum()) - count_in_pool(tr_ptr, tr_idx, pool, users) - relevant_in_pool
    m = avail if protocol.nonrelevant == "AN" else np.minimum(avail, protocol.n)
    fixed = None
    if negatives is not None:
        check_fixed(protocol, fresh_negatives, sampling, True)
        m = avail = check_negatives(negatives, split, judged, tr_ptr, tr_idx, users, protocol.n, candidates)
        fixed = (negatives.indptr, negatives.items)
    pool_items = np.flatnonzero(pool).astype(np.int32)
    if weighted and len(pool_items):
        prob, alias = alias_table(weight[pool_items])
    else:
        prob, alias = np.ones(1), np.zeros(1, dtype=np.int64)
    return UnitPlan(
        protocol, n_items, users, judged, candidates=candidates, m=m.astype(np.int64), avail=avail.astype(np.int64),
        n_rel=n_rel[users], fresh=fresh_negatives, seed=seed, weighted=weighted, weight=weight,
        pool_items=pool_items, prob=prob, alias=alias, tr_ptr=tr_ptr,
        tr_idx=tr_idx, chunk_size=chunk_size, one_relevant=one_relevant and protocol.relevant == "1R", fixed=fixed,
    )


@dataclass
class UnitPlan:
    """Everything needed to fill the units of users ``users[lo:hi]``, chunk by chunk.

    Full ranking needs only ``candidates`` (the global candidate pool, also that of one-relevant
    1R+AN targets) and ``n_candidates``; listed targets the rest: per unit
    user, ``avail`` = |C(u) \\ Rel(u)| (positive-weight items only when weighted), ``m`` the
    non-relevant items each of its units lists (min(n, avail), or avail under AN), ``n_rel`` = |Rel(u)|.
    """

    protocol: Protocol
    n_items: int
    users: np.ndarray
    judged: Qrels
    candidates: np.ndarray | None = None
    n_candidates: np.ndarray | None = None
    m: np.ndarray | None = None
    avail: np.ndarray | None = None
    n_rel: np.ndarray | None = None
    fresh: bool = False
    seed: int = 0
    weighted: bool = False
    weight: np.ndarray | None = None
    pool_items: np.ndarray | None = None
    prob: np.ndarray | None = None
    alias: np.ndarray | None = None
    tr_ptr: np.ndarray | None = None
    tr_idx: np.ndarray | None = None
    chunk_size: int = DEFAULT_CHUNK_SIZE
    one_relevant: bool = False
    #: Negatives from a file, ``(indptr, items)`` by user, in place of the sample (``m`` is their count).
    fixed: tuple[np.ndarray, np.ndarray] | None = None
    #: Per user index, the user's index in the fold, which keys its samples' random streams
    #: (:class:`~recsys_eval.targets.sampling.Plan`): None when the split's indices are the fold's;
    #: a Spark task numbers its chunk's users from 0 (recsys_eval.engine.targets).
    user_keys: np.ndarray | None = None

    def targets(self, lo: int = 0, hi: int | None = None) -> Targets:
        """The Targets of the units of ``users[lo:hi]`` (all users by default)."""
        hi = len(self.users) if hi is None else hi
        if self.protocol.full_ranking:
            return self._full_ranking(lo, hi)
        if self.one_relevant:
            return self._one_relevant(lo, hi)
        one_relevant = self.protocol.relevant == "1R"
        users = self.users[lo:hi]
        m = self.m[lo:hi]
        n_rel = self.n_rel[lo:hi]
        units_per_user = n_rel if one_relevant else np.ones(len(users), dtype=np.int64)
        first_unit = np.concatenate([[0], np.cumsum(units_per_user)]).astype(np.int64)
        sizes = np.repeat(1 + m, n_rel) if one_relevant else n_rel + m
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        items, gain = self._fill(lo, hi, first_unit, offsets, one_relevant, negatives_only=False)
        return Targets(
            np.repeat(users, units_per_user).astype(np.int32), offsets, items, gain, self.n_items,
            protocol=self.protocol.name,
        )

    def _fill(self, lo: int, hi: int, first_unit: np.ndarray, offsets: np.ndarray, per_relevant: bool,
              negatives_only: bool) -> tuple[np.ndarray, np.ndarray]:
        """Items and gains of the lists of users ``lo:hi``: one list per user (its relevant items
        and sample), or one per relevant item (``per_relevant``); ``negatives_only`` leaves the
        relevant items out of the lists. ``first_unit`` is each user's first list, ``offsets``
        the lists' bounds."""
        if offsets[-1] > MAX_LISTED:
            raise ConfigError(
                f"protocol {self.protocol.name} lists {offsets[-1]:,} (unit, item) pairs, more than "
                f"{MAX_LISTED:,}; use NN sampling, AR+AN (full ranking, never listed), one-relevant "
                "targets (1R+AN, never listed) or iter_targets"
            )
        users = self.users[lo:hi]
        m = self.m[lo:hi]
        items = np.empty(offsets[-1], dtype=np.int32)
        gain = np.empty(offsets[-1], dtype=np.float32)
        judged = self.judged
        if self.fixed is not None:
            fill_fixed(users, first_unit, offsets, *self.fixed, judged.indptr, judged.items, judged.gain,
                       bool(per_relevant), bool(negatives_only), items, gain)
            return items, gain
        scratch = max(len(self.pool_items), int(np.diff(judged.indptr).max(initial=0))) + 1
        design = Design(bool(per_relevant), bool(self.fresh), self.protocol.candidates == "UT",
                        bool(negatives_only), np.uint64(self.seed % 2**64))
        pool = Pool(self.pool_items, bool(self.weighted), self.prob, self.alias, self.weight)
        data = UserItems(self.tr_ptr, self.tr_idx, judged.indptr, judged.items, judged.gain)
        keys = users if self.user_keys is None else self.user_keys[users].astype(users.dtype)
        for start in range(0, len(users), self.chunk_size):
            stop = min(start + self.chunk_size, len(users))
            plan = Plan(users[start:stop], keys[start:stop], first_unit[start:stop], m[start:stop],
                        self.avail[lo + start:lo + stop], offsets)
            fill_units(plan, design, pool, data, items, gain, int(m[start:stop].max(initial=0)), scratch,
                       4 * numba.get_num_threads())
        return items, gain

    def _one_relevant(self, lo: int, hi: int) -> Targets:
        """The compact 1R Targets of users ``lo:hi`` (module docstring)."""
        users = self.users[lo:hi]
        n_rel = self.n_rel[lo:hi]
        judged = self.judged
        rows = _ranges(judged.indptr[users], judged.indptr[users + 1])
        rows = rows[judged.gain[rows] > 0]
        unit_user = np.repeat(users, n_rel).astype(np.int32)
        common = dict(protocol=self.protocol.name, one_relevant=True)
        if self.protocol.nonrelevant == "AN" and self.protocol.candidates != "UT":
            return Targets(
                unit_user, np.arange(len(rows) + 1, dtype=np.int64), judged.items[rows], judged.gain[rows],
                self.n_items, all_candidates=True, candidates=self.candidates,
                n_candidates=np.repeat(self.avail[lo:hi] + 1, n_rel), **common,
            )
        m = self.m[lo:hi]
        if self.fresh:  # a sample per unit
            first_unit = np.concatenate([[0], np.cumsum(n_rel)[:-1]]).astype(np.int64)
            sizes = np.repeat(m, n_rel)
            unit_group = np.arange(len(rows), dtype=np.int64)
        else:  # one sample per user
            first_unit = np.arange(len(users), dtype=np.int64)
            sizes = m
            unit_group = np.repeat(np.arange(len(users), dtype=np.int64), n_rel)
        negative_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        negatives, _ = self._fill(lo, hi, first_unit, negative_offsets, self.fresh, negatives_only=True)
        return Targets(
            unit_user, np.arange(len(rows) + 1, dtype=np.int64), judged.items[rows], judged.gain[rows],
            self.n_items, unit_group=unit_group, negative_offsets=negative_offsets, negatives=negatives, **common,
        )

    def _full_ranking(self, lo: int, hi: int) -> Targets:
        judged = self.judged
        users = self.users[lo:hi]
        starts, stops = judged.indptr[users], judged.indptr[users + 1]
        rows = _ranges(starts, stops)
        keep = rows[judged.gain[rows] > 0]
        n_rel = row_sums(judged.gain > 0, judged.indptr)[users]
        offsets = np.concatenate([[0], np.cumsum(n_rel)]).astype(np.int64)
        return Targets(
            users.astype(np.int32), offsets, judged.items[keep], judged.gain[keep], self.n_items,
            protocol=self.protocol.name, all_candidates=True, candidates=self.candidates,
            n_candidates=self.n_candidates[lo:hi],
        )


def _ranges(starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(start, stop)`` for every pair, without a Python loop."""
    lengths = stops - starts
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    shift = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return np.arange(total, dtype=np.int64) + shift
