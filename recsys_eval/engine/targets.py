"""A fold's target sets on Spark: each task builds its users' own, with what they need of the other
users computed once on the driver and broadcast (docs/SPARK.md).

A user's targets depend on its own rows and on item-side facts of the whole fold, which are small
(arrays over items, whatever the number of users):

- TI candidates are the items with a test row of any user, popularity sampling weighs items by
  their train counts over every user, and the percentile design bins items by those counts: the
  fold's :class:`~recsys_eval.targets.totals.ItemTotals`;
- the uniform-test design chooses, item by item, which relevant test ratings stay in test among
  every user's: the driver makes that choice as the local engine does
  (:func:`~recsys_eval.targets.designs.uniform_test_rows`, the same seed) and ships each test row
  with its flag (a column :data:`STAYS` per uniform-test entry), so that a task rebuilds its users'
  side of the moved split from its own rows; the moved split's totals are broadcast with the
  fold's, and the recommenders are fitted on the moved train side too, as the local engine fits
  them;
- negatives read from a file are each user's own: the driver reads the file and checks it against
  the whole fold as the local engine does, then ships each user's negatives with its rows (a
  column :data:`NEGATIVES` per such entry marks them);
- units are numbered per target set in user-index order (one per user with a judged test item
  under AR, one per relevant test item under 1R; within a percentile bin, the bin's items only):
  :func:`first_units` gives each user's first unit number.

The samples are drawn in the task, per user, from counter-based streams keyed on the protocol's
seed and the user (:mod:`recsys_eval.targets.sampling`) over the fold's candidate pool and
weights: a user's targets are the local engine's whatever users share its partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from recsys_eval.errors import DataError

if TYPE_CHECKING:
    from recsys_eval.core import Interactions, Split
    from recsys_eval.pipeline.config import ProtocolConfig
    from recsys_eval.pipeline.plan import RunOptions
    from recsys_eval.pipeline.targets import TargetSet
    from recsys_eval.targets import Negatives
    from recsys_eval.targets.totals import ItemTotals

#: The shipped rows' column that marks the fold's test rows, that of the test rows that stay in
#: test under the uniform-test entry ``i`` of the run's protocols, and that of the rows that are
#: the fixed negatives of entry ``i`` (not interactions).
TEST, STAYS, NEGATIVES = "test", "stays{}", "negatives{}"
_FLAGS = (TEST, STAYS.format(""), NEGATIVES.format(""))


@dataclass(frozen=True)
class SparkTargets:
    """What a fold's tasks build their users' target sets with beyond their rows (broadcast once).

    Per protocol entry of the run, in config order: ``test_columns``, the column of the shipped rows
    that marks the test rows of the split it is drawn on (:data:`TEST`, or its own :data:`STAYS`
    for a uniform test); ``totals``, that split's item totals over every user; ``trains``, the
    index of the train side its recommenders were fitted on (0 the fold's); ``negatives``, the
    column that marks its fixed negatives' rows and their file, or None. ``first_unit``: per
    target-set label, each user index's first unit number in the fold (and with rating metrics,
    under ``ratings``, each user's unit among the fold's rating rows)."""

    test_columns: tuple[str, ...]
    totals: tuple[ItemTotals, ...]
    trains: tuple[int, ...]
    negatives: tuple[tuple[str, str] | None, ...]
    first_unit: dict[str, np.ndarray]


@dataclass
class FoldTargets:
    """The driver's side of a fold's target sets: what is broadcast (``shipped``), the flag of each
    test row of the fold's split per :data:`STAYS` column (``flags``), the ``user, item`` pairs of
    each :data:`NEGATIVES` column, and the train sides the recommenders are fitted on (``trains``:
    the fold's first, then each uniform test's)."""

    shipped: SparkTargets
    flags: dict[str, np.ndarray]
    negatives: dict[str, pl.DataFrame]
    trains: list[Interactions]

    @classmethod
    def of(cls, options: RunOptions, split: Split) -> FoldTargets:
        """Every protocol entry's split, totals, negatives and unit numbers on the fold ``split``;
        a design or a negatives file that does not fit the fold raises here, as the local engine
        raises."""
        from recsys_eval.engine.beyond import rating_units
        from recsys_eval.measure.metrics import RATINGS
        from recsys_eval.targets.designs import check_bins, move_to_train, uniform_test_rows
        from recsys_eval.targets.totals import ItemTotals

        threshold = options.measure.relevance_threshold
        fold_totals = ItemTotals.of(split)
        columns, totals, trains, files, first_unit = [], [], [], [], {}
        flags: dict[str, np.ndarray] = {}
        negatives: dict[str, pl.DataFrame] = {}
        sides = [split.train]
        for i, protocol in enumerate(options.protocols):
            source, column, side_totals, train, file = split, TEST, fold_totals, 0, None
            if protocol.negatives is not None:
                file = (NEGATIVES.format(i), str(options.negatives_file(protocol)))
                negatives[file[0]] = _checked_negatives(options, protocol, split, fold_totals)
            if protocol.design == "uniform_test":
                stay, report = uniform_test_rows(split, protocol.per_item, threshold=threshold,
                                                 seed=options.target_seed(split.name, protocol))
                source, column = move_to_train(split, stay, report), STAYS.format(i)
                side_totals, train = ItemTotals.of(source), len(sides)
                flags[column] = stay
                sides.append(source.train)
            elif protocol.design == "percentiles":
                check_bins(split.name, protocol.bins, fold_totals.train_counts)
            columns.append(column)
            totals.append(side_totals)
            trains.append(train)
            files.append(file)
            first_unit.update(first_units(protocol, source, side_totals, threshold))
        if options.measure.rating:
            first_unit[RATINGS] = rating_units(split)
        shipped = SparkTargets(tuple(columns), tuple(totals), tuple(trains), tuple(files), first_unit)
        return cls(shipped, flags, negatives, sides)

    def rows(self, split: Split) -> pl.DataFrame:
        """The fold's rows as the tasks get them: ``user, item[, rating]``, :data:`TEST` and each
        :data:`STAYS` flag (false on train rows), then the fixed negatives' rows, each flagged by
        its :data:`NEGATIVES` column (every other flag false)."""
        parts = []
        for is_test, side in ((False, split.train), (True, split.test)):
            frame = side.frame.select("user", "item", *(["rating"] if side.has_rating else []))
            parts.append(frame.with_columns(pl.lit(is_test).alias(TEST),
                                            *(pl.Series(c, stay if is_test else np.zeros(len(side), dtype=bool))
                                              for c, stay in self.flags.items())))
        parts += [pairs.with_columns(pl.lit(True).alias(column)) for column, pairs in self.negatives.items()]
        flags = [TEST, *self.flags, *self.negatives]
        return pl.concat(parts, how="diagonal_relaxed").with_columns(pl.col(flags).fill_null(False))


def _checked_negatives(options: RunOptions, protocol: ProtocolConfig, split: Split, totals: ItemTotals) -> pl.DataFrame:
    """A protocol entry's fixed negatives as ``user, item`` index pairs, read once and checked
    against the whole fold as the local engine checks them (held-out pairs of an NCF file
    included)."""
    from recsys_eval.targets import read_negatives

    negatives = read_negatives(options.negatives_file(protocol), split.train)
    options.target_sets(protocol, split, totals, fixed=negatives)  # raises as the local engine does
    users = np.repeat(np.arange(len(negatives.indptr) - 1), np.diff(negatives.indptr))
    return pl.DataFrame({"user": users, "item": negatives.items}).cast({"user": split.test.frame.schema["user"],
                                                                       "item": split.test.frame.schema["item"]})


def first_units(protocol: ProtocolConfig, source: Split, totals: ItemTotals, threshold: float | None
                ) -> dict[str, np.ndarray]:
    """Per target-set label of a protocol entry drawn on ``source``, each user index's first unit
    number: units are numbered in user-index order, one per user with a judged test item (AR) or
    one per relevant test item (1R), as :func:`recsys_eval.targets.iter_targets` makes them; a
    percentile bin counts the test items of its items only."""
    from recsys_eval.pipeline.targets import protocol_labels
    from recsys_eval.targets import Protocol
    from recsys_eval.targets.designs import item_popularity_bins
    from recsys_eval.targets.relevance import qrels

    parsed = Protocol.parse(protocol.name)
    judged = qrels(source, threshold)
    if parsed.relevant == "1R" and not (judged.gain > 0).any():
        raise DataError(f"split {source.name!r}: protocol {parsed.name} needs relevant test items, "
                        f"and none reaches the threshold {threshold}")
    labels = protocol_labels(protocol)
    if protocol.design == "percentiles":
        bins = item_popularity_bins(totals.train_counts, protocol.bins)
        judged_sets = [judged.restrict(bins == b) for b in range(1, protocol.bins + 1)]
    else:
        judged_sets = [judged]
    out = {}
    for label, within in zip(labels, judged_sets, strict=True):
        units = within.relevant_counts() if parsed.relevant == "1R" else (within.counts() > 0)
        out[label] = np.r_[0, np.cumsum(units, dtype=np.int64)[:-1]].astype(np.int64)
    return out


def partition_target_sets(options: RunOptions, shipped: SparkTargets, chunk: pl.DataFrame, template: Interactions,
                          fold: str) -> Iterator[tuple[int, Split, TargetSet]]:
    """``(protocol entry, split, target set)`` of a chunk of whole users of the fold (the columns
    of :meth:`FoldTargets.rows`): each entry's target sets built on the chunk's side of its split
    with the fold's totals; an entry whose split gives these users no unit is left out."""
    from recsys_eval.targets import Protocol
    from recsys_eval.targets.relevance import qrels

    splits = {column: chunk_split(chunk, column, template, fold) for column in dict.fromkeys(shipped.test_columns)}
    relevant = {}
    for p, protocol in enumerate(options.protocols):
        column = shipped.test_columns[p]
        split = splits[column]
        if not len(split.test):
            continue  # these users' test rows all moved to train (uniform test): no unit
        if column not in relevant:
            relevant[column] = bool((qrels(split, options.measure.relevance_threshold).gain > 0).any())
        if Protocol.parse(protocol.name).relevant == "1R" and not relevant[column]:
            continue  # no relevant item among these users: no unit (the driver checked the fold)
        fixed = None if shipped.negatives[p] is None else _chunk_negatives(chunk, *shipped.negatives[p], split.n_users)
        for target_set in options.target_sets(protocol, split, shipped.totals[p], designed=True, fixed=fixed):
            if target_set.users:
                yield p, split, target_set


def chunk_split(chunk: pl.DataFrame, column: str, template: Interactions, fold: str) -> Split:
    """The chunk's side of the split whose test rows ``column`` flags (its other interactions,
    train rows and moved test rows alike, are the train side)."""
    from recsys_eval.core import Split

    negatives = [c for c in chunk.columns if c.startswith(NEGATIVES.format(""))]
    rows = chunk.filter(~pl.any_horizontal(negatives)) if negatives else chunk
    flagged = rows.get_column(column)
    values = rows.select(c for c in rows.columns if not c.startswith(_FLAGS))
    return Split(template.with_frame(values.filter(~flagged)), template.with_frame(values.filter(flagged)), name=fold)


def _chunk_negatives(chunk: pl.DataFrame, column: str, file: str, n_users: int) -> Negatives:
    """The fixed negatives of the chunk's users, from its rows flagged ``column``."""
    from recsys_eval.targets import Negatives

    pairs = chunk.filter(pl.col(column)).select("user", "item").sort("user", "item")
    users = pairs.get_column("user").to_numpy()
    indptr = np.concatenate([[0], np.cumsum(np.bincount(users, minlength=n_users))]).astype(np.int64)
    return Negatives(indptr, pairs.get_column("item").to_numpy().astype(np.int32), None, file)
