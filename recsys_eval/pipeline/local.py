"""One fold run in this process: :class:`LocalFold` executes a
:class:`~recsys_eval.pipeline.plan.FoldPlan`, a range of users at a time (the range sized by the
memory budget), and a :class:`PartitionKeeper` writes, reduces and summarises what it measures on a
second thread.

A range's units of every target set are built once for all recommenders; each recommender then ranks
and measures them all, reading one score block of the range
(:class:`~recsys_eval.recommend.base.SharedBlock`) where it scores by blocks, so a user is scored
once per (recommender, train), not once per target set. Each chunk's per-unit rows are written as
their own file and reduced to per-user values; a partition is summarised from its users once all its
chunks are done, so the whole per-unit table is never held. Outputs are in target-set order,
whatever the ranges.

A chunk of users of a (system, protocol) partition is marked done as soon as its files are written
(:meth:`~recsys_eval.pipeline.sink.RunSink.finish_chunk`), and the partition once its last chunk and
run-level rows are (:meth:`~recsys_eval.pipeline.sink.RunSink.finish_partition`), so that a resumed
run redoes only what its interrupted attempt had not finished of an unfinished fold: it cuts the
fold into the ranges of users the attempt recorded (:meth:`~recsys_eval.pipeline.sink.RunSink.record_ranges`),
reads back the partitions and the chunks it finished, and measures the rest, with the same files
and results as a run never interrupted.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor, wait

import numpy as np
import polars as pl

from recsys_eval.core.memory import format_size, resident_bytes
from recsys_eval.core.results import (
    AUC_SCORES,
    CURVE_CHUNKS,
    EXPOSURE_COUNTS,
    FinishedChunk,
    FinishedPartition,
    UnfinishedFold,
    read_counts,
    read_per_unit,
)
from recsys_eval.errors import ConfigError
from recsys_eval.measure.aggregate import PartitionState
from recsys_eval.measure.metrics import RATINGS
from recsys_eval.pipeline import jobs
from recsys_eval.pipeline.fit import FittedModels, fit_models
from recsys_eval.pipeline.plan import FoldPlan
from recsys_eval.pipeline.progress import Progress
from recsys_eval.pipeline.sink import RunSink
from recsys_eval.pipeline.summary import (
    FoldSummary,
    partition_rows,
    reuse_partition,
    summarise_frames,
)
from recsys_eval.pipeline.targets import ProtocolTargets, TargetSet
from recsys_eval.pipeline.timings import Timings

#: Users of the smallest chunk a memory budget must allow.
MIN_CHUNK_USERS = 256
#: Tasks handed to the keeper and not yet done, and writes handed to the writer and not yet done,
#: at most (:meth:`PartitionKeeper.submit`, :meth:`PartitionKeeper.write`): a fold's peak of
#: memory is its chunks in hand (1.4M rows of the ML-1M study's largest), one being measured, one
#: reduced, one written.
KEEPER_QUEUE = WRITER_QUEUE = 1
#: Bytes per per-unit row while it is measured, written and reduced (polars frame, its copies).
_ROW_BYTES = 240
#: Bytes per listed target (item, gain, scratch) and per ranked item (item, score, order, ties).
_TARGET_BYTES, _RANKED_BYTES = 16, 24


class PartitionKeeper:
    """The per-unit rows of a fold, from measured chunk to summary, on the keeper thread, and their
    files on the writer thread.

    Each chunk's rows are reduced to per-user values
    (:class:`~recsys_eval.measure.aggregate.PartitionState`) by the keeper, then written as their
    partition file with its scratch tables and the run-level counts so far, and marked done
    (:meth:`RunSink.finish_chunk`), by the writer; once a (target set, recommender) has its last
    chunk, it is summarised (its run-level rows, coverage, Gini, entropy, from the exposure counts
    summed over its chunks) by the keeper, and those rows written and the pair marked done
    (:meth:`RunSink.finish_partition`) by the writer, after its chunks; its users are let go. The
    writer's tasks run in the order handed over, and a third of a chunk's writing is waiting for
    the disk (fsync): on a thread of its own, that wait holds up neither the reduction of the
    next chunk nor the main thread. What an earlier attempt finished
    (``earlier``) is read back, not measured again: a pair it marked done is summarised from its
    files; a pair of which it finished the first chunks goes on from them, their per-user values
    read back from their files and the counts from the last one's. Tasks run in submission order
    while the main thread ranks and measures the next chunks (polars and the Parquet writer release
    the GIL); at most :data:`KEEPER_QUEUE` tasks are handed over and not done, and
    :data:`WRITER_QUEUE` writes, so that many chunks' rows are held beside the chunk being
    measured."""

    def __init__(self, plan: FoldPlan, sink: RunSink, timings: Timings, earlier: UnfinishedFold) -> None:
        from recsys_eval.measure.beyond import run_exposure

        self.plan, self.sink, self.timings = plan, sink, timings
        options = plan.options
        keys = {(s, r): (plan.models[r].system, plan.sets[s].label)
                for s in range(len(plan.sets)) for r in range(len(plan.models))}
        #: Every finished pair's files, those of an earlier attempt (:attr:`reused`) included (a
        #: future of them until the writer is done: :meth:`finish`).
        self.finished: dict[tuple[int, int], FinishedPartition | Future] = {
            pair: earlier.partitions[key] for pair, key in keys.items() if key in earlier.partitions}
        self.reused = set(self.finished)
        self.summaries: dict[tuple[int, int], tuple[pl.DataFrame, pl.DataFrame | None]] = {
            pair: reuse_partition(options.summarising, done.per_unit) for pair, done in self.finished.items()}
        todo = [pair for pair in keys if pair not in self.reused]
        #: Each unfinished pair's chunks done, those of an earlier attempt first (a future of the
        #: writer's for the others).
        self.chunks: dict[tuple[int, int], list[FinishedChunk | Future]] = {
            pair: list(earlier.chunks.get(keys[pair], [])) for pair in todo}
        #: How many chunks of each unfinished pair an earlier attempt finished.
        self.reused_chunks = {pair: len(chunks) for pair, chunks in self.chunks.items() if chunks}
        self.states: dict[tuple[int, int], list[PartitionState]] = {pair: [
            PartitionState.of(read_per_unit([chunk.per_unit]).collect(), undefined=options.measure.undefined)
            for chunk in self.chunks[pair]] for pair in todo}
        #: Run-level metrics from exposure counts summed over the chunks of each (set, recommender).
        self.exposure = {(s, r): run_exposure(plan.data.n_items, list(options.measure.k), plan.sets[s].train,
                                              options.measure.run_level, options.measure.params) for s, r in todo}
        for pair, chunks in self.chunks.items():
            if chunks and chunks[-1].counts is not None:
                self.exposure[pair].add_state(read_counts(chunks[-1].counts))
        self.kept: deque[Future] = deque()
        self.written: deque[Future] = deque()  # the writer's tasks not yet seen done, in order
        self.waited = 0.0  # the main thread's time spent waiting for the keeper

    def submit(self, task, *args) -> None:
        """``task(*args)`` on the keeper thread, once fewer than :data:`KEEPER_QUEUE` tasks
        before it are not done."""
        self.drain(KEEPER_QUEUE - 1)
        self.kept.append(_keeper().submit(task, *args))

    def drain(self, left: int = 0) -> None:
        """Wait for the keeper's tasks until at most ``left`` are not done; a task's error is
        raised here."""
        start = time.perf_counter()
        while len(self.kept) > left:
            self.kept.popleft().result()
        self.waited += time.perf_counter() - start

    def finish(self) -> None:
        """Wait for the keeper's tasks, then the writer's: every pair's files are then known."""
        self.drain()
        start = time.perf_counter()
        while self.written:
            self.written.popleft().result()
        self.finished = {pair: _done(files) for pair, files in self.finished.items()}
        self.waited += time.perf_counter() - start

    def close(self) -> None:
        """On an error, the tasks under way finish before the error goes up."""
        wait(self.kept)
        wait(self.written)

    def write(self, task, *args) -> Future:
        """``task(*args)`` on the writer thread, after the writes handed over before it; the keeper
        waits while :data:`WRITER_QUEUE` of those are not done."""
        while len(self.written) >= WRITER_QUEUE:
            self.written.popleft().result()
        self.written.append(_writer().submit(task, *args))
        return self.written[-1]

    def keep(self, at: tuple[int, int, int], frame: pl.DataFrame, offset: int, label: str, last: bool,
             scratch: dict[str, pl.DataFrame], counts: dict[str, np.ndarray] | None) -> None:
        """A chunk's rows (``at``: set, part, recommender), their unit numbers shifted by
        ``offset``, reduced, and handed to the writer to be written as their partition, the chunk
        marked done with its ``scratch`` tables and the pair's run-level ``counts`` so far; the
        pair summarised if that was its last chunk."""
        start, (s, _, r), plan = time.perf_counter(), at, self.plan
        if offset:
            frame = frame.with_columns(pl.col("unit") + offset)
        self.states[s, r].append(PartitionState.of(frame, undefined=plan.options.measure.undefined))
        self.chunks[s, r].append(self.write(self._write_chunk, at, frame, label, scratch, counts))
        del frame
        self.timings.add(plan.fold, plan.models[r].system, f"write {label}", start)
        if last:
            self.summarise(s, r)

    def _write_chunk(self, at: tuple[int, int, int], frame: pl.DataFrame, label: str,
                     scratch: dict[str, pl.DataFrame], counts: dict[str, np.ndarray] | None) -> FinishedChunk:
        """(writer) A chunk's files, then the note that marks it done."""
        start, (s, part, r), plan = time.perf_counter(), at, self.plan
        done = self.sink.finish_chunk(plan.fold, plan.models[r].system, plan.sets[s].label, part, frame, scratch,
                                      counts)
        self.timings.add(plan.fold, plan.models[r].system, f"write {label}", start)
        return done

    def summarise(self, s: int, r: int) -> None:
        """(set, recommender) done: its run-level rows and its summary; the writer writes those
        rows as the partition after its chunks, then the note that marks it done."""
        from recsys_eval.measure.beyond import run_frame

        plan, start = self.plan, time.perf_counter()
        system, names = plan.models[r].system, plan.options.measure.run_level
        frame = None
        if names:
            labels = {"system": system, "protocol": plan.sets[s].label, "fold": plan.fold}
            user_type = pl.Int64 if plan.data.user_ids.dtype.is_integer() else pl.String
            frame = run_frame(self.exposure.pop((s, r)).values(names), labels, user_type)
            self.states[s, r].append(PartitionState.of(frame, undefined=plan.options.measure.undefined))
        self.summaries[s, r] = partition_rows(plan.options.summarising, PartitionState.merge(self.states.pop((s, r))))
        self.finished[s, r] = self.write(self._finish_partition, s, r, self.chunks.pop((s, r)), frame)
        self.timings.add(plan.fold, system, f"summarise {plan.sets[s].label}", start)

    def _finish_partition(self, s: int, r: int, chunks: list[FinishedChunk | Future],
                          run_level: pl.DataFrame | None) -> FinishedPartition:
        """(writer) A pair's ``run_level`` rows as the partition after its ``chunks`` (written
        before it: done), then the note that marks it done."""
        plan, start = self.plan, time.perf_counter()
        chunks = [_done(chunk) for chunk in chunks]
        files = [chunk.per_unit for chunk in chunks]
        if run_level is not None:
            files.append(self.sink.write_partition(run_level, part=len(chunks)))
        done = self.sink.finish_partition(plan.fold, plan.models[r].system, plan.sets[s].label, files, chunks)
        self.timings.add(plan.fold, plan.models[r].system, f"summarise {plan.sets[s].label}", start)
        return done

    def fold_summary(self) -> FoldSummary:
        """Every pair's files and summary, in target-set order, then recommender order (a pair's
        files: its chunks in user order, then its run-level rows)."""
        out = FoldSummary(reused=len(self.reused), reused_chunks=sum(self.reused_chunks.values()))
        for s in range(len(self.plan.sets)):
            for r in range(len(self.plan.models)):
                out.partitions += self.finished[s, r].per_unit
                out.add(self.summaries.pop((s, r)))
        return out

    def pending(self, r: int) -> list[int]:
        """The target sets that recommender ``r`` has still to measure or summarise (not reused)."""
        return [s for s in range(len(self.plan.sets)) if (s, r) not in self.reused]

    def chunk_done(self, s: int, r: int, part: int) -> bool:
        """Whether an earlier attempt finished the ``part``-th chunk of (set, recommender)."""
        return part < self.reused_chunks.get((s, r), 0)

    def to_measure(self, r: int, n_chunks: list[int] | None) -> list[int]:
        """The target sets of which recommender ``r`` has chunks to measure, given each set's
        number of chunks (None: not known, every set :meth:`pending`)."""
        return [s for s in self.pending(r) if n_chunks is None or not self.chunk_done(s, r, n_chunks[s] - 1)]


class LocalFold:
    """A fold's plan executed in this process (see the module); what an earlier attempt finished of
    it (``earlier``, :meth:`RunSink.unfinished_fold`: (system, protocol) partitions, chunks of users
    of the others) is read back, not measured again, in the ranges of users that attempt used, and
    a recommender with nothing left to measure is not fitted."""

    def __init__(self, plan: FoldPlan, sink: RunSink, progress: Progress, timings: Timings,
                 earlier: UnfinishedFold | None = None) -> None:
        self.plan, self.sink, self.progress, self.timings = plan, sink, progress, timings
        self.earlier = earlier or UnfinishedFold()

    def run(self) -> FoldSummary:
        """Fit, then rank and measure every range of users; the fold's summary and files."""
        plan, recorded = self.plan, self.earlier.users_per_range
        trains = {id(t.train): t.train for t in plan.sets}  # uniform test moves ratings into train
        keeper = PartitionKeeper(plan, self.sink, self.timings, self.earlier)
        ratings = [(job.system, RATINGS) not in self.earlier.partitions for job in plan.models] \
            if plan.options.measure.rating else [False] * len(plan.models)
        if any(ratings):  # measured on the fold's own split, though only uniform tests may draw targets
            trains.setdefault(id(plan.split.train), plan.split.train)
        n_chunks = None if recorded is None else chunk_counts(plan, recorded)[1]
        needed = [job for r, job in enumerate(plan.models) if keeper.to_measure(r, n_chunks) or ratings[r]]
        fitted = fit_models(dataclasses.replace(plan, models=needed), trains, self.progress, self.timings)
        try:
            self._ranges(fitted, trains, keeper)
            keeper.finish()
            self.timings.add(plan.fold, "", "wait for writes", time.perf_counter() - keeper.waited)
        finally:
            keeper.close()
        out = keeper.fold_summary()
        self.sink.write_fold_scratch_of(plan.fold, [keeper.finished[s, r] for s in range(len(plan.sets))
                                                    for r in range(len(plan.models))])
        self._rating_rows(fitted, out)
        return out

    def _ranges(self, fitted: FittedModels, trains: dict, keeper: PartitionKeeper) -> None:
        """Every range of users: its units of every target set built once, then ranked and measured
        by each recommender (those fitted in the background last), but for the pairs and chunks
        reused; the users per range recorded first, unless an earlier attempt recorded them."""
        from recsys_eval.recommend.base import SharedBlock

        plan, sets, n_users = self.plan, self.plan.sets, self.plan.split.train.n_users
        per_range = self.earlier.users_per_range
        if per_range is None:
            shares = any(SharedBlock.shares(m) for m in fitted.models.values())
            per_range = range_users(plan, n_users, plan.split.train.n_items if shares else 0)
            self.sink.record_ranges(plan.fold, per_range)
        starts, n_chunks = chunk_counts(plan, per_range)
        # the sets of each train together, so that one shared block is alive at a time
        by_train = sorted(range(len(sets)), key=lambda s: list(trains).index(id(sets[s].train)))
        order = sorted(range(len(plan.models)), key=lambda r: plan.models[r].system in fitted.background)
        parts, units_before = [0] * len(sets), [0] * len(sets)
        total = len(starts) * len(plan.models) * len(sets)
        with self.progress.step(f"[{plan.fold}] rank and measure", total=total) as advance:
            for first in starts:
                stop = min(int(first) + per_range, n_users)
                start = time.perf_counter()
                chunks = [s.of_users(int(first), stop) for s in sets]
                self.timings.add(plan.fold, "", "build targets", start)
                todo = [s for s in by_train if chunks[s].targets.n_units or (sets[s].users == 0 and first == 0)]
                part, before = list(parts), list(units_before)
                for s in todo:
                    units_before[s] += chunks[s].targets.n_units
                    parts[s] += 1
                for r in order:
                    pending = keeper.pending(r)
                    measured = [s for s in todo if s in pending and not keeper.chunk_done(s, r, part[s])]
                    blocks: dict[int, object] = {}
                    for s in measured:
                        key = id(sets[s].train)
                        if key not in blocks:
                            blocks.clear()  # the previous train's block is done with
                            # a model fitted in the background on a later train side may still be
                            # fitting while this side is measured
                            fitted.wait_for(plan.models[r].system, plan.fold, self.timings, key)
                            model = fitted.models[plan.models[r].system, key]
                            blocks[key] = SharedBlock(model, int(first), stop) if SharedBlock.shares(model) else model
                        self._measure(blocks[key], chunks[s], (s, part[s], r), before[s], stop == n_users,
                                      n_chunks[s], keeper)
                        advance()
                    advance(len(sets) - len(measured))
                    blocks.clear()
                    if stop == n_users:  # the sets without users in the last range, or whose last chunk is reused
                        for s in sorted(set(pending) - set(measured)):
                            keeper.submit(keeper.summarise, s, r)

    def _measure(self, model, chunk: ProtocolTargets, at: tuple[int, int, int], offset: int, last: bool,
                 n_chunks: int, keeper: PartitionKeeper) -> None:
        """One chunk of one target set ranked and measured by one recommender; its rows and its
        scratch tables (curves, exposure counts, pooled-AUC samples) handed to the keeper."""
        from recsys_eval.report.curves import curve_rows

        plan, (s, _, r) = self.plan, at
        job, options, fold = plan.models[r], plan.options, plan.fold
        start = time.perf_counter()
        rankings = jobs.rank(plan.rank, model, chunk)
        self.timings.add(fold, job.system, f"rank {chunk.label}", start)
        start, waited_before = time.perf_counter(), keeper.waited
        # the exposure counts added before the keeper may summarise (s, r), which reads them
        exposure = keeper.exposure[s, r] if options.measure.run_level else None
        frame = jobs.measure_ranking(options.measure, plan.data, rankings, chunk, job.system, fold, run_level=False,
                                     exposure=exposure)
        counts = exposure.state() if exposure is not None else None  # as they are now: the next chunk adds to them
        scratch = {CURVE_CHUNKS: curve_rows(rankings, chunk.targets, system=job.system, protocol=chunk.label, fold=fold)}
        if chunk.targets.all_candidates and not chunk.targets.one_relevant:
            scratch[EXPOSURE_COUNTS] = jobs.exposure_rows(rankings, chunk, job.system, fold, bins=options.exposure_bins,
                                                          k=options.measure.kmax)
        if plan.pool_auc and getattr(rankings, "scores", True) is not None:
            seed = options.seeds.auc_pool(fold, job.configured.definition, chunk.definition, jobs.first_user(chunk))
            scratch[AUC_SCORES] = jobs.scored_rows(rankings, chunk, job.system, fold, seed=seed, n_chunks=n_chunks)
        del rankings
        keeper.submit(keeper.keep, at, frame, offset, chunk.label, last, scratch, counts)
        del frame
        # the step's own time: its wait for the keeper's previous chunk is counted once, under
        # "wait for writes"
        self.timings.add(fold, job.system, f"measure {chunk.label}", start + keeper.waited - waited_before)

    def _rating_rows(self, fitted: FittedModels, out: FoldSummary) -> None:
        """Rating-prediction metrics of each recommender on the fold's test ratings, each marked
        done as a partition of its own (with no file where there are no rows); reused if an
        earlier attempt marked it."""
        plan = self.plan
        if not plan.options.measure.rating:
            return
        for job in plan.models:
            done = self.earlier.partitions.get((job.system, RATINGS))
            if done is not None:
                if done.per_unit:
                    out.add(reuse_partition(plan.options.summarising, done.per_unit))
                out.partitions += done.per_unit
                out.reused += 1
                continue
            fitted.wait_for(job.system, plan.fold, self.timings)  # one none of whose target sets was left
            model = fitted.models[job.system, id(plan.split.train)]
            rating = jobs.rating_rows(model, plan.split, job.system, list(plan.options.measure.rating), plan.data)
            files = [] if rating is None else [self.sink.write_partition(rating)]
            if rating is not None:
                out.add(summarise_frames(plan.options.summarising, [rating]))
            out.partitions += self.sink.finish_partition(plan.fold, job.system, RATINGS, files).per_unit


def _done(value):
    """``value``, or its result if it is a future."""
    return value.result() if isinstance(value, Future) else value


@functools.cache
def _writer() -> ThreadPoolExecutor:
    """The one thread that writes per-unit files and their notes beside the keeper, for the whole
    process (as :func:`_keeper`)."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="recsys-write")


@functools.cache
def _keeper() -> ThreadPoolExecutor:
    """The one thread that writes and reduces per-unit rows beside the main thread, for the whole
    process: a new thread per fold would take a new malloc arena each time, and the process would
    grow by ~150 MB a fold at ML-1M size."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="recsys-keep")


def chunk_counts(plan: FoldPlan, per_range: int) -> tuple[np.ndarray, list[int]]:
    """The first users of a fold's ranges of ``per_range`` users, and each target set's number of
    chunks: the ranges holding its users (a set without users is evaluated once, empty)."""
    starts = np.arange(0, max(plan.split.train.n_users, 1), per_range)
    return starts, [max(len(np.unique(np.searchsorted(starts, s.plan.users, side="right"))), 1) for s in plan.sets]


def range_users(plan: FoldPlan, n_users: int, block_items: int) -> int:
    """Users per range of a fold so that the run stays under the memory budget: what is free of the
    budget now (data and models are resident) divided by a range's cost per user, a planning
    estimate: every target set's units of the user (from its mean units per user, listed targets
    and per-unit rows per unit, weighted by the share of users the set has), and a row of one
    shared score block (``block_items`` float32; 0 when no model shares blocks)."""
    options = plan.options
    if options.users_per_chunk is not None:
        return min(options.users_per_chunk, max(n_users, 1))
    m = options.measure
    values = len(m.k) * (len(m.ranking) + len(m.rating)) + 2  # + whole-list metrics, aux
    per_user = 4.0 * block_items
    for target_set in plan.sets:
        per_user += _cost_per_user(target_set, values, plan.rank.depth, n_users)
    budget, free = options.memory, options.memory - resident_bytes()
    smallest = MIN_CHUNK_USERS * per_user
    if free < smallest:
        raise ConfigError(
            f"memory budget {format_size(budget)} is too small for this fold's {len(plan.sets)} target sets: "
            f"the data and models take {format_size(resident_bytes())} and the smallest range of users "
            f"({MIN_CHUNK_USERS}) about {format_size(smallest)}; set [run] memory (or --memory) "
            f"to at least {format_size(resident_bytes() + smallest)}"
        )
    return int(min(max(n_users, 1), free // per_user))


def _cost_per_user(target_set: TargetSet, values: int, depth: int, n_users: int) -> float:
    """A target set's bytes per user of a range, averaged over the fold's users."""
    ranked = depth if target_set.listed_per_unit == 0 else target_set.listed_per_unit
    per_unit = values * _ROW_BYTES + target_set.listed_per_unit * _TARGET_BYTES + ranked * _RANKED_BYTES
    return max(target_set.units_per_user, 1.0) * per_unit * target_set.users / max(n_users, 1)
