"""What a Spark task does with its user partition: plain polars and numpy, no pyspark, so that it is
tested without a JVM and runs unchanged on any executor.

A partition arrives as Arrow record batches of rows sorted by ``unit`` (all rows of a user are in one
partition, since data is partitioned by a hash of the user id). :func:`user_chunks` regroups them
into chunks of whole users of bounded size; each chunk becomes Targets and Rankings over a chunk-local
item index and is measured by :func:`recsys_eval.measure.measure`, the local engine's kernels.

Why a chunk-local item index gives the local engine's values: metrics depend on items only through
equality and the tie rule (tied scores ordered by item index ascending); the local engine numbers
items in sorted raw-id order, so any order-preserving numbering of a chunk's items (their rank among
the chunk's sorted raw ids) orders ties the same way. The catalogue size enters only through the
full-ranking target set ``n_candidates = n_items - |Tr(u) \\ (Te(u) u Run(u))|``, and the global
``n_items`` is passed in. The beyond-accuracy metrics read item-side arrays of the whole input
(popularity over every TRAIN user, the most-popular order, genres, exposure per item): for them a
chunk's items are renumbered by their places in the whole catalogue (:func:`on_catalogue`, over
the broadcast :class:`Catalogue`), still in raw-id order.

Rating metrics are measured per user on the judged pairs the run scores, each user numbered by its
rank among the users with such a pair (``rating_unit``, computed by Spark), as the local engine
numbers them; the micro MAE and RMSE of the whole run come from the chunks' exact error sums
(:class:`~recsys_eval.measure.rating.ErrorSums`), which reach the driver with the summary's sums.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from recsys_eval.core.results import PER_UNIT_COLUMNS
from recsys_eval.core.interactions import Interactions
from recsys_eval.core.units import Rankings, Targets
from recsys_eval.data.delimited import Table
from recsys_eval.data.runs import RunInput, read_table, run_input
from recsys_eval.errors import DataError
from recsys_eval.measure import measure, rating_metrics
from recsys_eval.measure.aggregate import PartitionState, SummaryState
from recsys_eval.measure.frames import concat_per_unit
from recsys_eval.measure.rating import ErrorSums
from recsys_eval.pipeline.options import MeasureOptions

# Rows of a partition measured at once: bounds a task's memory whatever the partition's size.
CHUNK_ROWS = 1 << 21
TEST, RUN, TRAIN = 0, 1, 2  # the ``kind`` of a row of the long table evaluate sends to executors


def user_chunks(batches: Iterable, key: str | Sequence[str] = "unit", rows: int = CHUNK_ROWS) -> Iterator[pl.DataFrame]:
    """Regroup Arrow batches (or polars frames) sorted by ``key`` (a column, or several) into frames
    of whole ``key`` groups of about ``rows`` rows (more when one group alone is larger)."""
    keys = [key] if isinstance(key, str) else list(key)
    pending: list[pl.DataFrame] = []
    size = 0
    for batch in batches:
        frame = batch if isinstance(batch, pl.DataFrame) else pl.from_arrow(batch)
        if not frame.height:
            continue
        pending.append(frame)
        size += frame.height
        if size < rows:
            continue
        whole = pl.concat(pending, how="vertical_relaxed")
        last = whole.row(whole.height - 1, named=True)
        same = pl.all_horizontal(pl.col(k).eq_missing(last[k]) for k in keys)
        cut = whole.height - int(whole.select(same.sum()).item())  # the last group may go on
        if cut > 0:
            yield whole.slice(0, cut)
            pending, size = [whole.slice(cut)], whole.height - cut
        else:
            pending, size = [whole], whole.height
    if size:
        yield pl.concat(pending, how="vertical_relaxed")


@dataclass(frozen=True)
class Catalogue:
    """What evaluate's beyond-accuracy metrics read of the whole input, item-sized, computed by Spark
    jobs and broadcast to every task (:func:`recsys_eval.engine.runs.catalogue_of`): the raw ids of
    the catalogue (every item of TEST, RUN and TRAIN) in the local index's order, TRAIN's item side
    (:func:`~recsys_eval.measure.beyond.counted_item_side`: popularity over every TRAIN user, the
    most-popular order, the head; None without TRAIN) and the items' genres (items x genres, None
    without a genres file)."""

    item_ids: pl.Series
    item_side: dict | None = None
    genres: np.ndarray | None = None


@dataclass(frozen=True)
class RunMeasure:
    """How an evaluate task measures its chunks: the ``measure`` options, the catalogue size
    ``n_items`` (every item of TEST, RUN and TRAIN), the file names for messages, which value
    columns each file has, and whether ids are text (in some file) for the whole input; with
    beyond-accuracy metrics, the whole input's ``catalogue`` (a :class:`Catalogue`, or a Spark
    broadcast of one)."""

    n_items: int
    options: MeasureOptions
    system: str
    test_name: str
    run_name: str
    train_name: str | None
    run_values: tuple[str, ...]
    test_rating: bool
    train_rating: bool
    text_ids: tuple[bool, bool]  # user, item
    threshold: float | None
    catalogue: Any = None

    def __call__(self, chunk: pl.DataFrame) -> MeasuredChunk:
        return measure_run_chunk(chunk, self)


@dataclass(frozen=True)
class RatingErrors:
    """A chunk's rating error sums, with what the run-level rows they make are labelled with."""

    protocol: str
    names: tuple[str, ...]
    sums: ErrorSums

    @classmethod
    def merge(cls, parts: list[RatingErrors]) -> RatingErrors | None:
        return cls(parts[0].protocol, parts[0].names, ErrorSums.merge(p.sums for p in parts)) if parts else None


@dataclass(frozen=True)
class MeasuredChunk:
    """A chunk's per-unit rows, and what the driver makes the run-level rows of: its rating error
    sums (with rating metrics) and its lists' run-level counts (pickled,
    :func:`recsys_eval.engine.beyond.run_counts`; with coverage, Gini, entropy, PopRSP or PopREO)."""

    frame: pl.DataFrame
    errors: RatingErrors | None = None
    run_counts: bytes | None = None


def measure_run_chunk(chunk: pl.DataFrame, spec: RunMeasure) -> MeasuredChunk:
    """Per-unit values of the users of one chunk of the long table (columns ``user, unit, kind,
    item, rating, score, rank``, and ``rating_unit`` with rating metrics; ``unit`` is the user's
    index among the sorted TEST users; RUN and TRAIN rows of TEST users only), and what the
    driver needs of them for the run-level rows.

    The chunk's TEST, RUN and TRAIN rows are read and checked by the local reader
    (:func:`recsys_eval.data.runs.read_table` and :func:`recsys_eval.data.runs.run_input`, given the
    whole catalogue's size), so a bad row gets the local engine's message; the per-unit rows carry
    the global ``unit`` and the raw ``user``. With beyond-accuracy metrics the chunk's items take
    their places in the whole catalogue (:func:`on_catalogue`), whose item side each user's own
    train rows read."""
    parts = {
        TEST: (spec.test_name, "judgments", ("rating",) if spec.test_rating else ()),
        RUN: (spec.run_name, "run", spec.run_values),
        TRAIN: (spec.train_name, "judgments", ("rating",) if spec.train_rating else ()),
    }
    tables: dict[int, Table | None] = {}
    for kind, (name, role, values) in parts.items():
        rows = chunk.filter(pl.col("kind") == kind).select("user", "item", *values)
        if name is None:  # no TRAIN file
            tables[kind] = None
        elif rows.height:
            tables[kind] = _keep_text_ids(read_table(rows, role, name=name), rows, spec.text_ids)
        else:  # these TEST users have no RUN (empty lists) or no TRAIN row
            tables[kind] = _no_rows(name, values)
    data = run_input(tables[TEST], tables[RUN], tables[TRAIN], threshold=spec.threshold,
                     catalogue=spec.n_items)
    options, run_level, counts = spec.options, spec.options.run_level, None
    rankings, targets, train, genres = data.rankings, data.targets, None, None
    catalogue = getattr(spec.catalogue, "value", spec.catalogue)
    if catalogue is not None:
        rankings, targets, train = on_catalogue(data, catalogue)
        genres = catalogue.genres
    from recsys_eval.engine.beyond import chunk_exposure, run_counts

    names = [n for n in options.ranking if n not in run_level]  # a run's values are the driver's
    exposure = chunk_exposure(options, spec.n_items, train) if run_level else None
    frame = measure(rankings, targets, **{**options.kwargs(), "metrics": names}, system=spec.system,
                    user_ids=data.user_ids, train=train, genres=genres, exposure=exposure)
    frame = with_global_units(frame, _of_users(chunk, data.user_ids, "unit"))
    if exposure is not None:  # the lists were added to it by measure's own list pass
        counts = run_counts(exposure, targets.protocol, spec.system)
    if not options.rating:
        return MeasuredChunk(frame, run_counts=counts)
    rows, errors = _rating_rows(chunk, data.predictions, spec, data.targets.protocol)
    return MeasuredChunk(concat_per_unit([frame, rows]), errors, counts)


def on_catalogue(data: RunInput, catalogue: Catalogue) -> tuple[Rankings, Targets, Interactions | None]:
    """A chunk's rankings, targets and train pairs (its users' own, numbered by unit) over the whole
    catalogue's item index instead of the chunk's: each chunk item at its raw id's place among the
    catalogue's. Both indices number items in raw-id order, so ties, and every ranking metric, stay
    as they were; the item-side values (popularity, the most-popular order, genres) are then the
    whole input's, and the train reads TRAIN's item side
    (:func:`~recsys_eval.measure.lists.with_item_side`)."""
    from recsys_eval.measure.lists import with_item_side

    ids, n = data.item_ids.cast(catalogue.item_ids.dtype), catalogue.item_ids.len()
    codes = catalogue.item_ids.search_sorted(ids).to_numpy().astype(np.int32)
    found = (codes < n) & (catalogue.item_ids.gather(np.minimum(codes, n - 1)) == ids).to_numpy()
    if not found.all():
        raise DataError(f"item {ids[int(np.argmin(found))]!r} is not in the catalogue of the whole input")
    rankings = replace(data.rankings, items=codes[data.rankings.items])
    targets = replace(data.targets, items=codes[data.targets.items])
    if data.train is None or catalogue.item_side is None:
        return rankings, targets, None
    users = data.train.get_column("user").to_numpy()
    n_users = max(targets.n_units, int(users.max(initial=-1)) + 1)
    pairs = pl.DataFrame({"user": pl.Series(users, dtype=pl.Int32),
                          "item": pl.Series(codes[data.train.get_column("item").to_numpy()], dtype=pl.Int32)})
    train = Interactions(pairs, pl.Series("user_id", np.arange(n_users)), catalogue.item_ids)
    return rankings, targets, with_item_side(train, catalogue.item_side)


def _of_users(chunk: pl.DataFrame, user_ids: pl.Series, column: str) -> np.ndarray:
    """Per raw id of ``user_ids``, its ``column`` in the chunk's TEST rows (a global number)."""
    units = chunk.filter(pl.col("kind") == TEST).select("user", column).unique("user")
    ids = user_ids.to_frame("user")
    return ids.join(units.with_columns(pl.col("user").cast(ids.schema["user"])), on="user", how="left",
                    maintain_order="left").get_column(column).to_numpy()


def _rating_rows(chunk: pl.DataFrame, predictions: pl.DataFrame | None, spec: RunMeasure,
                 protocol: str) -> tuple[pl.DataFrame, RatingErrors]:
    """The chunk's rating rows per user (its run-level rows left to the driver), numbered by each
    user's ``rating_unit``, and their error sums."""
    names = list(spec.options.rating)
    if predictions is None or not predictions.height:  # these users have no scored judged pair
        return concat_per_unit([]), RatingErrors(protocol, tuple(names), ErrorSums(0, 0, 0))
    rows = rating_metrics(predictions, metrics=names, system=spec.system, protocol=protocol)
    rows = rows.filter(pl.col("user").is_not_null())
    users = rows.get_column("user").unique(maintain_order=True)
    rows = with_global_units(rows, _of_users(chunk, users, "rating_unit"))
    error = predictions.get_column("prediction").cast(pl.Float64) - predictions.get_column("rating").cast(pl.Float64)
    return rows, RatingErrors(protocol, tuple(names), ErrorSums.of(error.to_numpy()))


def _no_rows(name: str, values: tuple[str, ...]) -> Table:
    """An empty table of ``name`` (a partition whose users have no RUN or TRAIN row): what the local
    reader would read, minus the rows, which :func:`run_input` takes as empty lists."""
    schema = {"user": pl.Int64, "item": pl.Int64, **{c: pl.Int64 if c == "rank" else pl.Float64 for c in values}}
    return Table(pl.DataFrame(schema=schema), name, unit="row")


def _keep_text_ids(table: Table, rows: pl.DataFrame, text_ids: tuple[bool, bool]) -> Table:
    """``table`` with the text ids of ``rows`` back where the whole input compares ids as text: the
    reader makes a file's text ids integers when all of them are, and this chunk's alone may be,
    whose integer order would break ties otherwise than the whole input's text order."""
    restored = [rows.get_column(c) for c, text in zip(("user", "item"), text_ids, strict=True) if text]
    if restored:
        table.frame = table.frame.with_columns(restored)
    return table


def with_global_units(frame: pl.DataFrame, global_unit: np.ndarray) -> pl.DataFrame:
    """Per-unit rows whose chunk-local ``unit`` i becomes ``global_unit[i]``."""
    mapped = pl.Series("unit", global_unit, dtype=pl.Int64).gather(frame.get_column("unit"))
    return frame.with_columns(mapped).select(PER_UNIT_COLUMNS)


def arrow_task(measure_chunk: Callable[[pl.DataFrame], pl.DataFrame | MeasuredChunk], threads: int = 1,
               key: str = "unit", rows: int = CHUNK_ROWS, *, sums=None, undefined: str = "skip") -> Callable[[Iterable], Iterator]:
    """The function ``mapInArrow`` runs on every partition: chunks of whole users measured by
    ``measure_chunk`` (a frame, or a :class:`MeasuredChunk`), each frame handed back as Arrow
    record batches. Numba uses ``threads`` threads (a task owns ``spark.task.cpus`` cores, not the
    executor's). With ``sums`` (a Spark accumulator of :class:`SummedPartitions`), the task also
    reduces its users to their summary state (:class:`~recsys_eval.measure.aggregate.SummaryState`,
    under the ``undefined`` policy) and adds it, with its chunks' rating error sums and run-level
    counts, under its partition's index, once the partition is done."""

    def task(batches: Iterable) -> Iterator:
        import numba

        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
        states, errors, counts = [], [], []
        for chunk in user_chunks(batches, key, rows):
            frame = measure_chunk(chunk)
            if isinstance(frame, MeasuredChunk):  # with what the run-level rows are made of
                errors += [frame.errors] if frame.errors is not None else []
                counts += [frame.run_counts] if frame.run_counts is not None else []
                frame = frame.frame
            if sums is not None and frame.height:
                states.append(PartitionState.of(frame, undefined=undefined).reduced())
            yield from frame.to_arrow().to_batches()
        if sums is not None:
            from pyspark import TaskContext

            sums.add(SummedPartitions({TaskContext.get().partitionId()}, SummaryState.merge(states),
                                      RatingErrors.merge(errors), counts))

    return task


@dataclass
class SummedPartitions:
    """The summary states of a job's partitions, merged as their tasks end (the value of a Spark
    accumulator, :data:`MERGED`): the driver holds one small state, never a per-user row. A partition
    reported twice (a retried or speculative task) is merged once; since sums are exact, the
    merged state is the same whatever order the partitions arrive in."""

    partitions: set[int] = field(default_factory=set)
    state: SummaryState = field(default_factory=lambda: SummaryState.merge([]))
    #: The rating error sums of the micro MAE and RMSE, when rating metrics are measured.
    errors: RatingErrors | None = None
    #: A task's chunks' run-level counts (:attr:`MeasuredChunk.run_counts`), handed to the driver.
    run_counts: list[bytes] = field(default_factory=list)
    #: On the driver: the :class:`~recsys_eval.engine.beyond.RunLevel` that sums the run-level
    #: counts as they arrive (arrays over items, whatever the number of partitions).
    run_level: Any = None

    def add(self, other: SummedPartitions) -> SummedPartitions:
        if not other.partitions or other.partitions <= self.partitions:
            return self
        if other.partitions & self.partitions:  # never: a task reports its own partition alone
            raise ValueError(f"partitions {sorted(other.partitions & self.partitions)} reported twice with others")
        self.partitions |= other.partitions
        self.state = SummaryState.merge([self.state, other.state])
        self.errors = RatingErrors.merge([e for e in (self.errors, other.errors) if e is not None])
        for payload in other.run_counts:
            if self.run_level is not None:
                self.run_level.add(payload)
            else:
                self.run_counts.append(payload)
        return self


class _Merging:
    """The AccumulatorParam of a value the tasks' values are merged into (``merged.add(other)``),
    each task's starting empty (its class made without arguments): :class:`SummedPartitions`,
    :class:`~recsys_eval.engine.fold.TaskTables` (duck-typed: no pyspark import here)."""

    def zero(self, value):
        return type(value)()

    def addInPlace(self, merged, other):
        return merged.add(other)


#: The accumulator parameter of such a value: ``spark.sparkContext.accumulator(SummedPartitions(), MERGED)``.
MERGED = _Merging()
