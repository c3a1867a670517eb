"""A run's per-unit files read for the end-of-run analysis (:func:`recsys_eval.compare.study.analyse`),
one (fold, protocol) at a time, each file once.

A per-unit file holds one system's units of a chunk of whole users, in blocks of one (metric, k),
users ascending within a block (as :func:`recsys_eval.measure.measure` writes them). From each
file, at once and in numpy (a few polars calls per file, none per metric):

- every user's value of every metric and cutoff: the mean over the user's units,
  :func:`~recsys_eval.measure.aggregate.user_means` over the runs of the user's units in file order,
  which is how :func:`~recsys_eval.measure.aggregate.per_user` averages them
  (docs/CONVENTIONS.md#averaging);
- the F-measure counts of every user (tp, fp and fn summed over the user's units, as
  :func:`~recsys_eval.measure.aggregate.f_user_counts` gives them), for the aggregation audit;
- under 1R+NN, every unit's sampled rank and full candidate count, for the sampled correction.

A (fold, protocol)'s per-user values are held as one users x (system, metric, k) matrix
(:class:`~recsys_eval.compare.frames.Partition`; 6,040 users x 450 columns is 22 MB), never its
per-unit rows; the paired tests take their groups of columns from it, so do the slices
(:func:`~recsys_eval.compare.slices.slice_tables`) and the distributions (numpy's sort of each
column), and the per-user frame of a metric is laid out from it in the order of the files
(:meth:`PartValues.frame`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import polars as pl

from recsys_eval.compare.frames import (
    COLUMN_KEYS,
    PER_USER_COLUMNS,
    Partition,
    partition_of_cells,
)
from recsys_eval.core.results import ResultsFolder, labels_of, read_per_unit
from recsys_eval.errors import DataError
from recsys_eval.measure.aggregate import f_unit_counts, f_user_counts, grouped, user_means
from recsys_eval.measure.metrics import AUXILIARY_METRICS, N_RELEVANT

#: The per-unit metric holding a 1R+NN unit's sampled rank: the relevant item's position among the
#: n + 1 ranked targets (0 when the ranking left it out), an exact integer stored as a float.
SAMPLED_RANK = "sampled_rank"
#: The per-unit metric holding a 1R+NN unit's full candidate count N: its relevant item and every
#: non-relevant candidate a full ranking would rank against it (|C(u)| - |Rel(u)| + 1).
FULL_CANDIDATES = "full_candidates"
#: The columns of :attr:`PartValues.f_users` after system, protocol and fold: what
#: :func:`~recsys_eval.measure.aggregate.f_user_counts` gives.
F_COUNTS = ("k", "user", "tp", "fp", "fn")


@dataclass(frozen=True)
class PartValues:
    """One (fold, protocol) of a run: ``matrix``, the per-user values of every system, metric and
    cutoff (columns sorted by system, metric, k; users ascending); ``cells``, the (column, row) of
    each value in the order the files give them; ``f_users``, the F-measure counts of each user
    (None without ``f1``); ``ranks``, the sampled rank (``value``) and full candidate count
    (``n_full``, null where not recorded) of each unit (None without sampled ranks)."""

    fold: str
    protocol: str
    matrix: Partition
    cells: tuple[np.ndarray, np.ndarray]
    f_users: pl.DataFrame | None
    ranks: pl.DataFrame | None

    @cached_property
    def metrics(self) -> list[str]:
        """The metrics in the order the files first give them."""
        return list(dict.fromkeys(self.matrix.columns.get_column("metric").gather(self._first_cells).to_list()))

    @cached_property
    def _first_cells(self) -> np.ndarray:
        """The columns in the order of their first cell."""
        cols = self.cells[0]
        _, first = np.unique(cols, return_index=True)
        return cols[np.sort(first)]

    @cached_property
    def _metric_of_column(self) -> np.ndarray:
        """Each matrix column's metric as its place in :attr:`metrics`."""
        place = {name: i for i, name in enumerate(self.metrics)}
        return np.array([place[name] for name in self.matrix.columns.get_column("metric").to_list()], dtype=np.int64)

    @cached_property
    def frame_columns(self) -> np.ndarray:
        """The matrix columns in the order :meth:`frame` first gives a value of each: metric by
        metric in the order of :attr:`metrics`, within one metric by their first cell in the files."""
        return self._in_frame_order(self.cells[0])

    def defined_columns(self) -> np.ndarray:
        """The columns with a defined value, in the order :meth:`frame`, its undefined values
        left out, first gives one of each (the groups of such a frame in order of appearance)."""
        cols, rows = self.cells
        return self._in_frame_order(cols[~np.isnan(self.matrix.values[rows, cols])])

    def _in_frame_order(self, cols: np.ndarray) -> np.ndarray:
        """The distinct columns of ``cols`` (cells in file order) by metric, then first cell."""
        _, first = np.unique(cols, return_index=True)
        seen = cols[np.sort(first)]
        return seen[np.argsort(self._metric_of_column[seen], kind="stable")]

    def comparable_groups(self, baseline: str | None) -> list[np.ndarray]:
        """The columns of each group of systems tested together, as the analysis splits
        :meth:`frame` (``recsys_eval.compare.study._comparable_groups``): the (metric, k)s
        that one set of systems has (at least two, the baseline among them), each group's columns
        ascending, the groups in the order the frame first gives a row of each."""
        keys = self.matrix.columns.rows()
        members: dict[tuple, set[str]] = {}
        for system, metric, k in keys:
            members.setdefault((metric, k), set()).add(system)
        groups: dict[tuple[str, ...], list[int]] = {}
        for col in self.frame_columns.tolist():
            systems = tuple(sorted(members[keys[col][1:]]))
            if len(systems) >= 2 and (baseline is None or baseline in systems):
                groups.setdefault(systems, []).append(col)
        return [np.sort(cols) for cols in groups.values()]

    def frame(self, metric: str | None = None) -> pl.DataFrame:
        """The per-user frame (``PER_USER_COLUMNS``) of one metric, its rows in the order of the
        files (what :func:`~recsys_eval.measure.aggregate.per_user` gives each file, concatenated);
        without ``metric``, every metric's one after another in the order of :attr:`metrics`."""
        cols, rows = self.cells
        if metric is not None:
            chosen = np.flatnonzero(self._metric_of_column[cols] == self.metrics.index(metric))
        else:
            chosen = np.argsort(self._metric_of_column[cols], kind="stable")
        cols, rows = cols[chosen], rows[chosen]
        return self.matrix.columns[cols].with_columns(
            pl.lit(self.protocol).alias("protocol"), pl.lit(self.fold).alias("fold"),
            self.matrix.users.gather(rows).alias("user"), pl.Series("value", self.matrix.values[rows, cols]),
        ).select(PER_USER_COLUMNS)


def read_parts(folder: ResultsFolder, undefined: str) -> Iterator[PartValues]:
    """The :class:`PartValues` of every (fold, protocol) of the run that has per-user values, folds
    and protocols in the run's order, each read from its per-unit files once."""
    manifest = folder.manifest
    for fold in manifest.folds:
        for protocol in manifest.protocols:
            reader = _PartReader(fold, protocol, undefined)
            for path in folder.per_unit_files(fold=fold, protocol=protocol):
                reader.add(path)
            part = reader.finish()
            if part is not None:
                yield part


@dataclass
class _Blocks:
    """A per-unit file's rows as arrays: ``keys`` (metric, k) of each block of rows, where each
    block and each run of one user's units starts, and the rows' user, unit and value."""

    keys: list[tuple[str, int | None]]
    starts: np.ndarray
    runs: np.ndarray
    user: np.ndarray
    unit: np.ndarray
    value: np.ndarray

    @classmethod
    def of(cls, frame: pl.DataFrame) -> _Blocks:
        """The blocks of ``frame`` (rows with a user), in its order when each (metric, k) is one
        block with users ascending (as measure() writes them), else stably sorted by metric, k,
        user and unit (as :func:`~recsys_eval.measure.aggregate.grouped` groups them)."""
        arrays = frame.select(pl.struct("metric", "k").rle_id().alias("block"), "user", "unit",
                              pl.col("value").cast(pl.Float64))
        block = arrays.get_column("block").to_numpy()
        user = arrays.get_column("user").to_numpy()
        new_block = np.ones(len(block), dtype=bool)
        new_block[1:] = block[1:] != block[:-1]
        starts = np.flatnonzero(new_block)
        keys = frame[starts].select("metric", "k").rows()
        same = ~new_block[1:]
        if len(set(keys)) < len(keys) or not np.all(user[1:][same] >= user[:-1][same]):
            return cls.of(grouped(frame, ["metric", "k", "user"], then="unit")[0])
        new_user = new_block.copy()
        new_user[1:] |= user[1:] != user[:-1]
        return cls(keys, starts, np.flatnonzero(new_user), user, arrays.get_column("unit").to_numpy(),
                   arrays.get_column("value").to_numpy())

    def rows(self, block: int) -> slice:
        return slice(self.starts[block], self.starts[block + 1] if block + 1 < len(self.starts) else len(self.value))

    def block(self, metric: str) -> int | None:
        """The block of a metric without cutoff, None if the file has none."""
        return next((i for i, (name, _) in enumerate(self.keys) if name == metric), None)


@dataclass
class _PartReader:
    """The files of one (fold, protocol) read one after another into a :class:`PartValues`."""

    fold: str
    protocol: str
    undefined: str
    columns: dict[tuple, int] = field(default_factory=dict)  # (system, metric, k) -> order of appearance
    cells: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)  # column, user, value
    f_users: list[tuple[str, dict[str, np.ndarray]]] = field(default_factory=list)  # system, its users' counts
    ranks: list[pl.DataFrame] = field(default_factory=list)
    user_type: pl.DataType = pl.Int64

    def add(self, path: Path) -> None:
        labels = labels_of(path)
        if (labels["fold"], labels["protocol"]) != (self.fold, self.protocol):
            raise DataError(f"{path}: expected the per-unit values of one system under protocol {self.protocol!r} "
                            f"in fold {self.fold!r}; the file holds {labels}")
        frame = read_per_unit([path]).collect()
        if frame.get_column("user").null_count():
            frame = frame.filter(pl.col("user").is_not_null())  # a whole run's values (catalog coverage)
        if not frame.height:
            return
        system, self.user_type = labels["system"], frame.schema["user"]
        blocks = _Blocks.of(frame)
        mean, _, _ = user_means(blocks.value, blocks.runs, self.undefined)
        ids = np.array([-1 if metric in AUXILIARY_METRICS else self.columns.setdefault((system, metric, k), len(self.columns))
                        for metric, k in blocks.keys], dtype=np.int64)
        run_ids = ids[np.searchsorted(blocks.starts, blocks.runs, side="right") - 1]
        kept = run_ids >= 0
        self.cells.append((run_ids[kept], blocks.user[blocks.runs[kept]], mean[kept]))
        if any(metric == "f1" for metric, _ in blocks.keys):
            self.f_users.append((system, _f_users(frame, blocks)))
        if blocks.block(SAMPLED_RANK) is not None:
            self.ranks.append(_unit_ranks(blocks, labels))

    def finish(self) -> PartValues | None:
        if not self.cells:
            return None
        keys = list(self.columns)
        order = sorted(range(len(keys)), key=lambda i: (keys[i][0], keys[i][1], keys[i][2] is None, keys[i][2] or 0))
        position = np.empty(len(keys), dtype=np.int64)
        position[order] = np.arange(len(keys))
        ids, users, values = (np.concatenate(parts) for parts in zip(*self.cells, strict=True))
        distinct = np.unique(np.concatenate([np.unique(user) for _, user, _ in self.cells]))
        rows = np.searchsorted(distinct, users)
        cols = position[ids]
        columns = pl.DataFrame([keys[i] for i in order], schema={"system": pl.String, "metric": pl.String, "k": pl.Int32},
                               orient="row").select(COLUMN_KEYS)
        matrix = partition_of_cells(self.protocol, self.fold, columns, rows, cols, values,
                                    pl.Series("user", distinct, dtype=self.user_type), f"per-unit values of {self.fold}")
        return PartValues(self.fold, self.protocol, matrix, (cols, rows), self._f_frame(),
                          pl.concat(self.ranks) if self.ranks else None)

    def _f_frame(self) -> pl.DataFrame | None:
        """The F-measure counts of every file's users, in file order, as one frame."""
        if not self.f_users:
            return None
        systems = pl.Series("system", [system for system, _ in self.f_users])
        sizes = [len(counts["user"]) for _, counts in self.f_users]
        return pl.DataFrame({
            "system": systems.gather(np.repeat(np.arange(len(sizes)), sizes)),
            **{name: pl.Series(np.concatenate([counts[name] for _, counts in self.f_users]),
                               dtype=pl.Int32 if name == "k" else self.user_type if name == "user" else pl.Float64)
               for name in F_COUNTS},
        }).select("system", pl.lit(self.protocol).alias("protocol"), pl.lit(self.fold).alias("fold"), *F_COUNTS)


def _f_users(frame: pl.DataFrame, blocks: _Blocks) -> dict[str, np.ndarray]:
    """The F-measure counts of each user of a file by column (k, user, tp, fp, fn), as
    :func:`~recsys_eval.measure.aggregate.f_user_counts` gives them: each unit's
    :func:`~recsys_eval.measure.aggregate.f_unit_counts` (f 0 where undefined), summed over the
    user's units in file order. Each ``f1`` block is matched to the ``n_relevant`` block unit by unit; a file whose
    blocks list different units goes through :func:`~recsys_eval.measure.aggregate.f_user_counts` itself."""
    relevant = blocks.block(N_RELEVANT)
    f1 = [i for i, (metric, _) in enumerate(blocks.keys) if metric == "f1"]
    if relevant is None or any(not np.array_equal(blocks.unit[blocks.rows(i)], blocks.unit[blocks.rows(relevant)])
                               for i in f1):
        counts = f_user_counts(frame.filter(pl.col("metric").is_in(["f1", N_RELEVANT])))
        return {name: counts.get_column(name).to_numpy() for name in F_COUNTS}
    n_rel = blocks.value[blocks.rows(relevant)]
    parts: dict[str, list[np.ndarray]] = {name: [] for name in F_COUNTS}
    for i in f1:
        rows = blocks.rows(i)
        k = float(blocks.keys[i][1])
        value = blocks.value[rows]
        runs = blocks.runs[(blocks.runs >= rows.start) & (blocks.runs < rows.stop)] - rows.start
        parts["k"].append(np.full(len(runs), blocks.keys[i][1], dtype=np.int32))
        parts["user"].append(blocks.user[rows][runs])
        unit_counts = f_unit_counts(np.where(np.isnan(value), 0.0, value), k, n_rel)
        for name, counts in zip(("tp", "fp", "fn"), unit_counts, strict=True):
            parts[name].append(np.add.reduceat(counts, runs))
    return {name: np.concatenate(arrays) for name, arrays in parts.items()}


def _unit_ranks(blocks: _Blocks, labels: dict[str, str]) -> pl.DataFrame:
    """Each unit's sampled rank (``value``) and full candidate count (``n_full``: null where the
    file has none for the unit), with its system, fold and user. (Copies: a frame of views would
    keep the whole file's columns.)"""
    ranked = blocks.rows(blocks.block(SAMPLED_RANK))
    unit = blocks.unit[ranked].copy()
    full = blocks.block(FULL_CANDIDATES)
    n_full = pl.Series("n_full", np.full(len(unit), np.nan)).fill_nan(None)
    if full is not None:
        counted = blocks.rows(full)
        if np.array_equal(blocks.unit[counted], unit):
            n_full = pl.Series("n_full", blocks.value[counted].copy())
        else:
            n_full = pl.DataFrame({"unit": unit}).join(
                pl.DataFrame({"unit": blocks.unit[counted], "n_full": blocks.value[counted]}),
                on="unit", how="left", maintain_order="left").get_column("n_full")
    return pl.DataFrame({"system": labels["system"], "fold": labels["fold"], "user": blocks.user[ranked].copy(),
                         "unit": unit, "value": blocks.value[ranked].copy()}).with_columns(n_full)
