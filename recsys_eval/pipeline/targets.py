"""The target sets of a fold: one per protocol entry of the config, or one per popularity bin of a
percentile design, each filled a chunk of users at a time from its plan (bounded memory; the same
units in any chunking). An engine that holds some of the fold's users builds their target sets from
their rows and the fold's item totals (:class:`~recsys_eval.targets.totals.ItemTotals`): the same
units as the whole fold's, for those users (recsys_eval.engine.targets)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from recsys_eval.core import Interactions, Split, Targets
from recsys_eval.pipeline.config import ProtocolConfig
from recsys_eval.targets.build import UnitPlan
from recsys_eval.targets.negatives import Negatives
from recsys_eval.targets.totals import ItemTotals


@dataclass
class ProtocolTargets:
    """One evaluated target set of a fold (or a chunk of its users): a protocol, or one bin of a
    percentile design."""

    label: str
    targets: Targets
    train: Interactions
    info: dict = field(default_factory=dict)
    #: The protocol's definition (and bin): what seeds derived for this target set are keyed on.
    definition: dict = field(default_factory=dict)
    #: Per user index, the size of the candidate set C(u) (for a 1R unit's full candidate count).
    candidates: np.ndarray | None = None


@dataclass
class TargetSet:
    """One evaluated target set of a fold, whose units are filled a chunk of users at a time from
    its plan. ``units_per_user`` and ``listed_per_unit`` are the means the memory budget plans with."""

    label: str
    train: Interactions
    definition: dict
    plan: UnitPlan
    units_per_user: float
    listed_per_unit: float
    info: dict = field(default_factory=dict)
    candidates: np.ndarray | None = None

    @property
    def users(self) -> int:
        """How many users have units."""
        return len(self.plan.users)

    def chunks(self, users_per_chunk: int) -> Iterator[ProtocolTargets]:
        """The units, ``users_per_chunk`` of the set's users at a time."""
        for lo in range(0, max(self.users, 1), users_per_chunk):
            yield self._of(self.plan.targets(lo, min(lo + users_per_chunk, self.users)))

    def whole(self) -> ProtocolTargets:
        """Every unit at once."""
        return next(iter(self.chunks(max(self.users, 1))))

    def of_users(self, first: int, stop: int) -> ProtocolTargets:
        """The units of the users whose index is in ``first:stop`` (a range every target set of a
        fold can be cut by)."""
        lo, hi = np.searchsorted(self.plan.users, [first, stop])
        return self._of(self.plan.targets(int(lo), int(hi)))

    def _of(self, targets: Targets) -> ProtocolTargets:
        return ProtocolTargets(self.label, targets, self.train, self.info, self.definition, self.candidates)


def protocol_labels(protocol: ProtocolConfig) -> list[str]:
    """The labels a protocol entry's results carry: its display name, or one per popularity bin."""
    if protocol.design == "percentiles":
        return [f"{protocol.name}+pct{protocol.bins}/bin{b}" for b in range(1, protocol.bins + 1)]
    return [protocol.display]


def label_definitions(protocols: list[ProtocolConfig] | tuple[ProtocolConfig, ...]) -> dict[str, dict]:
    """Every result label with its protocol's definition and bin (None outside a percentile design):
    what the seeds of a label's summaries and tests are keyed on."""
    return {label: {**p.definition, "bin": b if p.design == "percentiles" else None}
            for p in protocols for b, label in enumerate(protocol_labels(p), start=1)}


def candidate_counts(split: Split, candidates: str, totals: ItemTotals | None = None) -> np.ndarray:
    """|C(u)| per user index: AI, every item not in the user's train; TI, the items with a test
    interaction (of any user of the fold: ``totals``, default ``split``'s) not in the user's train;
    UT, the user's own test items."""
    train, test = split.train, split.test
    if candidates == "UT":
        return test.user_counts().astype(np.int64)
    pool = np.ones(train.n_items, dtype=bool)
    if candidates == "TI":
        pool = (ItemTotals.of(split) if totals is None else totals).in_test
    in_pool = np.bincount(train.users, weights=pool[train.items], minlength=train.n_users)
    return (int(pool.sum()) - in_pool).astype(np.int64)


def target_sets(protocol: ProtocolConfig, split: Split, *, seed: int, threshold: float | None,
                chunk_size: int, negatives: Path | None = None, totals: ItemTotals | None = None,
                designed: bool = False, fixed: Negatives | None = None) -> list[TargetSet]:
    """The target sets of one protocol entry on one fold (one per bin for a percentile design);
    ``seed`` draws its samples, ``threshold`` makes a test rating relevant, a ``negatives`` file
    replaces the samples (a standard design), or those ``fixed`` negatives, read already. An engine
    holding some of the fold's users gives the whole fold's ``totals``
    (:class:`~recsys_eval.targets.totals.ItemTotals`, default ``split``'s), its users' ``fixed``
    negatives and, ``designed``, its users' side of the split the design made (a uniform test's
    moves are chosen over every user: :func:`~recsys_eval.targets.designs.uniform_test_rows`)."""
    import recsys_eval.targets as targets_module
    from recsys_eval.targets import Protocol, read_negatives, uniform_test

    parsed = Protocol.parse(protocol.name)
    source, info = split, {}
    if protocol.design == "uniform_test" and not designed:
        source, report = uniform_test(split, protocol.per_item, threshold=threshold, seed=seed)
        info = {"uniform_test": report}
    totals = ItemTotals.of(source) if totals is None else totals
    # 1R units in their one-relevant form: a unit differs from its user's others by one item, so
    # its non-relevant targets are held once per user and no unit is ranked on its own
    options = dict(threshold=threshold, seed=seed, fresh_negatives=protocol.fresh_negatives,
                   sampling=protocol.sampling, one_relevant=parsed.relevant == "1R", chunk_size=chunk_size,
                   totals=totals)

    def target_set(plan: UnitPlan, label: str, info: dict, definition: dict) -> TargetSet:
        units, listed = _planning_means(protocol, parsed, plan, source)
        return TargetSet(label, source.train, definition, plan, units, listed, info,
                         candidate_counts(source, parsed.candidates, totals))

    if protocol.design != "percentiles":
        if fixed is None and negatives is not None:
            fixed = read_negatives(negatives, split.train)
        return [target_set(targets_module.plan_targets(source, parsed, **options, negatives=fixed),
                           protocol.display, info, protocol.definition)]
    labels = protocol_labels(protocol)
    return [target_set(plan, labels[info["bin"] - 1], {"bin": info}, {**protocol.definition, "bin": info["bin"]})
            for info, plan in targets_module.popularity_bin_plans(split, protocol.bins, parsed, **options)]


def _planning_means(protocol: ProtocolConfig, parsed, plan: UnitPlan, source: Split) -> tuple[float, float]:
    """A target set's mean units per user and listed targets per unit, for the memory budget."""
    judged = plan.judged  # a bin's: restricted to the bin's items
    users = max(len(plan.users), 1)
    relevant = int((judged.gain > 0).sum())
    units = relevant / users if parsed.relevant == "1R" else 1.0
    per_user_relevant = relevant / users
    n = parsed.n or 0
    if parsed.full_ranking:
        listed = per_user_relevant
    elif parsed.relevant == "1R":  # its relevant item, and its share of its user's sample
        sample = n if parsed.nonrelevant == "NN" else 0
        listed = 1.0 + (sample if protocol.fresh_negatives else sample / max(units, 1.0))
    elif parsed.nonrelevant == "NN":
        listed = n + per_user_relevant
    else:  # AR+AN listed in full (UT candidates)
        listed = float(source.train.n_items)
    return units, listed
