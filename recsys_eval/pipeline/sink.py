"""The one writer of a run's files: :class:`RunSink`, over
:class:`~recsys_eval.core.results.ResultsFolder` (which owns the file names and the layout).

Everything a run writes goes through it, in the order a run makes it: the config as run, the
partition layout, each fold's ranges of users, each chunk's per-unit rows, scratch tables and
note, each partition's note, each fold's scratch tables and its completion mark,
its split and sampled negatives, the tuning log, the learning curve, the side tables made from the scratch, the summary,
the data statistics, the timings and log, the manifest, the analysis and report, and the rename
that makes the folder complete. ``recsys-eval evaluate`` writes through the same sink, as a run of
one fold.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from recsys_eval.core import atomic
from recsys_eval.core.results import (
    AUC_POOLING,
    AUC_SCORES,
    CONFIG,
    CONFIG_ORIGINAL,
    CURVE_CHUNKS,
    CURVES,
    DATA_STATS,
    EXPOSURE,
    EXPOSURE_COUNTS,
    LEAKAGE,
    LEAKAGE_USERS,
    LEARNING_CURVE,
    LOG,
    OVERRIDES,
    SUMMARY,
    TIMINGS,
    TUNING,
    TUNING_BUDGET,
    UNIT_SLICES,
    USER_SLICES,
    FinishedChunk,
    FinishedPartition,
    Manifest,
    ResultsFolder,
    UnfinishedFold,
)
from recsys_eval.pipeline.config import ExperimentConfig, identity_hash, resolved_text

if TYPE_CHECKING:
    import numpy as np

    from recsys_eval.core import Interactions, Split


class RunSink:
    """Writes one run's results folder; nothing else writes into it."""

    def __init__(self, folder: ResultsFolder, config_hash: str | None = None) -> None:
        self.folder = folder
        #: The hash of the config as run, which ``--resume`` matches work folders by.
        self.config_hash = config_hash
        #: A results folder at a URI (:class:`recsys_eval.engine.remote.RemoteFolder`), which Spark
        #: writes the per-unit files into and :meth:`finish` copies the rest of ``folder`` to; None:
        #: ``folder`` is the results folder.
        self.remote = None

    @classmethod
    def create(cls, out_root: str | Path, config: ExperimentConfig, original: str, overrides: Sequence[str] = (),
               *, resume: bool) -> RunSink:
        """A new run's work folder (or, with ``resume``, the newest one of the same config), with
        the config as run saved in it: resolved (what the report reads and a rerun takes), the file
        as written, and the command-line ``overrides`` that turned one into the other."""
        cfg_hash = identity_hash(config)
        folder = ResultsFolder.create(Path(out_root), config.name, cfg_hash, resume=resume)
        folder.write_text(CONFIG, resolved_text(config))
        folder.write_text(CONFIG_ORIGINAL, original)
        if overrides:
            folder.write_text(OVERRIDES, "\n".join(overrides) + "\n")
        return cls(folder, cfg_hash)

    @classmethod
    def create_at(cls, target: str | Path, *, force: bool) -> RunSink:
        """A work folder that becomes the folder ``target`` itself when complete (``evaluate``)."""
        return cls(ResultsFolder.create_at(Path(target), force=force))

    @property
    def path(self) -> Path:
        return self.folder.path

    # -- folds ----------------------------------------------------------------------------------
    def set_layout(self, folds: list[str], systems: list[str], protocols: list[str]) -> None:
        self.folder.set_layout(folds, systems, protocols)

    def completed(self, fold: str) -> list[Path] | None:
        """The partitions of ``fold`` when an earlier attempt completed it, else None."""
        return self.folder.fold_partitions(fold) if self.folder.fold_done(fold) else None

    def write_partition(self, per_unit: pl.DataFrame, *, part: int = 0) -> Path:
        return self.folder.write_partition(per_unit, part=part)

    def write_fold_scratch(self, fold: str, exposure: list[pl.DataFrame], scored: list[pl.DataFrame],
                           curves: list[pl.DataFrame]) -> None:
        """A fold's exposure counts, pooled-AUC samples and curve chunks, each kept until the side
        tables are made from every fold's (:meth:`write_side_tables`)."""
        for kind, frames in ((EXPOSURE_COUNTS, exposure), (AUC_SCORES, scored), (CURVE_CHUNKS, curves)):
            if frames:
                self.folder.write_scratch(kind, fold, pl.concat(frames))

    def unfinished_fold(self, fold: str, *, reuse: bool = True) -> UnfinishedFold:
        """The (system, protocol) partitions of ``fold`` an earlier attempt completed, the first
        chunks of users it completed of the others, and its ranges of users; the files of what it
        left unfinished (without ``reuse``: of all it did) are deleted (:meth:`ResultsFolder.unfinished_fold`)."""
        return self.folder.unfinished_fold(fold, reuse=reuse)

    def record_ranges(self, fold: str, users_per_range: int) -> None:
        """The users per range of users ``fold`` is measured in, which a resume then keeps."""
        self.folder.record_ranges(fold, users_per_range)

    def finish_chunk(self, fold: str, system: str, protocol: str, chunk: int, per_unit: pl.DataFrame,
                     scratch: dict[str, pl.DataFrame], counts: dict[str, np.ndarray] | None) -> FinishedChunk:
        """A chunk of users of a partition complete: its ``per_unit`` rows (the partition's
        ``chunk``-th file), its scratch tables and the partition's run-level ``counts`` so far
        written, their folders made durable once for all of them (:func:`atomic.folders_synced_once`),
        then the note that marks it done, listing them."""
        with atomic.folders_synced_once():
            done = FinishedChunk(
                self.write_partition(per_unit, part=chunk),
                {kind: self.folder.write_partition_scratch(fold, system, protocol, chunk, kind, frame)
                 for kind, frame in scratch.items()},
                None if counts is None else self.folder.write_chunk_counts(fold, system, protocol, chunk, counts))
        self.folder.mark_chunk_done(fold, system, protocol, chunk, done)
        return done

    def finish_partition(self, fold: str, system: str, protocol: str, per_unit: list[Path],
                         chunks: Sequence[FinishedChunk] = ()) -> FinishedPartition:
        """A partition complete: the note that marks it done, listing its ``per_unit`` files
        (its chunks' and its run-level rows', written before) and its ``chunks``' scratch tables."""
        kinds = dict.fromkeys(kind for chunk in chunks for kind in chunk.scratch)
        done = FinishedPartition(per_unit, {kind: [c.scratch[kind] for c in chunks if kind in c.scratch]
                                            for kind in kinds})
        self.folder.mark_partition_done(fold, system, protocol, done)
        return done

    def write_fold_scratch_of(self, fold: str, partitions: list[FinishedPartition]) -> None:
        """A fold's scratch tables (:meth:`write_fold_scratch`) from its partitions' chunks', in the
        order given, each streamed from its chunks' files into the fold's: read whole, the three
        tables of every chunk of the fold were the fold's peak of memory (150 MB at 600 users of the
        ML-1M study, where ranking and measuring held less)."""
        for kind in (EXPOSURE_COUNTS, AUC_SCORES, CURVE_CHUNKS):
            files = [path for p in partitions for path in p.scratch.get(kind, [])]
            if files:
                self.folder.write_scratch(kind, fold, pl.scan_parquet(files))

    def save_split(self, split: Split, rows=None) -> None:
        """Save the fold's split, unless an earlier attempt of this run saved it: a split folder is
        renamed into place only once complete, and the same config and seed make the same split;
        ``rows``: what writes its row files (:func:`recsys_eval.split.io.write_rows`'s arguments)."""
        from recsys_eval.split import save_split

        folder = self.folder.split_folder(split.name)
        if not folder.is_dir():
            save_split(split, folder, rows=rows)

    def save_negatives(self, fold: str, label: str, users: np.ndarray, items: np.ndarray,
                       held_out: tuple[np.ndarray, np.ndarray], ids: Interactions) -> None:
        """A fold's negatives of protocol ``label`` in both layouts
        (:func:`recsys_eval.targets.write_negatives`)."""
        from recsys_eval.targets import write_negatives

        table, ncf = self.folder.negatives_files(fold, label)
        table.parent.mkdir(parents=True, exist_ok=True)
        write_negatives(users, items, held_out, ids, table, ncf)

    def mark_fold_done(self, fold: str, partitions: list[Path]) -> None:
        """The fold is complete: its partitions and split are written (``--resume`` reuses it)."""
        self.folder.mark_fold_done(fold, partitions)

    @property
    def tuning_log(self) -> Path:
        """Where the tuner records its trials as they finish (recsys_eval.tune.log)."""
        return self.folder.file(TUNING)

    # -- the run's tables -------------------------------------------------------------------------
    def write_learning_curve(self, per_unit: pl.DataFrame) -> None:
        self.folder.write_table(LEARNING_CURVE, per_unit, csv=False)

    def write_side_tables(self) -> None:
        """Exposure per popularity bin, the pooled-AUC table and the ROC and PR curves, from the
        folds' scratch files."""
        from recsys_eval.compare import auc_aggregation
        from recsys_eval.pipeline.jobs import exposure_shares
        from recsys_eval.report.curves import combine_curves

        curves = self.folder.scratch_files(CURVE_CHUNKS)
        if curves:
            self.folder.write_table(CURVES, combine_curves(pl.concat([pl.read_parquet(f) for f in curves])), csv=False)
        exposure = self.folder.scratch_files(EXPOSURE_COUNTS)
        if exposure:
            self.folder.write_table(EXPOSURE, exposure_shares(pl.concat([pl.read_parquet(f) for f in exposure])),
                                    csv=False)
        scored = self.folder.scratch_files(AUC_SCORES)
        if len(scored) >= 2:
            # one (system, protocol) at a time: the folds' pooled scores are never all in memory
            lazy = pl.scan_parquet(scored).select("system", "protocol", "fold", "score", "label", "weight")
            keys = sorted(lazy.select("system", "protocol").unique().collect().iter_rows())
            pooled = [auc_aggregation(lazy.filter((pl.col("system") == system) & (pl.col("protocol") == protocol))
                                      .collect()) for system, protocol in keys]
            self.folder.write_table(AUC_POOLING, pl.concat(pooled), csv=False)

    def write_summary(self, summary: pl.DataFrame) -> None:
        self.folder.write_table(SUMMARY, summary)

    def write_data_stats(self, stats: pl.DataFrame) -> None:
        self.folder.write_table(DATA_STATS, stats, csv=False)

    def write_leakage(self, splits: list[Split], audit=None) -> None:
        """The folds' leakage audit (``audit`` of the splits, by default
        :func:`recsys_eval.split.leakage_audit`), when every side has timestamps; a per-user table
        given as a lazy frame is streamed into its file."""
        from recsys_eval.split import leakage_audit

        if all(s.train.has_timestamp and s.test.has_timestamp for s in splits):
            made = (audit or leakage_audit)(splits)
            self.folder.write_table(LEAKAGE, made.folds)
            if isinstance(made.users, pl.LazyFrame):
                atomic.sink_parquet(made.users, self.folder.path / f"{LEAKAGE_USERS}.parquet")
            else:
                self.folder.write_table(LEAKAGE_USERS, made.users, csv=False)

    def write_user_slices(self, splits: list[Split], specs: list[str], attributes: str | None = None,
                          threshold: float | None = None) -> None:
        """Each fold's test users by slice group (recsys_eval.split.slices), when slices are asked
        for; ``attributes``: the user attributes file of the attribute slices; the relevant test
        interactions (rating at least ``threshold``) by popularity group for the popularity slices
        (recsys_eval.compare.slices)."""
        from recsys_eval.compare.slices import unit_slices
        from recsys_eval.split.slices import read_user_attributes, user_slices

        table = user_slices(splits, specs, read_user_attributes(attributes) if attributes else None)
        if table.height:
            self.folder.write_table(USER_SLICES, table, csv=False)
        units = unit_slices(splits, specs, threshold)
        if units.height:
            self.folder.write_table(UNIT_SLICES, units, csv=False)

    def write_tuning_budget(self, budget: pl.DataFrame) -> None:
        """What tuning spent per (fold, system) (recsys_eval.tune.budget)."""
        self.folder.write_table(TUNING_BUDGET, budget)

    def write_timings(self, rows: list[dict]) -> None:
        atomic.write_csv(pl.DataFrame(rows), self.folder.file(TIMINGS))

    def write_log(self, lines: list[str]) -> None:
        self.folder.write_text(LOG, "\n".join(lines) + "\n")

    def write_manifest(self, manifest: Manifest) -> None:
        self.folder.write_manifest(manifest)

    def relative(self, paths: list[Path]) -> list[str]:
        """Paths inside the folder as the manifest lists them."""
        return [str(p.relative_to(self.folder.path)) for p in paths]

    def analyse(self, paired_runner=None) -> None:
        """The comparison tables (recsys_eval.compare.study), read from the folder as written so
        far (the manifest included); the paired tests by ``paired_runner`` when given (the Spark
        engine's: recsys_eval.engine.paired)."""
        from recsys_eval.compare.study import analyse

        analyse(self.folder, paired_runner=paired_runner)

    def report(self) -> None:
        """The report (recsys_eval.report), from the folder and its comparison tables."""
        from recsys_eval.report import write_report

        write_report(self.folder.path)

    def discard(self) -> None:
        """Leave nothing behind of a run that failed and cannot be resumed (``evaluate``, a run
        whose results go to a :attr:`remote` folder: its staging and the folder at the URI too)."""
        self.folder.discard()
        if self.remote is not None:
            self.remote.discard()

    @contextmanager
    def discarded_unless_resumable(self) -> Iterator[None]:
        """The body of a run: when it fails (an error or an interrupt leaves it), a run whose
        results go to a :attr:`remote` folder, which ``--resume`` cannot take up, is discarded
        (:meth:`discard`); a local run's work folder stays, for ``--resume``."""
        try:
            yield
        except BaseException:
            if self.remote is not None:
                self.discard()
            raise

    def finish(self, manifest: Manifest) -> Path | str:
        """The manifest written and the folder made complete (renamed into place); with a
        :attr:`remote` folder, copied there, its manifest last, and its URI returned."""
        path = self.folder.finish(manifest)
        return path if self.remote is None else self.remote.publish(path)
