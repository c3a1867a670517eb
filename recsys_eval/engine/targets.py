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
  under AR, one per relevant test item under 1R; within a percentile bin, the bin's items only).
  No array over users is broadcast for it: a Spark job counts each user's units in the tasks
  (:class:`UnitCounts`, from the user's own rows and the item totals), sums them per block of
  users, whose offsets (a few numbers per block) the driver adds up, and numbers each user within
  its block by a window; each user's first unit number then travels as a row of its own, beside
  its interactions, to its partition (:func:`unit_number_rows`, :func:`take_unit_numbers`), as a
  factor model's user rows do. :func:`first_units` is the same numbering on a whole fold.

The samples are drawn in the task, per user, from counter-based streams keyed on the protocol's
seed and the user's fold index (:mod:`recsys_eval.targets.sampling`) over the fold's candidate pool
and weights: a user's targets are the local engine's whatever users share its partition, though
the task numbers its chunk's users from 0 (:func:`chunk_template`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
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
#: The columns of the unit-number rows added to a fold's rows: the target-set label (or the rating
#: metrics' :data:`~recsys_eval.measure.metrics.RATINGS`) and the user's first unit number there.
UNIT_LABEL, FIRST_UNIT = "unit_label", "first_unit"
#: Users per block of the unit numbering's prefix sum (by user index): the driver holds one offset
#: per block and target set.
UNIT_BLOCK = 1 << 16
_FLAGS = (TEST, STAYS.format(""), NEGATIVES.format(""))
#: The column of a fold's rows that carries the raw id of the row's user (whose index is ``user``):
#: a task learns its users' raw ids from their rows, not from an array of every user's.
RAW_USER = "raw_user"


@dataclass(frozen=True)
class SparkTargets:
    """What a fold's tasks build their users' target sets with beyond their rows (broadcast once).

    Per protocol entry of the run, in config order: ``test_columns``, the column of the shipped rows
    that marks the test rows of the split it is drawn on (:data:`TEST`, or its own :data:`STAYS`
    for a uniform test); ``totals``, that split's item totals over every user; ``trains``, the
    index of the train side its recommenders were fitted on (0 the fold's); ``negatives``, the
    column that marks its fixed negatives' rows and their file, or None. Item-side alone: each
    user's unit numbers come as rows of its own (:func:`unit_number_rows`)."""

    test_columns: tuple[str, ...]
    totals: tuple[ItemTotals, ...]
    trains: tuple[int, ...]
    negatives: tuple[tuple[str, str] | None, ...]


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
        """Every protocol entry's split, totals and negatives on the fold ``split``; a design, a
        negatives file or a 1R protocol without relevant items that does not fit the fold raises
        here, as the local engine raises."""
        from recsys_eval.targets.designs import check_bins, move_to_train, uniform_test_rows
        from recsys_eval.targets.totals import ItemTotals

        threshold = options.measure.relevance_threshold
        fold_totals = ItemTotals.of(split)
        columns, totals, trains, files = [], [], [], []
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
            check_relevant(protocol, source, threshold)
        shipped = SparkTargets(tuple(columns), tuple(totals), tuple(trains), tuple(files))
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


def check_relevant(protocol: ProtocolConfig, source: Split, threshold: float | None) -> None:
    """The fold's relevance checks, which the tasks, each holding a part of its users, cannot
    make: :func:`~recsys_eval.targets.relevance.test_gains`' errors (an empty test side, a threshold
    without ratings or above every rating, a relevant rating not positive), and a DataError when a
    1R protocol entry is drawn on a split without a relevant test item."""
    from recsys_eval.targets import Protocol
    from recsys_eval.targets.relevance import test_gains

    from recsys_eval.engine.inputs import WrittenSplit

    if isinstance(source, WrittenSplit):  # counted by Spark where the rows are; raises as test_gains
        relevant = source.relevant_rows(threshold) > 0
    else:
        relevant = bool((test_gains(source, threshold) > 0).any())
    parsed = Protocol.parse(protocol.name)
    if parsed.relevant == "1R" and not relevant:
        raise DataError(f"split {source.name!r}: protocol {parsed.name} needs relevant test items, "
                        f"and none reaches the threshold {threshold}")


def unit_counts(protocol: ProtocolConfig, source: Split, totals: ItemTotals, threshold: float | None
                ) -> dict[str, np.ndarray]:
    """Per target-set label of a protocol entry drawn on ``source``, each user index's number of
    units, as :func:`recsys_eval.targets.iter_targets` makes them: one per user with a judged test
    item (AR) or one per relevant test item (1R); a percentile bin counts its items' test rows."""
    from recsys_eval.pipeline.targets import protocol_labels
    from recsys_eval.targets import Protocol
    from recsys_eval.targets.designs import item_popularity_bins
    from recsys_eval.targets.relevance import qrels

    one_relevant = Protocol.parse(protocol.name).relevant == "1R"
    judged = qrels(source, threshold)
    if protocol.design == "percentiles":
        bins = item_popularity_bins(totals.train_counts, protocol.bins)
        judged_sets = [judged.restrict(bins == b) for b in range(1, protocol.bins + 1)]
    else:
        judged_sets = [judged]
    return {label: (within.relevant_counts() if one_relevant else (within.counts() > 0)).astype(np.int64)
            for label, within in zip(protocol_labels(protocol), judged_sets, strict=True)}


def first_units(protocol: ProtocolConfig, source: Split, totals: ItemTotals, threshold: float | None
                ) -> dict[str, np.ndarray]:
    """Per target-set label, each user index's first unit number on a whole fold ``source``: the
    exclusive running sum of :func:`unit_counts` in user-index order (what
    :func:`unit_number_rows` computes without gathering the users)."""
    check_relevant(protocol, source, threshold)
    return {label: np.cumsum(units) - units for label, units in unit_counts(protocol, source, totals, threshold).items()}


@dataclass(frozen=True)
class UnitCounts:
    """A task of :func:`unit_number_rows`: a chunk of whole users of a fold (the columns of
    :meth:`FoldTargets.rows`) to ``user, unit_label, units`` rows, each user's number of units per
    target-set label of the run's protocols (``targets``: the broadcast :class:`SparkTargets`), and
    with rating metrics, one unit per user with a test row under
    :data:`~recsys_eval.measure.metrics.RATINGS`; users without a unit left out."""

    options: RunOptions
    targets: object
    template: Interactions
    fold: str

    def __call__(self, chunk: pl.DataFrame) -> pl.DataFrame:
        from recsys_eval.measure.metrics import RATINGS

        shipped = getattr(self.targets, "value", self.targets)
        threshold = self.options.measure.relevance_threshold
        chunk, template, fold_users = chunk_template(self.template, chunk)
        splits = {column: chunk_split(chunk, column, template, self.fold)
                  for column in dict.fromkeys([TEST, *shipped.test_columns])}
        counts: dict[str, np.ndarray] = {}
        for p, protocol in enumerate(self.options.protocols):
            counts.update(unit_counts(protocol, splits[shipped.test_columns[p]], shipped.totals[p], threshold))
        if self.options.measure.rating:
            counts[RATINGS] = (splits[TEST].test.user_counts() > 0).astype(np.int64)
        parts = []
        for label, units in counts.items():
            users = np.flatnonzero(units)
            parts.append(pl.DataFrame({"user": fold_users[users], UNIT_LABEL: label, "units": units[users]},
                                      schema={"user": pl.Int32, UNIT_LABEL: pl.String, "units": pl.Int64}))
        return pl.concat(parts) if parts else pl.DataFrame(schema={"user": pl.Int32, UNIT_LABEL: pl.String,
                                                                   "units": pl.Int64})


def unit_number_rows(frame, task: UnitCounts, partitions: int):
    """Each user's first unit number per target-set label, ``user, unit_label, first_unit``, from
    the fold's rows ``frame`` (a Spark DataFrame of :meth:`FoldTargets.rows`' columns), numbered
    as :func:`first_units` numbers a whole fold: the tasks count each user's units
    (:class:`UnitCounts`), the driver receives their sums per label and block of
    :data:`UNIT_BLOCK` users by index and makes each block's offset, the running sum of the blocks
    before it, and a window numbers the users within each block. Users without a unit have no row."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from recsys_eval.core.spark import task_threads
    from recsys_eval.engine.partitions import arrow_task

    spark = frame.sparkSession
    schema = T.StructType([T.StructField("user", T.IntegerType()), T.StructField(UNIT_LABEL, T.StringType()),
                           T.StructField("units", T.LongType())])
    counts = (frame.repartition(partitions, "user").sortWithinPartitions("user")
              .mapInArrow(arrow_task(task, task_threads(spark), key="user"), schema)
              .withColumn("_block", (F.col("user") / UNIT_BLOCK).cast("int"))
              .localCheckpoint())  # counted once, read by the sums and by the window
    sums = pl.DataFrame([row.asDict() for row in counts.groupBy(UNIT_LABEL, "_block")
                         .agg(F.sum("units").alias("units")).collect()],
                        schema={UNIT_LABEL: pl.String, "_block": pl.Int32, "units": pl.Int64})
    offsets = sums.sort(UNIT_LABEL, "_block").with_columns(
        (pl.col("units").cum_sum() - pl.col("units")).over(UNIT_LABEL).alias("_offset")).drop("units")
    before = Window.partitionBy(UNIT_LABEL, "_block").orderBy("user").rowsBetween(Window.unboundedPreceding, -1)
    return (counts.join(F.broadcast(spark.createDataFrame(offsets.to_arrow())), on=[UNIT_LABEL, "_block"])
            .select("user", UNIT_LABEL, (F.col("_offset") + F.coalesce(F.sum("units").over(before), F.lit(0)))
                    .cast("long").alias(FIRST_UNIT)))


class UnitNumbers:
    """A chunk's users' first unit numbers per target-set label (:func:`take_unit_numbers`), by
    their index in the chunk (:func:`chunk_template`); the numbers are the fold's."""

    def __init__(self, rows: pl.DataFrame) -> None:
        self.labels = {label: (part.get_column("user").to_numpy().astype(np.int64),
                               part.get_column(FIRST_UNIT).to_numpy())
                       for (label,), part in rows.sort("user").partition_by(UNIT_LABEL, as_dict=True).items()}

    def of(self, label: str, users: np.ndarray) -> np.ndarray:
        """The first unit number under ``label`` of each user of ``users`` (each has units)."""
        known, first = self.labels.get(label, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        at = np.searchsorted(known, users)
        if len(users) and (at.max() >= len(known) or np.any(known[at] != users)):
            raise ValueError(f"a user of target set {label!r} has no unit number in its partition")
        return first[at]


def take_unit_numbers(chunk: pl.DataFrame) -> tuple[pl.DataFrame, UnitNumbers]:
    """A chunk of a fold's rows split into its other rows (the unit columns dropped) and its users'
    :class:`UnitNumbers` (its rows with a ``unit_label``)."""
    if UNIT_LABEL not in chunk.columns:
        return chunk, UnitNumbers(pl.DataFrame(schema={"user": pl.Int32, UNIT_LABEL: pl.String,
                                                       FIRST_UNIT: pl.Int64}))
    is_unit = pl.col(UNIT_LABEL).is_not_null()
    return (chunk.filter(~is_unit).drop(UNIT_LABEL, FIRST_UNIT),
            UnitNumbers(chunk.filter(is_unit).select("user", UNIT_LABEL, FIRST_UNIT)))


def partition_target_sets(options: RunOptions, shipped: SparkTargets, chunk: pl.DataFrame, template: Interactions,
                          fold: str, fold_users: np.ndarray) -> Iterator[tuple[int, Split, TargetSet]]:
    """``(protocol entry, split, target set)`` of a chunk of whole users of the fold (the columns
    of :meth:`FoldTargets.rows`, its users numbered from 0 by :func:`chunk_template`, whose
    ``fold_users`` key their samples): each entry's target sets built on the chunk's side of its
    split with the fold's totals; an entry whose split gives these users no unit is left out."""
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
                yield p, split, replace(target_set, plan=replace(target_set.plan, user_keys=fold_users))


def shipped_template(data: Interactions) -> Interactions:
    """What a fold's tasks are sent of the dataset: its item index and metadata and the type of its
    user ids, but no row and no user id (an array over every user, 0.8 GB at 100M users): each
    chunk makes its own from its rows (:func:`chunk_template`)."""
    from recsys_eval.core import Interactions

    return Interactions(data.frame.clear(), data.user_ids.clear(), data.item_ids, data.items_meta, data.source)


def with_raw_users(rows: pl.DataFrame, user_ids: pl.Series) -> pl.DataFrame:
    """``rows`` (a ``user`` index column) with each row's raw user id, :data:`RAW_USER`."""
    return rows.with_columns(user_ids.gather(rows.get_column("user")).alias(RAW_USER))


def chunk_template(template: Interactions, chunk: pl.DataFrame) -> tuple[pl.DataFrame, Interactions, np.ndarray]:
    """A chunk's rows with its users numbered from 0 (in the order of their fold indices) and
    without :data:`RAW_USER`, the dataset (:func:`shipped_template`'s) over those users, each with
    its raw id (its rows' :data:`RAW_USER`; without that column, the template's id at its fold
    index, the template then holding every user's), and each local user's fold index.

    Every array a task makes over users (its id table, counts per user, CSR rows, negatives) is
    then the size of its chunk, not of the fold: users hashed over partitions put fold indices up
    to the last user's in every chunk (8 bytes x 100M users = 0.8 GB a count). What is keyed on a
    user's index stays keyed on its fold index: its samples' streams (:attr:`UnitPlan.user_keys
    <recsys_eval.targets.build.UnitPlan.user_keys>`), a random recommender's scores, its unit
    numbers and the pooled AUC's sample (:func:`recsys_eval.engine.fold.fold_chunk_tables`)."""
    from recsys_eval.core import Interactions

    fold_users, local = np.unique(chunk.get_column("user").to_numpy(), return_inverse=True)
    chunk = chunk.with_columns(pl.Series("user", local.reshape(-1), dtype=chunk.schema["user"]))
    if RAW_USER in chunk.columns:
        ids = chunk.select("user", pl.col(RAW_USER).cast(template.user_ids.dtype)).drop_nulls(RAW_USER).unique("user")
        indices = pl.DataFrame({"user": pl.int_range(len(fold_users), dtype=chunk.schema["user"], eager=True)})
        user_ids = indices.join(ids, on="user", how="left", maintain_order="left").get_column(RAW_USER)
        chunk = chunk.drop(RAW_USER)
    else:
        user_ids = template.user_ids.gather(fold_users)
    return chunk, Interactions(template.frame, user_ids.rename(template.user_ids.name), template.item_ids,
                               template.items_meta, template.source), fold_users.astype(np.int32)


def chunk_split(chunk: pl.DataFrame, column: str, template: Interactions, fold: str) -> Split:
    """The chunk's side of the split whose test rows ``column`` flags (its other interactions,
    train rows and moved test rows alike, are the train side), a part of the fold
    (:attr:`~recsys_eval.core.Split.part`: the fold's relevance checks were made on the driver,
    :func:`check_relevant`)."""
    from recsys_eval.core import Split

    negatives = [c for c in chunk.columns if c.startswith(NEGATIVES.format(""))]
    rows = chunk.filter(~pl.any_horizontal(negatives)) if negatives else chunk
    flagged = rows.get_column(column)
    values = rows.select(c for c in rows.columns if not c.startswith(_FLAGS))
    return Split(template.with_frame(values.filter(~flagged)), template.with_frame(values.filter(flagged)), name=fold,
                 info={"part": True})


def _chunk_negatives(chunk: pl.DataFrame, column: str, file: str, n_users: int) -> Negatives:
    """The fixed negatives of the chunk's users, from its rows flagged ``column``."""
    from recsys_eval.targets import Negatives

    pairs = chunk.filter(pl.col(column)).select("user", "item").sort("user", "item")
    users = pairs.get_column("user").to_numpy()
    indptr = np.concatenate([[0], np.cumsum(np.bincount(users, minlength=n_users))]).astype(np.int64)
    return Negatives(indptr, pairs.get_column("item").to_numpy().astype(np.int32), None, file)
