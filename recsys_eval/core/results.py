"""The per-unit results table every summary, test and plot is computed from, and the results folder
that holds it (docs/CONVENTIONS.md#notation).

One row per (system, protocol, fold, user, unit, metric, k). ``user`` holds the raw user id (integer
or string, as in the data); ``unit`` numbers the evaluation units of one (system, protocol, fold)
(a user under AR, one relevant item of a user under 1R); ``k`` is null for metrics without a cutoff;
``value`` is NaN where the metric is undefined for the unit (e.g. recall with no relevant item),
so that the averaging policy, not the kernel, decides what to do with it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import json
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from recsys_eval.core import atomic
from recsys_eval.core.atomic import is_scratch, scratch_path
from recsys_eval.core.columns import polars_frame
from recsys_eval.core.lock import FolderLock
from recsys_eval.errors import ConfigError, DataError, OutputError

PER_UNIT_SCHEMA: dict[str, pl.DataType] = {
    "system": pl.String,
    "protocol": pl.String,
    "fold": pl.String,
    "user": pl.Int64,  # or pl.String for string raw ids
    "unit": pl.Int64,
    "metric": pl.String,
    "k": pl.Int32,
    "value": pl.Float64,
}
PER_UNIT_COLUMNS: tuple[str, ...] = tuple(PER_UNIT_SCHEMA)
#: The label columns of the per-unit table, constant within a per-unit file: they name its folders,
#: hive-style, instead of being stored in it (:class:`PartitionFiles`). Fold first, then protocol:
#: a fold is one folder (what a resume cleans), and so is a (fold, protocol), what the end-of-run
#: analysis reads at a time (:mod:`recsys_eval.compare.parts`); its systems are its subfolders.
PER_UNIT_LABELS: tuple[str, ...] = ("fold", "protocol", "system")
#: The columns a per-unit file holds, in order.
PER_UNIT_FILE_COLUMNS: tuple[str, ...] = tuple(c for c in PER_UNIT_COLUMNS if c not in PER_UNIT_LABELS)
#: The types of the label folders, for a hive reader: ``pl.scan_parquet("<folder>/per_unit/**/*.parquet",
#: hive_schema=PER_UNIT_HIVE_SCHEMA)`` keeps a fold named ``1`` or a system named ``2024`` text.
PER_UNIT_HIVE_SCHEMA: dict[str, pl.DataType] = {c: pl.String for c in PER_UNIT_LABELS}
#: The characters a label folder escapes as ``%XX`` (upper-case hex), the set Spark's
#: ``ExternalCatalogUtils.escapePathName`` escapes on a POSIX system (control characters, DEL and
#: ``"#%'*/:=?\{[]^``), so that Spark's ``partitionBy`` names the folders of a label as this package
#: does; every other character, non-ASCII ones included, stays as it is (UTF-8). Spark and polars both
#: decode any ``%XX`` back.
_ESCAPES = {c: f"%{c:02X}" for c in [*range(0x20), 0x7F, *map(ord, "\"#%'*/:=?\\{[]^")]}
_ESCAPED = re.compile(r"%([0-9A-Fa-f]{2})")


def label_folder(key: str, value: str) -> str:
    """The folder name of a label, hive-style: ``protocol=AI+1R+NN100``, ``system=a%2Fb`` (see
    :data:`_ESCAPES`); an empty or missing label is an error (Spark would write it as null)."""
    if not value:
        raise DataError(f"a per-unit {key} label must be a non-empty string; got {value!r}")
    return f"{key}={value.translate(_ESCAPES)}"


def per_unit_folder(labels: dict[str, str]) -> str:
    """The folder of a (fold, protocol, system)'s per-unit files within the results folder:
    ``per_unit/fold=<fold>/protocol=<protocol>/system=<system>``."""
    return "/".join([PER_UNIT, *(label_folder(key, labels[key]) for key in PER_UNIT_LABELS)])


def per_unit_file(labels: dict[str, str], part: int) -> str:
    """A per-unit file within the results folder: the ``part``-th of its (fold, protocol, system),
    ``<per_unit_folder>/part-<part, 5 digits>.parquet``."""
    return f"{per_unit_folder(labels)}/part-{part:05d}.parquet"


def labels_of(path: str | Path) -> dict[str, str]:
    """The labels a per-unit file's folders name (:func:`per_unit_folder`), decoded; a path not in
    that layout is an error naming it."""
    folders = str(path).replace("\\", "/").split("/")[-4:-1]
    labels = {}
    for key, folder in zip(PER_UNIT_LABELS, folders, strict=False):
        name, sep, value = folder.partition("=")
        if name != key or not sep:
            break
        labels[key] = _ESCAPED.sub(lambda code: chr(int(code.group(1), 16)), value)
    if len(labels) != len(PER_UNIT_LABELS):
        raise DataError(f"{path}: not a per-unit file of a results folder; expected "
                        f"{PER_UNIT}/fold=<fold>/protocol=<protocol>/system=<system>/<file>.parquet")
    return labels


def read_per_unit(files: Sequence[str | Path]) -> pl.LazyFrame:
    """The per-unit table of ``files`` (per-unit files of a results folder, of either engine), in
    the order given, as one lazy frame of :data:`PER_UNIT_COLUMNS`: each file's columns with the
    labels its folders name (String, whatever they look like; a path outside the layout is an error
    naming it). The one reader of per-unit files: one hive-style scan of them all, which opens the
    files a few at a time (a scan per folder, concatenated, ran the ML-1M study's 760 folders at
    once, past polars' 512 blocking threads, and took 10 times as long to read the table)."""
    files = [Path(path) for path in files]
    for folder in dict.fromkeys(path.parent for path in files):
        labels_of(folder / "part.parquet")
    if not files:
        return pl.LazyFrame(schema=PER_UNIT_SCHEMA)
    return pl.scan_parquet(files, hive_partitioning=True, hive_schema=PER_UNIT_HIVE_SCHEMA).select(PER_UNIT_COLUMNS)


def check_per_unit(frame: pl.DataFrame, source: str = "per-unit results") -> pl.DataFrame:
    """Check that ``frame`` (polars or pandas) has the per-unit columns; return it with them in order."""
    frame = polars_frame(frame, source)
    missing = [c for c in PER_UNIT_COLUMNS if c not in frame.columns]
    if missing:
        raise DataError(f"{source}: missing columns {missing}; expected {list(PER_UNIT_COLUMNS)}")
    if not frame.schema["value"].is_numeric():
        raise DataError(f"{source}: column 'value' is {frame.schema['value']}; expected numbers")
    # a frame already in order is returned as it is: a select is a query of polars' engine, which
    # the keeper thread of a run (recsys_eval.pipeline.local) would pay for each chunk it writes
    return frame if tuple(frame.columns) == PER_UNIT_COLUMNS else frame.select(PER_UNIT_COLUMNS)


def partition_labels(per_unit: pl.DataFrame) -> dict[str, str] | None:
    """``{system, protocol, fold}`` when every row of ``per_unit`` holds the same ones (a partition
    of a run), else None: one comparison per row, no hashing."""
    if not per_unit.height:
        return None
    first = per_unit.row(0, named=True)
    if any(first[c] is None for c in _KEY_COLUMNS):
        return None
    same = per_unit.select(pl.all_horizontal((pl.col(c) == first[c]).all() for c in _KEY_COLUMNS)).item()
    return {c: first[c] for c in _KEY_COLUMNS} if same else None


# -- the results folder -------------------------------------------------------------------------
#: 3: per-unit files in hive-style folders named by their labels, without label columns (2: one
#: folder per fold, files named by indices, each with its labels in every row).
FORMAT_VERSION = 3
CONFIG = "config.toml"
#: Beside the resolved config a run reads (:data:`CONFIG`): the config file as written, and the
#: command-line options (``--set`` ...) that changed it, one a line.
CONFIG_ORIGINAL, OVERRIDES = "config.original.toml", "overrides.txt"
MANIFEST = "manifest.json"
PER_UNIT = "per_unit"
SUMMARY = "summary"
TIMINGS = "timings.csv"
DATA_STATS = "data_stats"
LOG = "log.txt"
EXPOSURE = "exposure_bins"
AUC_POOLING = "auc_pooling"
LEARNING_CURVE = "per_unit_learning_curve"
#: Averaged ROC and PR curves on a fixed grid per (fold, system, protocol) (recsys_eval.report.curves).
CURVES = "curves"
#: Every tuning trial (recsys_eval.tune.log), written as trials finish; a trial's hyperparameters
#: are its columns named with :data:`TUNING_PARAM_PREFIX`.
TUNING = "tuning.parquet"
TUNING_PARAM_PREFIX = "param_"
#: Per (fold, system): whether it was tuned, its trials, seconds, search space, validation splitter
#: and the check that tuning read nothing of the test side (recsys_eval.tune.budget).
TUNING_BUDGET = "tuning_budget"
#: A study over several datasets: the systems' ranks over datasets with the Friedman test and post-hoc.
CROSS_DATASET = "cross_dataset"
#: The leakage audit of the folds (recsys_eval.split.leakage): one row per fold, and one per (fold,
#: test user); written when the data has timestamps.
LEAKAGE, LEAKAGE_USERS = "leakage", "leakage_users"
#: Each fold's test users by slice group (``[analysis] slices``; recsys_eval.split.slices).
USER_SLICES = "user_slices"
#: Each fold's relevant test interactions by popularity group, the units of 1R protocols
#: (``popularity:S`` slices; recsys_eval.compare.slices).
UNIT_SLICES = "unit_slices"
#: The folder of each fold's saved split (recsys_eval.split.save_split).
SPLITS = "splits"
#: The folder of every sampled protocol's negatives (``[run] save_negatives``), ``<fold>/<label>``
#: in NCF's layout (``.negative``) and as a user,item table (``.parquet``).
NEGATIVES, NCF_NEGATIVES_SUFFIX = "negatives", ".negative"
#: The report's files (recsys_eval.report) and its figures' folder.
REPORT_MD, REPORT_HTML = "report.md", "report.html"
TABLES_TEX, TABLES_TEX_WIDE = "tables.tex", "tables-twocolumn.tex"
#: The report's LaTeX table of effect sizes against the baseline (recsys_eval.report.diagnostics).
EFFECT_SIZES_TEX = "effect-sizes.tex"
FIGURES = "figures"
#: Scratch folders of a run in progress, one file per fold in each, removed when it completes:
#: exposure counts per popularity bin, the sampled scored targets of the pooled AUC, and the ROC and
#: PR curves of every chunk.
EXPOSURE_COUNTS, AUC_SCORES, CURVE_CHUNKS = "exposure", "auc_scores", "curve_chunks"
#: Scratch folder of a fold not yet complete, ``partitions/f<i>/``: ``ranges.json``, the users per
#: range of users the fold is measured in; for each chunk of users of a partition (fold, system,
#: protocol), ``s<j>-p<k>-c<chunk>.<kind>.parquet``, its tables of each scratch kind,
#: ``s<j>-p<k>-c<chunk>.counts.npz``, the partition's run-level counts so far, and, written last,
#: ``s<j>-p<k>-c<chunk>.json``, the note that marks the chunk done (:class:`FinishedChunk`); once the
#: partition is done, ``s<j>-p<k>.json``, the note that lists its files (:class:`FinishedPartition`).
PARTITIONS = "partitions"
#: Scratch folder of a run on Spark whose inputs Spark made: each fold's split as Parquet
#: partitioned by side, ``spark_splits/<fold>/side=<side>/`` (recsys_eval.engine.inputs).
SPARK_SPLITS = "spark_splits"
_RANGES = "ranges.json"
#: The note of a fold complete, listing its per-unit files (``partitions/f<i>/complete.json``).
_FOLD_DONE = "complete.json"
_NOTE = re.compile(r"^s(\d+)-p(\d+)(?:-c(\d+))?\.json$")
SCRATCH = ("folds", EXPOSURE_COUNTS, AUC_SCORES, CURVE_CHUNKS, PARTITIONS, SPARK_SPLITS)
#: Comparisons of a folder with other options than its run's (``recsys-eval compare``), one
#: subfolder each.
COMPARISONS = "comparisons"
#: Tables the compare stage writes into a folder (Parquet, with a CSV beside each).
ANALYSIS_TABLES = (
    "paired_tests", "fold_paired_tests", "agreement", "sampled_correction", "sampled_ordering",
    "popularity_bins", "exposure", "learning_curve", "aggregation_f", "aggregation_auc",
    "aggregation_audit", "distributions", "slices", "slice_tests",
)
#: The per-user quantile functions and Lorenz curves of every (system, protocol, metric, k) on a grid
#: of 101 shares of users, of the run's fold (``all``: averaged over folds) that the report draws
#: (recsys_eval.compare.distributions); Parquet only, as its rows are many.
DISTRIBUTION_CURVES = "distribution_curves"
#: The tables of a study over several datasets (recsys_eval.experiment.datasets_study).
CROSS_DATASET_TABLES = ("values", "ranks", "friedman", "nemenyi", "holm")
#: Every table a results folder can hold, by name (``<name>.parquet``, most with a CSV beside).
TABLES = (SUMMARY, DATA_STATS, LEAKAGE, LEAKAGE_USERS, USER_SLICES, UNIT_SLICES, TUNING_BUDGET, EXPOSURE, AUC_POOLING, LEARNING_CURVE, CURVES, *ANALYSIS_TABLES, DISTRIBUTION_CURVES,
          *CROSS_DATASET_TABLES)
_KEY_COLUMNS = ("fold", "system", "protocol")


@dataclass(frozen=True)
class Manifest:
    """What a results folder records about its run, typed, with every default in this one place
    (the values a folder written before a field existed is read with).

    ``kind`` is ``run`` (``recsys-eval run``), ``evaluate`` (a run file scored by ``recsys-eval
    evaluate``: one fold, one system, one protocol) or ``datasets`` (the comparison of a study over
    several ``datasets``, its systems ranked by ``ranked_by``: metric@k and protocol). ``seeds``
    holds every derived seed of the run by what it randomises; ``protocol_definitions`` each result
    label's axes, design and bin.
    """

    format: int = FORMAT_VERSION
    experiment: str = "results"
    kind: str = "run"
    description: str = ""
    created: str | None = None
    config_hash: str | None = None
    seed: int = 0
    seeds: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=lambda: {"name": "local"})
    dataset: str | None = None
    users: int | None = None
    items: int | None = None
    interactions: int | None = None
    folds: list[str] = field(default_factory=list)
    systems: list[str] = field(default_factory=list)
    protocols: list[str] = field(default_factory=list)
    protocol_definitions: dict[str, dict] = field(default_factory=dict)
    partitions: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    k: list[int] = field(default_factory=list)
    #: Every metric parameter's value (``rbp_persistence``...); a key absent takes its default.
    metric_params: dict[str, float] = field(default_factory=dict)
    relevance_threshold: float | None = None
    baseline: str | None = None
    tests: list[str] = field(default_factory=lambda: ["t", "wilcoxon"])
    correction: str = "holm"
    alpha: float = 0.05
    undefined: str = "skip"
    interval: str = "t"
    resamples: int = 1000
    #: Whether the analysis computes the per-user distributions (``[analysis] distributions``).
    distributions: bool = True
    datasets: list[str] = field(default_factory=list)
    ranked_by: dict[str, str] = field(default_factory=dict)
    #: The run's peak resident memory in MB, the largest step peak of ``timings.csv`` (from the
    #: start of the process to the end of the report).
    peak_rss_mb: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any], source: str = "manifest") -> Manifest:
        """A manifest read back; keys this version does not know are an error naming them."""
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise DataError(f"{source}: unknown manifest keys {unknown}; written by a newer recsys-eval?")
        return cls(**data)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def replace(self, **changes: Any) -> Manifest:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class FinishedChunk:
    """A chunk of users of a (fold, system, protocol) partition, measured and written: its per-unit
    file, its scratch tables by kind, and the partition's run-level counts up to and with it (None
    without run-level metrics; only the partition's last finished chunk keeps its counts file)."""

    per_unit: Path
    scratch: dict[str, Path] = field(default_factory=dict)
    counts: Path | None = None


@dataclass(frozen=True)
class FinishedPartition:
    """A complete (fold, system, protocol) partition of a fold in progress: its per-unit files in
    write order (chunks of users, then its run-level rows), and its chunks' scratch tables by kind,
    in chunk order."""

    per_unit: list[Path]
    scratch: dict[str, list[Path]] = field(default_factory=dict)


@dataclass(frozen=True)
class UnfinishedFold:
    """What an earlier attempt finished of a fold it did not complete: the (system, protocol)
    partitions marked done, the first chunks of users of each other partition (those marked done,
    in order), and the users per range of users the attempt used (None if it measured none), which
    a resume must use too: the chunks' files and their pooled-AUC samples depend on the ranges."""

    partitions: dict[tuple[str, str], FinishedPartition] = field(default_factory=dict)
    chunks: dict[tuple[str, str], list[FinishedChunk]] = field(default_factory=dict)
    users_per_range: int | None = None

    @property
    def n_chunks(self) -> int:
        """How many chunks of unfinished partitions are reused."""
        return sum(len(chunks) for chunks in self.chunks.values())


def read_counts(path: Path) -> dict[str, np.ndarray]:
    """A partition's run-level counts as a chunk left them (:meth:`ResultsFolder.write_chunk_counts`)."""
    with np.load(path) as arrays:
        return dict(arrays)


def config_hash(config_text: str) -> str:
    """A short hash of the config as run, to match a resumable work folder to its config."""
    return hashlib.sha256(config_text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class PartitionFiles:
    """The per-unit partition files of a results folder, hive-style:
    ``per_unit/fold=<fold>/protocol=<protocol>/system=<system>/part-<part>.parquet``
    (:func:`per_unit_file`, docs/CONVENTIONS.md#per-unit-files), each holding
    :data:`PER_UNIT_FILE_COLUMNS`; the labels, constant within a file, are its folders' names
    (written once per folder, not once per row: their three columns were half the CPU of writing a
    chunk). Small and picklable, so that a Spark task writes its partitions itself, where the local
    run writes them."""

    path: Path
    layout: dict[str, list[str]]

    def file(self, fold: str, system: str, protocol: str, part: int = 0) -> Path:
        self.indices(fold, system, protocol)  # a label the run does not have is an error naming it
        return self.path / per_unit_file({"fold": fold, "system": system, "protocol": protocol}, part)

    def indices(self, fold: str, system: str, protocol: str) -> tuple[int, int, int]:
        """The indices of a (fold, system, protocol) in the layout, which name its scratch files."""
        try:
            return tuple(self.layout[f"{key}s"].index(name)
                         for key, name in zip(_KEY_COLUMNS, (fold, system, protocol), strict=True))
        except ValueError:
            raise DataError(
                f"{self.path}: no partition for fold {fold!r}, system {system!r}, protocol {protocol!r}"
            ) from None

    def write(self, per_unit: pl.DataFrame, *, part: int = 0) -> Path:
        """Write the per-unit rows of one (fold, system, protocol), or of its ``part``-th chunk of
        users, as its own file (atomically), its labels in its folders' names."""
        labels = partition_labels(per_unit)
        if labels is None:
            keys = per_unit.select(*_KEY_COLUMNS).unique(maintain_order=True)
            raise DataError(
                f"a per-unit partition holds one fold, system and protocol, none of them null; got "
                f"{keys.height} (fold, system, protocol) combinations, e.g. {keys.rows()[:3]}"
            )
        target = self.file(labels["fold"], labels["system"], labels["protocol"], part)
        # zstd level 1: smaller and faster to write and read than the default level here; no
        # column statistics: a fifth of a chunk's writing CPU, and they would skip nothing (the
        # metrics come in the config's order, so a row group's min-max of them spans most names,
        # and no reader filters on users, units or values)
        atomic.write_parquet(check_per_unit(per_unit).select(PER_UNIT_FILE_COLUMNS), target,
                             compression="zstd", compression_level=1, statistics=False)
        return target


class ResultsFolder:
    """A run's results folder: the one owner of its file names, its manifest and its per-unit files.

    A run writes into a hidden work folder ``<root>/<experiment>/.partial-<config hash>-<time>-*``
    that is renamed to ``<root>/<experiment>/<UTC time>/`` only when every file is written, so an
    interrupted run never leaves a folder that looks complete, and ``--resume`` picks the newest
    work folder of the same config. An existing results folder is never overwritten.

    Per-unit values are written per (fold, system, protocol) as they are produced, one Parquet file
    per chunk of users in hive-style folders named by the labels
    (``per_unit/fold=<fold>/protocol=<protocol>/system=<system>/part-<chunk>.parquet``,
    :class:`PartitionFiles`), and read back as one table by :meth:`scan_per_unit` (or by
    ``pl.scan_parquet("<folder>/per_unit/**/*.parquet", hive_schema=PER_UNIT_HIVE_SCHEMA)``). The
    manifest lists every partition; a partition missing from the folder is an error naming it, never
    a silently partial mean.
    """

    def __init__(self, path: Path, root: Path | None = None, *, target: Path | None = None) -> None:
        self.path = Path(path)
        self.root = root if root is not None else self.path.parent
        self._manifest: Manifest | None = None
        self.lock = FolderLock(self.path)
        #: The folder a finished work folder becomes (:meth:`create_at`); None: a timestamped one.
        self.target = target

    # -- a run in progress --------------------------------------------------------------------
    @classmethod
    def create(cls, out_root: Path, experiment: str, cfg_hash: str, *, resume: bool) -> ResultsFolder:
        """The work folder of a new run, or with ``resume`` the newest one of the same config,
        locked against any other process until :meth:`finish`; a resumed folder loses the scratch
        files that an interrupted write left."""
        root = Path(out_root) / experiment
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _cannot_create(root, exc) from None
        if resume:
            previous = sorted(root.glob(f".partial-{cfg_hash}-*"))
            if previous:
                work = cls(previous[-1], root)
                work.lock.acquire()
                for scratch in [p for p in work.path.rglob(".*") if is_scratch(p)]:
                    if scratch.is_dir():
                        shutil.rmtree(scratch, ignore_errors=True)
                    else:
                        scratch.unlink(missing_ok=True)
                return work
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        try:
            work = cls(Path(tempfile.mkdtemp(prefix=f".partial-{cfg_hash}-{stamp}-", dir=root)), root)
        except OSError as exc:
            raise _cannot_create(root, exc) from None
        return work._locked_or_removed()

    def _locked_or_removed(self) -> ResultsFolder:
        """This new work folder, locked; removed if even its lock note cannot be written."""
        try:
            self.lock.acquire()
        except BaseException:
            shutil.rmtree(self.path, ignore_errors=True)
            raise
        return self

    @classmethod
    def create_at(cls, target: Path, *, force: bool) -> ResultsFolder:
        """The work folder of a run whose results go to the folder ``target`` itself (``recsys-eval
        evaluate --out``): refused if ``target`` exists, unless ``force``, in which case the old
        folder is replaced only when the new one is complete."""
        target = Path(target).absolute()
        if target.exists() and not force:
            raise ConfigError(f"output folder {str(target)!r} exists; choose another or pass --force to replace it")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            work = cls(Path(tempfile.mkdtemp(prefix=f".partial-{target.name}-", dir=target.parent)), target=target)
        except OSError as exc:
            raise _cannot_create(target, exc) from None
        return work._locked_or_removed()

    def set_layout(self, folds: list[str], systems: list[str], protocols: list[str]) -> None:
        """Fix the partition keys of the run (the indices in its scratch files' names), and the
        results format its work folder is written in (a resume by another format is refused)."""
        layout = {"folds": folds, "systems": systems, "protocols": protocols, "format": FORMAT_VERSION}
        known = self.path / "layout.json"
        earlier = json.loads(known.read_text()) if known.is_file() else layout
        if earlier.get("format") != FORMAT_VERSION:
            raise ConfigError(f"{self.path}: the work folder was written in results format {earlier.get('format', 2)}, "
                              f"this version writes format {FORMAT_VERSION}; run again without --resume")
        if earlier != layout:
            raise ConfigError(f"{self.path}: the work folder was written for other folds, systems or protocols")
        self.write_json("layout.json", layout)
        self._layout = layout

    def partition_file(self, fold: str, system: str, protocol: str, part: int = 0) -> Path:
        return self.partition_files().file(fold, system, protocol, part)

    def write_partition(self, per_unit: pl.DataFrame, *, part: int = 0) -> Path:
        """Write the per-unit rows of one (fold, system, protocol), or of its ``part``-th chunk of
        users, as its own file."""
        return self.partition_files().write(per_unit, part=part)

    def partition_files(self) -> PartitionFiles:
        """Where this folder's partitions go (what a Spark task is given to write its own)."""
        return PartitionFiles(self.path, self._layout_keys())

    def fold_done(self, fold: str) -> bool:
        return (self._progress_folder(fold) / _FOLD_DONE).is_file()

    def mark_fold_done(self, fold: str, partitions: list[Path]) -> None:
        """The fold is complete: the note listing its partitions, beside its other notes (the
        per-unit folders hold Parquet files alone)."""
        self.write_json(self._relative(self._progress_folder(fold) / _FOLD_DONE), [self._relative(p) for p in partitions])

    def fold_partitions(self, fold: str) -> list[Path]:
        """The partitions of a fold marked complete, in the order they were written."""
        marker = self._progress_folder(fold) / _FOLD_DONE
        return [self.path / name for name in json.loads(marker.read_text())]

    def record_ranges(self, fold: str, users_per_range: int) -> None:
        """The users per range of users of ``fold``, recorded before its first chunk is noted, so
        that a resume cuts the fold at the same users (:class:`UnfinishedFold`)."""
        self.write_json(self._relative(self._progress_folder(fold) / _RANGES), {"users_per_range": users_per_range})

    def write_partition_scratch(self, fold: str, system: str, protocol: str, chunk: int, kind: str,
                                frame: pl.DataFrame) -> Path:
        """One chunk's scratch table of ``kind`` (one of :data:`SCRATCH`) of a partition, kept until
        the partition's fold is complete."""
        if kind not in SCRATCH:
            raise DataError(f"{kind!r} is not a scratch table of a results folder; expected one of {SCRATCH}")
        # read back whole into the fold's table (write_fold_scratch_of): no statistics to write
        return atomic.write_parquet(frame, self._chunk_note(fold, system, protocol, chunk).with_suffix(f".{kind}.parquet"),
                                    statistics=False)

    def write_chunk_counts(self, fold: str, system: str, protocol: str, chunk: int,
                           counts: dict[str, np.ndarray]) -> Path:
        """A partition's run-level counts up to and with its ``chunk`` (arrays by name, ``.npz``)."""
        buffer = io.BytesIO()
        np.savez(buffer, **counts)
        return atomic.write_bytes(self._chunk_note(fold, system, protocol, chunk).with_suffix(".counts.npz"),
                                  buffer.getvalue())

    def mark_chunk_done(self, fold: str, system: str, protocol: str, chunk: int, done: FinishedChunk) -> None:
        """The ``chunk``-th chunk of users of a partition is complete: its per-unit file, scratch
        tables and counts are written (the chunk's last write; ``--resume`` reuses it). The
        counts of the chunk before are deleted then: a resume reads the last chunk's alone."""
        note = {"per_unit": self._relative(done.per_unit),
                "scratch": {kind: self._relative(p) for kind, p in done.scratch.items()},
                "counts": None if done.counts is None else self._relative(done.counts)}
        self.write_json(self._relative(self._chunk_note(fold, system, protocol, chunk)), note)
        if chunk:
            self._chunk_note(fold, system, protocol, chunk - 1).with_suffix(".counts.npz").unlink(missing_ok=True)

    def mark_partition_done(self, fold: str, system: str, protocol: str, done: FinishedPartition) -> None:
        """The partition is complete: its per-unit files and scratch tables are written (the last
        write of a partition; ``--resume`` reuses it, even in a fold not yet complete)."""
        note = {"per_unit": [self._relative(p) for p in done.per_unit],
                "scratch": {kind: [self._relative(p) for p in paths] for kind, paths in done.scratch.items()}}
        self.write_json(self._relative(self._partition_note(fold, system, protocol)), note)

    def unfinished_fold(self, fold: str, *, reuse: bool = True) -> UnfinishedFold:
        """What an earlier attempt finished of ``fold`` (:class:`UnfinishedFold`), and nothing else
        of the fold's: every other per-unit file, scratch table and note of it (a chunk not marked
        done, the counts of a chunk not last) is deleted, so that a resume redoes exactly the rest.
        Without ``reuse`` (an engine that redoes a fold whole), all of them are deleted."""
        folder, layout = self._progress_folder(fold), self._layout_keys()
        notes: dict[tuple[int, int], dict[int | None, Path]] = {}
        for note in folder.glob("s*-p*.json"):
            if found := _NOTE.match(note.name):
                j, k, chunk = found.groups()
                notes.setdefault((int(j), int(k)), {})[None if chunk is None else int(chunk)] = note
        if not reuse:
            notes.clear()
        out, kept = UnfinishedFold(), set()
        for (j, k), of_pair in sorted(notes.items()):
            key = layout["systems"][j], layout["protocols"][k]
            if None in of_pair:  # the partition is done: its chunks' notes are no longer read
                listed = json.loads(of_pair[None].read_text())
                done = FinishedPartition([self.path / p for p in listed["per_unit"]], {  # (one file: before chunk notes)
                    kind: [self.path / p for p in ([paths] if isinstance(paths, str) else paths)]
                    for kind, paths in listed["scratch"].items()})
                out.partitions[key] = done
                kept.update([of_pair[None], *done.per_unit, *(p for paths in done.scratch.values() for p in paths)])
                continue
            # the chunks done in order from the first (a chunk's files are written in user order)
            prefix = list(itertools.takewhile(of_pair.__contains__, itertools.count()))
            if prefix:
                out.chunks[key] = [self._read_chunk_note(of_pair[c]) for c in prefix]
                kept.update([*(of_pair[c] for c in prefix), out.chunks[key][-1].counts,
                             *(p for chunk in out.chunks[key] for p in (chunk.per_unit, *chunk.scratch.values()))])
        for stale in [*folder.glob("s*-p*.json"), *folder.glob("*.parquet"), *folder.glob("*.npz"),
                      *self._fold_folder(fold).rglob("*.parquet")]:
            if stale not in kept:
                stale.unlink()
        _remove_empty_folders(self._fold_folder(fold))
        ranges = folder / _RANGES
        if ranges.is_file():
            out = dataclasses.replace(out, users_per_range=json.loads(ranges.read_text())["users_per_range"])
        return out

    def _read_chunk_note(self, note: Path) -> FinishedChunk:
        listed = json.loads(note.read_text())
        return FinishedChunk(self.path / listed["per_unit"],
                             {kind: self.path / p for kind, p in listed["scratch"].items()},
                             None if listed["counts"] is None else self.path / listed["counts"])

    def _relative(self, path: Path) -> str:
        return str(path.relative_to(self.path))

    def _progress_folder(self, fold: str) -> Path:
        """Where the notes and scratch tables of a fold in progress go: ``partitions/f<i>``."""
        return self.path / PARTITIONS / f"f{self._layout_keys()['folds'].index(fold)}"

    def _partition_note(self, fold: str, system: str, protocol: str) -> Path:
        _, j, k = self.partition_files().indices(fold, system, protocol)
        return self._progress_folder(fold) / f"s{j}-p{k}.json"

    def _chunk_note(self, fold: str, system: str, protocol: str, chunk: int) -> Path:
        note = self._partition_note(fold, system, protocol)
        return note.with_name(f"{note.stem}-c{chunk:05d}.json")

    def _fold_folder(self, fold: str) -> Path:
        """The folder of a fold's per-unit files: ``per_unit/fold=<fold>``."""
        return self.path / PER_UNIT / label_folder("fold", fold)

    @property
    def layout(self) -> dict[str, list[str]]:
        """The run's folds, systems and protocols, whose indices name the partition files."""
        return self._layout_keys()

    def _layout_keys(self) -> dict[str, list[str]]:
        layout = getattr(self, "_layout", None)
        if layout is None:
            source = self.path / "layout.json"
            layout = json.loads(source.read_text()) if source.is_file() else {
                f"{key}s": getattr(self.manifest, f"{key}s") for key in _KEY_COLUMNS}
            self._layout = layout
        return layout

    def write_scratch(self, kind: str, fold: str, frame: pl.DataFrame | pl.LazyFrame) -> Path:
        """One fold's scratch table of ``kind`` (one of :data:`SCRATCH`), kept until :meth:`finish`;
        a lazy ``frame`` is streamed into it, never held whole."""
        if kind not in SCRATCH:
            raise DataError(f"{kind!r} is not a scratch table of a results folder; expected one of {SCRATCH}")
        target = self.path / kind / f"{fold}.parquet"
        if isinstance(frame, pl.LazyFrame):
            return atomic.sink_parquet(frame, target)
        return atomic.write_parquet(frame, target)

    def spark_splits(self) -> Path:
        """Where a Spark job writes the folds' splits (:data:`SPARK_SPLITS`), or, for a results
        folder at a URI, the driver's copies of what it reads of them; kept until :meth:`finish`."""
        return self.path / SPARK_SPLITS

    def scratch_files(self, kind: str) -> list[Path]:
        """Every fold's scratch table of ``kind``, in name order."""
        return sorted((self.path / kind).glob("*.parquet"))

    def split_folder(self, fold: str) -> Path:
        """Where a fold's split is saved."""
        return self.path / SPLITS / fold

    def negatives_files(self, fold: str, label: str) -> tuple[Path, Path]:
        """Where a fold's negatives of protocol ``label`` are saved: (the table, the NCF file)."""
        stem = self.path / NEGATIVES / fold / label.replace("/", "_")
        return stem.with_name(stem.name + ".parquet"), stem.with_name(stem.name + NCF_NEGATIVES_SUFFIX)

    def finish(self, manifest: Manifest) -> Path:
        """Write the manifest and rename the work folder to its final, timestamped name."""
        for scratch in SCRATCH:
            if (self.path / scratch).exists():
                shutil.rmtree(self.path / scratch)
        self.write_manifest(manifest)
        (self.path / "layout.json").unlink(missing_ok=True)
        if self.target is not None:
            return self._replace_target()
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        for attempt in range(1000):
            final = self.root / (stamp if attempt == 0 else f"{stamp}-{attempt + 1}")
            try:
                os.rename(self.path, final)  # fails if `final` exists and is not empty
            except OSError:
                if final.exists():
                    continue
                raise
            self.path = final
            self.lock.release()  # after the rename, so that no --resume can pick the folder up
            return final
        raise ConfigError(f"could not find a free results folder name under {self.root}")

    def discard(self) -> None:
        """Remove a work folder that will not be finished (a failed ``evaluate``: nothing of it is
        worth resuming) and release it."""
        shutil.rmtree(self.path, ignore_errors=True)
        self.lock.release()

    def _replace_target(self) -> Path:
        """Move the complete work folder to :attr:`target`, the old one (``force``) set aside
        first and removed only once the new one is in place."""
        old = None
        if self.target.exists():
            old = self.target.parent / f".{self.target.name}.old-{os.getpid()}"
            os.replace(self.target, old)
        try:
            os.replace(self.path, self.target)
        except BaseException:
            if old is not None:  # the earlier results stay where they were
                os.replace(old, self.target)
            raise
        self.path = self.target
        self.lock.release()
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.target

    def link_latest(self) -> None:
        """Point ``<root>/latest`` at this finished folder (relative, so the tree can move); a
        ``latest`` that is not a link is left alone."""
        link = self.root / "latest"
        if link.is_symlink() or not link.exists():
            tmp = scratch_path(link)  # a name of its own: runs finishing at once each replace the link whole
            tmp.symlink_to(self.path.name, target_is_directory=True)
            tmp.replace(link)

    # -- a complete folder --------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path) -> ResultsFolder:
        """A complete results folder; a clear error naming what is missing or too old."""
        folder = cls(Path(path))
        if not folder.path.is_dir():
            raise DataError(f"{folder.path}: no such results folder")
        if (folder.path / f"{PER_UNIT}.parquet").exists() and not (folder.path / MANIFEST).is_file():
            raise DataError(
                f"{folder.path}: per_unit.parquet and summary.csv without a manifest, as `recsys-eval "
                "evaluate` of an earlier version wrote them; `report` and `compare` open the results folders "
                "this version writes: evaluate again (per_unit.parquet still reads with pl.scan_parquet)"
            )
        manifest = folder.path / MANIFEST
        kind = json.loads(manifest.read_text()).get("kind", "run") if manifest.is_file() else "run"
        needed = {"run": (MANIFEST, CONFIG, PER_UNIT, f"{SUMMARY}.parquet"),
                  "datasets": (MANIFEST, "values.parquet", "ranks.parquet", "friedman.parquet"),
                  }.get(kind, (MANIFEST, PER_UNIT, f"{SUMMARY}.parquet"))  # an evaluated run file has no config
        missing = [name for name in needed if not (folder.path / name).exists()]
        if missing:
            raise DataError(
                f"{folder.path}: not a complete results folder (missing {', '.join(missing)}); an "
                "interrupted run can be finished with `recsys-eval run CONFIG --resume`"
            )
        raw = json.loads(manifest.read_text())
        if raw.get("format") != FORMAT_VERSION:
            older = isinstance(raw.get("format"), int) and raw["format"] < FORMAT_VERSION
            raise DataError(
                f"{folder.path}: results format {raw.get('format')!r}, this version reads format "
                f"{FORMAT_VERSION}; rerun the experiment with this version"
                + ("; its per-unit files, which hold their labels, still read as one table with "
                   f'pl.scan_parquet("{folder.path}/{PER_UNIT}/**/*.parquet")' if older else "")
            )
        return folder

    @property
    def manifest(self) -> Manifest:
        """The folder's manifest (the defaults of :class:`Manifest` for a folder without one)."""
        if self._manifest is None:
            source = self.path / MANIFEST
            self._manifest = (Manifest.from_json(json.loads(source.read_text()), str(source))
                              if source.is_file() else Manifest())
        return self._manifest

    def partitions(self) -> list[Path]:
        """Every per-unit partition the manifest lists; a missing one is an error naming it."""
        return self.per_unit_files()

    def per_unit_files(self, *, fold: str | None = None, protocol: str | None = None) -> list[Path]:
        """The per-unit partitions, all or one fold's and/or one protocol's, in the manifest's order;
        a missing one is an error naming it."""
        names = self.manifest.partitions
        if fold is not None or protocol is not None:
            names = [name for name in names if _of_part(labels_of(name), fold, protocol)]
        absent = [name for name in names if not (self.path / name).is_file()]
        if absent:
            raise DataError(
                f"{self.path}: per-unit partition {absent[0]} is missing ({len(absent)} of {len(names)} "
                "missing); the folder is incomplete, rerun the experiment"
            )
        return [self.path / name for name in names]

    def scan_per_unit(self, *, fold: str | None = None, protocol: str | None = None) -> pl.LazyFrame:
        """The per-unit table as a lazy scan over its partitions: one fold's with ``fold``, one
        protocol's with ``protocol`` (only that protocol's files are opened)."""
        return read_per_unit(self.per_unit_files(fold=fold, protocol=protocol))

    def table(self, name: str) -> pl.DataFrame | None:
        """A table of the folder by name (``summary``, ``paired_tests``, ...), None if absent."""
        path = self.path / f"{_table_name(name)}.parquet"
        return pl.read_parquet(path) if path.is_file() else None

    def has_table(self, name: str) -> bool:
        return (self.path / f"{_table_name(name)}.parquet").is_file()

    def file(self, name: str) -> Path:
        """The path of one of the folder's files by its name (:data:`CONFIG`, :data:`TUNING`,
        :data:`REPORT_HTML`, ...), whether or not it exists yet."""
        return self.path / name

    def text(self, name: str) -> str:
        """A text file of the folder (the config as run), "" if absent."""
        path = self.path / name
        return path.read_text(encoding="utf-8") if path.is_file() else ""

    # -- writing ------------------------------------------------------------------------------
    def write_manifest(self, manifest: Manifest) -> Path:
        self._manifest = manifest
        return self.write_json(MANIFEST, manifest.to_json())

    def write_table(self, name: str, frame: pl.DataFrame, *, csv: bool = True) -> None:
        """``<name>.parquet`` and, with ``csv``, ``<name>.csv`` (list columns joined by "; ")."""
        atomic.write_parquet(frame, self.path / f"{_table_name(name)}.parquet")
        if csv:
            flat = frame.with_columns(pl.col(pl.List(pl.String)).list.join("; "))
            atomic.write_csv(flat, self.path / f"{name}.csv")

    def write_text(self, name: str, text: str) -> Path:
        return atomic.write_text(self.path / name, text)

    def write_json(self, name: str, data: Any) -> Path:
        return self.write_text(name, json.dumps(data, indent=2, default=str) + "\n")


def _cannot_create(folder: Path, exc: OSError) -> OutputError:
    """The error of a results folder that cannot be made: ``cannot create results folder F: the
    disk is full (ENOSPC)``."""
    return OutputError(f"cannot create results folder {folder}: {atomic.reason(exc.errno) if exc.errno else exc}")


def _of_part(labels: dict[str, str], fold: str | None, protocol: str | None) -> bool:
    """Whether a per-unit file's ``labels`` are of ``fold`` and ``protocol`` (None: any)."""
    return fold in (None, labels["fold"]) and protocol in (None, labels["protocol"])


def _remove_empty_folders(folder: Path) -> None:
    """Remove the empty folders under ``folder`` (and it, if empty): a per-unit folder whose stale
    files a resume deleted is no partition of the run."""
    for path in sorted((p for p in folder.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(path.iterdir()):
            path.rmdir()
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def _table_name(name: str) -> str:
    """``name`` when it is one of the tables a results folder holds (:data:`TABLES`)."""
    if name not in TABLES:
        raise DataError(f"{name!r} is not a table of a results folder; expected one of {', '.join(TABLES)}")
    return name
