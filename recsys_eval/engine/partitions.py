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
``n_items`` is passed in.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import polars as pl

from recsys_eval.core.results import PER_UNIT_COLUMNS, PER_UNIT_SCHEMA
from recsys_eval.data.delimited import Table
from recsys_eval.data.runs import read_table, run_input
from recsys_eval.measure import measure

# Rows of a partition measured at once: bounds a task's memory whatever the partition's size.
CHUNK_ROWS = 1 << 21
TEST, RUN, TRAIN = 0, 1, 2  # the ``kind`` of a row of the long table evaluate sends to executors


def user_chunks(batches: Iterable, key: str = "unit", rows: int = CHUNK_ROWS) -> Iterator[pl.DataFrame]:
    """Regroup Arrow batches (or polars frames) sorted by ``key`` into frames of whole ``key``
    groups of about ``rows`` rows (more when one group alone is larger)."""
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
        last = whole.get_column(key)[-1]
        cut = whole.height - int(whole.get_column(key).eq(last).sum())  # the last group may go on
        if cut > 0:
            yield whole.slice(0, cut)
            pending, size = [whole.slice(cut)], whole.height - cut
        else:
            pending, size = [whole], whole.height
    if size:
        yield pl.concat(pending, how="vertical_relaxed")


@dataclass(frozen=True)
class MeasureOptions:
    """The options of :func:`recsys_eval.measure.measure` a task applies to every chunk."""

    metrics: tuple[str, ...]
    k: tuple[int, ...]
    gain: str = "graded"
    ties: str = "first"

    def kwargs(self) -> dict:
        return {"metrics": list(self.metrics), "k": list(self.k), "gain": self.gain, "ties": self.ties}


@dataclass(frozen=True)
class RunMeasure:
    """How an evaluate task measures its chunks: the ``measure`` options, the catalogue size
    ``n_items`` (every item of TEST, RUN and TRAIN), the file names for messages, which value
    columns each file has, and whether ids are text (in some file) for the whole input."""

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

    def __call__(self, chunk: pl.DataFrame) -> pl.DataFrame:
        return measure_run_chunk(chunk, self)


def measure_run_chunk(chunk: pl.DataFrame, spec: RunMeasure) -> pl.DataFrame:
    """Per-unit values of the users of one chunk of the long table (columns ``user, unit, kind,
    item, rating, score, rank``; ``unit`` is the user's index among the sorted TEST users; RUN and
    TRAIN rows of TEST users only).

    The chunk's TEST, RUN and TRAIN rows are read and checked by the local reader
    (:func:`recsys_eval.data.runs.read_table` and :func:`recsys_eval.data.runs.run_input`, given the
    whole catalogue's size), so a bad row gets the local engine's message; the per-unit rows carry
    the global ``unit`` and the raw ``user``."""
    parts = {
        TEST: (spec.test_name, "judgments", ("rating",) if spec.test_rating else ()),
        RUN: (spec.run_name, "run", spec.run_values),
        TRAIN: (spec.train_name, "judgments", ("rating",) if spec.train_rating else ()),
    }
    tables = {}
    for kind, (name, role, values) in parts.items():
        rows = chunk.filter(pl.col("kind") == kind).select("user", "item", *values)
        if name is None or (kind != TEST and not rows.height):
            tables[kind] = None if name is None else _no_rows(rows, name, values)
            continue
        table = read_table(rows, role, name=name)
        tables[kind] = _keep_text_ids(table, rows, spec.text_ids)
    if tables[RUN] is None:  # these users have no ranked list: every one an empty list
        tables[RUN] = _no_rows(chunk.clear().select("user", "item", *spec.run_values), spec.run_name,
                               spec.run_values)
    data = run_input(tables[TEST], tables[RUN], tables[TRAIN], threshold=spec.threshold,
                     catalogue=spec.n_items)
    units = chunk.filter(pl.col("kind") == TEST).select("user", "unit").unique("user")
    ids = data.user_ids.to_frame("user")
    global_unit = ids.join(units.with_columns(pl.col("user").cast(ids.schema["user"])), on="user",
                           how="left", maintain_order="left").get_column("unit").to_numpy()
    frame = measure(data.rankings, data.targets, **spec.options.kwargs(), system=spec.system,
                    user_ids=data.user_ids)
    return with_global_units(frame, global_unit)


def _no_rows(rows: pl.DataFrame, name: str, values: tuple[str, ...]) -> Table:
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


def arrow_task(measure_chunk: Callable[[pl.DataFrame], pl.DataFrame], threads: int = 1,
               key: str = "unit", rows: int = CHUNK_ROWS) -> Callable[[Iterable], Iterator]:
    """The function ``mapInArrow`` runs on every partition: chunks of whole users measured by
    ``measure_chunk``, each result handed back as Arrow record batches. Numba uses ``threads``
    threads (a task owns ``spark.task.cpus`` cores, not the executor's)."""

    def task(batches: Iterable) -> Iterator:
        import numba

        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
        for chunk in user_chunks(batches, key, rows):
            yield from measure_chunk(chunk).to_arrow().to_batches()

    return task


@dataclass(frozen=True)
class FoldProtocol:
    """One target set of an experiment fold: its ``label`` in the results (the protocol column),
    the protocol ``name`` (e.g. ``"AI+1R+NN100"``), its targets ``seed`` and ``fresh_negatives``."""

    label: str
    name: str
    seed: int
    fresh_negatives: bool = False


@dataclass(frozen=True)
class FoldMeasure:
    """How an experiment task turns a chunk of whole users of a fold into per-unit rows: targets,
    rankings of every broadcast model, measures, with the local runner's functions.

    ``template`` is an empty Interactions over the fold's user and item index; ``first_unit`` gives,
    per protocol label, the global number of each user's first unit (units numbered over the whole
    fold as the local runner numbers them); ``models`` is a broadcast variable (or a plain dict) of
    system name -> fitted, broadcastable recommender; ``extra`` (optional) adds rows to a system
    and protocol's per-unit table from its rankings and targets, before units are renumbered."""

    template: object
    fold: str
    protocols: tuple[FoldProtocol, ...]
    first_unit: object
    models: object
    threshold: float | None
    options: MeasureOptions
    depth: int
    chunk_size: int
    extra: Callable | None = None

    def __call__(self, chunk: pl.DataFrame) -> pl.DataFrame:
        return measure_fold_chunk(chunk, self)


def measure_fold_chunk(chunk: pl.DataFrame, spec: FoldMeasure) -> pl.DataFrame:
    """Per-unit rows of the users of one chunk (columns ``user, item, rating, test``: user and item
    indices, the rating, and whether the row is a test row) for every system and protocol."""
    from recsys_eval.core.split import Split
    from recsys_eval.recommend.base import rank_targets, recommend_top_k
    from recsys_eval.targets import build_targets

    models = getattr(spec.models, "value", spec.models)
    first_unit = getattr(spec.first_unit, "value", spec.first_unit)
    sides = [chunk.filter(pl.col("test") == side).drop("test") for side in (False, True)]
    split = Split(*(spec.template.with_frame(side) for side in sides), name=spec.fold)
    frames = []
    for protocol in spec.protocols:
        if not _has_units(split, protocol, spec.threshold):
            continue
        targets = build_targets(split, protocol.name, threshold=spec.threshold, seed=protocol.seed,
                                fresh_negatives=protocol.fresh_negatives, chunk_size=spec.chunk_size)
        users = targets.unit_user.astype(np.int64)
        first = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
        within = np.arange(len(users)) - np.repeat(first, np.diff(np.r_[first, len(users)]))
        global_unit = first_unit[protocol.label][users] + within
        for system, model in models.items():
            model = local_model(model, split.train)
            if targets.all_candidates:
                rankings = recommend_top_k(model, split.train, targets.unit_user, spec.depth,
                                           candidates=targets.candidates, chunk_size=spec.chunk_size)
            else:
                rankings = rank_targets(model, targets, chunk_size=spec.chunk_size)
            frame = measure(rankings, targets, **spec.options.kwargs(), system=system, protocol=protocol.label,
                            fold=spec.fold, user_ids=spec.template.user_ids)
            if spec.extra is not None:
                frame = pl.concat([frame, spec.extra(rankings, targets, frame)], how="vertical_relaxed")
            frames.append(with_global_units(frame, global_unit))
    if not frames:
        return empty_per_unit(spec.template.user_ids.dtype)
    return pl.concat(frames, how="vertical_relaxed")


def empty_per_unit(user_dtype: pl.DataType) -> pl.DataFrame:
    """No per-unit row, with the user column of raw ids of ``user_dtype`` (as ``measure`` gives)."""
    user = pl.Int64 if user_dtype.is_integer() else pl.String
    return pl.DataFrame(schema={**PER_UNIT_SCHEMA, "user": user})


def _has_units(split, protocol: FoldProtocol, threshold: float | None) -> bool:
    """Whether the chunk's users have units: any test row (AR), any relevant test row (1R; build_targets
    refuses a 1R protocol without one, a condition the driver checks for the whole fold)."""
    from recsys_eval.targets import Protocol
    from recsys_eval.targets.relevance import qrels

    if Protocol.parse(protocol.name).relevant == "AR":
        return len(split.test) > 0
    return bool((qrels(split, threshold).gain > 0).any())


def local_model(model, train):
    """A broadcast model made ready for a chunk: item kNN scores a user from the user's train row,
    which the chunk holds (the broadcast model does not carry the whole train matrix)."""
    from recsys_eval.recommend.implicit_models import ItemKNN

    if isinstance(model, ItemKNN):
        model = copy.copy(model)
        model.user_items = train.csr()
    return model
