"""Targets and Rankings: per evaluation unit, in CSR layout (docs/CONVENTIONS.md#notation).

A *unit* is what one ranking is made for: a user (protocols AR) or one relevant item of a user
(protocols 1R). Unit ``i`` owns the slice ``offsets[i]:offsets[i+1]`` of the flat arrays. A Rankings
built for a Targets has the same units in the same order. The hot kernels work on these arrays.

Under 1R a unit differs from its user's other units by one item, so its targets need not be listed
one by one: *one-relevant* Targets list only each unit's relevant item and describe the
non-relevant targets per user (a shared sample, a sample per unit, or every candidate less the
user's relevant items), and :class:`RelevantRanks` holds what every metric of such a unit is a
function of: where its relevant item falls among its non-relevant targets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from recsys_eval.errors import DataError


def _check_csr(kind: str, unit_user: np.ndarray, offsets: np.ndarray, **flat: np.ndarray) -> None:
    if unit_user.ndim != 1 or offsets.ndim != 1 or len(offsets) != len(unit_user) + 1:
        raise DataError(f"{kind}: offsets must have one more entry than unit_user")
    if len(offsets) and (offsets[0] != 0 or np.any(np.diff(offsets) < 0)):
        raise DataError(f"{kind}: offsets must start at 0 and never decrease")
    for name, values in flat.items():
        if values is not None and len(values) != offsets[-1]:
            raise DataError(f"{kind}: {name} has {len(values)} entries, offsets end at {offsets[-1]}")


@dataclass(frozen=True, eq=False)
class Targets:
    """The items each unit is to rank, with their gains (0 for a non-relevant item).

    Attributes:
        unit_user: int32, the user of every unit.
        offsets: int64, ``n_units + 1`` slice bounds into ``items`` and ``gain``.
        items: int32 item indices; within a unit, sorted ascending.
        gain: float32, the gain of every listed item (0 for non-relevant items).
        n_items: size of the item index.
        protocol: the protocol's name, e.g. ``"AI+1R+NN100"``.
        all_candidates: True for full ranking: the target set of a unit is every candidate item
            (``candidates`` less the user's training items) and is not listed; ``items``/``gain``
            then hold only the unit's relevant items, and ``n_candidates`` the set's size.
        candidates: for ``all_candidates``, a bool mask over items of the global candidate pool
            (None: every item, protocol AI; the test items, protocol TI).
        n_candidates: int64 per unit, the size of its target set; required with ``all_candidates``.
        one_relevant: True for the compact form of a 1R protocol: ``items``/``gain`` hold each
            unit's one relevant item only, and its non-relevant targets are, with
            ``all_candidates``, every candidate of its user less the user's relevant items (the
            items of the user's units, which are contiguous); otherwise the items
            ``negatives[negative_offsets[g]:negative_offsets[g + 1]]`` (ascending) of its group
            ``g = unit_group[unit]`` (one group per user for a shared sample, one per unit for
            fresh samples).
        unit_group, negative_offsets, negatives: the non-relevant lists of listed one-relevant
            Targets (see ``one_relevant``).
    """

    unit_user: np.ndarray
    offsets: np.ndarray
    items: np.ndarray
    gain: np.ndarray
    n_items: int
    protocol: str = "targets"
    all_candidates: bool = False
    candidates: np.ndarray | None = None
    n_candidates: np.ndarray | None = None
    one_relevant: bool = False
    unit_group: np.ndarray | None = None
    negative_offsets: np.ndarray | None = None
    negatives: np.ndarray | None = None

    def __post_init__(self) -> None:
        _check_csr("targets", self.unit_user, self.offsets, items=self.items, gain=self.gain)
        bad = np.flatnonzero(~np.isfinite(self.gain))
        if len(bad):
            unit = int(np.searchsorted(self.offsets, bad[0], side="right") - 1)
            raise DataError(
                f"targets: gain {self.gain[bad[0]]} of item {int(self.items[bad[0]])} in unit {unit} (user "
                f"{int(self.unit_user[unit])}); gains must be finite numbers ({len(bad)} are not)"
            )
        if self.all_candidates and (
            self.n_candidates is None or len(self.n_candidates) != self.n_units
        ):
            raise DataError("targets: full-ranking targets need n_candidates for every unit")
        if self.one_relevant:
            if np.any(np.diff(self.offsets) != 1) or np.any(self.gain <= 0):
                raise DataError("targets: one-relevant targets list exactly one relevant item per unit")
            if not self.all_candidates:
                if self.unit_group is None or len(self.unit_group) != self.n_units:
                    raise DataError("targets: listed one-relevant targets need unit_group for every unit")
                _check_csr("targets", np.zeros(len(self.negative_offsets) - 1), self.negative_offsets,
                           negatives=self.negatives)

    @property
    def n_units(self) -> int:
        return len(self.unit_user)

    @property
    def sizes(self) -> np.ndarray:
        """Target-set size of every unit (listed items, or n_candidates under full ranking)."""
        if self.all_candidates:
            return self.n_candidates
        if self.one_relevant:
            return 1 + np.diff(self.negative_offsets)[self.unit_group]
        return np.diff(self.offsets)

    @property
    def n_relevant(self) -> np.ndarray:
        """Relevant (gain > 0) items of every unit."""
        positive = np.concatenate([[0], np.cumsum(self.gain > 0)])
        return positive[self.offsets[1:]] - positive[self.offsets[:-1]]

    def to_frame(self) -> pl.DataFrame:
        """Long form: one row per (unit, listed item) with ``unit, user, item, gain``."""
        unit = np.repeat(np.arange(self.n_units, dtype=np.int64), np.diff(self.offsets))
        return pl.DataFrame(
            {"unit": unit, "user": self.unit_user[unit], "item": self.items, "gain": self.gain}
        )

    def __repr__(self) -> str:
        kind = "all candidates" if self.all_candidates else f"{len(self.items):,} listed items"
        if self.one_relevant:
            kind = "one relevant item each, " + (
                "all other candidates" if self.all_candidates else f"{len(self.negatives):,} listed non-relevant items")
        return f"Targets({self.protocol!r}: {self.n_units:,} units, {kind})"


@dataclass(frozen=True, eq=False)
class Rankings:
    """Ranked items per unit, best first, with their scores.

    ``unit_user`` and the units' order match the Targets (or test users) the ranking was made for;
    a unit may hold fewer items than its target set (a truncated top-k list), or none.

    ``auc`` (float64 per unit, NaN where undefined), when given, is each unit's exact AUC over its
    whole target set, counted while every candidate was scored (full ranking): the measures use
    it instead of letting the targets a truncated list left out tie below its last item.
    """

    unit_user: np.ndarray
    offsets: np.ndarray
    items: np.ndarray
    scores: np.ndarray | None = None
    auc: np.ndarray | None = None

    def __post_init__(self) -> None:
        _check_csr("rankings", self.unit_user, self.offsets, items=self.items, scores=self.scores)
        if self.auc is not None and len(self.auc) != self.n_units:
            raise DataError(f"rankings: auc has {len(self.auc)} entries for {self.n_units} units")

    @property
    def n_units(self) -> int:
        return len(self.unit_user)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def to_frame(self) -> pl.DataFrame:
        """Long form: one row per ranked item with ``unit, user, item, rank`` (1 = best), ``score``."""
        lengths = np.diff(self.offsets)
        unit = np.repeat(np.arange(self.n_units, dtype=np.int64), lengths)
        rank = np.arange(len(self.items), dtype=np.int64) - self.offsets[unit] + 1
        data = {"unit": unit, "user": self.unit_user[unit], "item": self.items, "rank": rank}
        if self.scores is not None:
            data["score"] = self.scores
        return pl.DataFrame(data)

    def __repr__(self) -> str:
        return f"Rankings({self.n_units:,} units, {len(self.items):,} ranked items)"


@dataclass(frozen=True, eq=False)
class RelevantRanks:
    """Under 1R, where each unit holds one relevant item: its place among the unit's N
    non-relevant targets, from which every metric of the unit follows in closed form
    (:mod:`recsys_eval.measure.single`).

    Attributes:
        unit_user: int32, the user of every unit (the units of the Targets, in order).
        above: int64, non-relevant targets scoring strictly higher than the relevant item.
        tied: int64, non-relevant targets scoring the same.
        before: int64, those of the tied ones with a smaller item index (ranked first under the
            deterministic tie rule).
        n_nonrelevant: int64, N.
        gain: float32, the relevant item's gain.
        ranked: bool, False where the relevant item scored ``-inf`` (not ranked: left out of the
            ranking, so every cutoff metric is 0; AUC counts it tied with the ``-inf`` targets).
    """

    unit_user: np.ndarray
    above: np.ndarray
    tied: np.ndarray
    before: np.ndarray
    n_nonrelevant: np.ndarray
    gain: np.ndarray
    ranked: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.unit_user)
        for name in ("above", "tied", "before", "n_nonrelevant", "gain", "ranked"):
            if len(getattr(self, name)) != n:
                raise DataError(f"relevant ranks: {name} has {len(getattr(self, name))} entries for {n} units")

    @property
    def n_units(self) -> int:
        return len(self.unit_user)

    @property
    def sampled_rank(self) -> np.ndarray:
        """int64 per unit: the relevant item's rank (1 = best) in the unit's ranking with ties by
        item index, ``above + before + 1``; 0 where it was not ranked."""
        return np.where(self.ranked, self.above + self.before + 1, 0).astype(np.int64)

    def __repr__(self) -> str:
        return f"RelevantRanks({self.n_units:,} units)"
