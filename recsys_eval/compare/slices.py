"""Metrics per slice of users: who the winner wins for (docs/CONVENTIONS.md#slices).

The slices (``activity:4``, ``cold:5``, ``time:3``) are each fold's test users in groups, made from
the split alone (:mod:`recsys_eval.split.slices`). Per slice group: every metric's mean over the
group's users with a defined value and its t-interval, and the paired tests of every system against
the baseline on the group's users, p-values corrected within each group.

``popularity:S`` slices the units of the 1R protocols, one relevant test item each, by that item's
training popularity: ``head`` the ceil(S |C|) most popular items of the catalogue C (the popular
head of the beyond-accuracy metrics, :meth:`ItemPopularity.head`), ``tail`` the items outside the
ceil((1 - S) |C|) most popular (the least popular, and items no train user has), ``mid`` the rest.
A user's value in a group is the mean over their units in it, and the group's mean is over the
users with a unit there, as the summary averages units (docs/CONVENTIONS.md#averaging). A user's
units are numbered in the order of their relevant items' indices (the targets' order), which is
how a unit finds its item here. AR protocols rank all of a user's relevant items in one list, so
a unit has no one item: their per-item view is the ``percentiles`` design, which evaluates each
popularity bin's items as a target set of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from recsys_eval.compare.distributions import with_fold_means
from recsys_eval.compare.frames import Partition, partitions
from recsys_eval.compare.intervals import with_t_bounds
from recsys_eval.core import Split
from recsys_eval.core.results import UNIT_SLICES, ResultsFolder
from recsys_eval.measure.aggregate import per_user, run_stats
from recsys_eval.measure.metrics import AUXILIARY_METRICS
from recsys_eval.split.slices import UNIT_KINDS, SliceSpec, parse_slice, raw_users

SLICE_KEYS = ["slice", "group", "order"]
_KEYS = ["system", "protocol", "fold", "metric", "k"]
_MEANS_SCHEMA = {**dict.fromkeys(_KEYS, pl.String), "k": pl.Int32, **dict.fromkeys(SLICE_KEYS, pl.String),
                 "order": pl.Int32, **dict.fromkeys(("mean", "lower", "upper"), pl.Float64),
                 "n": pl.Int64, "n_undefined": pl.Int64}


@dataclass(frozen=True)
class SlicedPartitions:
    """A per-user frame laid out once as users x columns matrices, one per (protocol, fold)
    (:func:`~recsys_eval.compare.frames.partitions`), with the matrix rows of every slice group's
    users: what the slice means and the slice tests of its parts are computed from, with no join
    of the slice labels to every per-user row."""

    parts: list[Partition]
    members: list[dict[tuple, np.ndarray]]  # per part: (slice, group, order) -> the rows of its users
    groups: list[tuple]  # every (slice, group, order): slices as first listed, groups in order

    @classmethod
    def of(cls, per_user_frame: pl.DataFrame, slices: pl.DataFrame) -> SlicedPartitions:
        """The layout of ``per_user_frame`` with the groups of the slices table ``slices``."""
        return cls.of_partitions(partitions(per_user_frame), slices)

    @classmethod
    def of_partitions(cls, parts: list[Partition], slices: pl.DataFrame) -> SlicedPartitions:
        """The same of partitions already laid out (e.g. the analysis's matrix of a fold and protocol)."""
        keys = slices.select(SLICE_KEYS).unique(maintain_order=True).rows()
        first = {name: i for i, name in reversed(list(enumerate(k[0] for k in keys)))}
        return cls(parts, [_members(part, slices) for part in parts], sorted(keys, key=lambda k: (first[k[0]], k[2])))

    def means(self, level: float = 0.95) -> pl.DataFrame:
        """:func:`slice_means` of these parts."""
        tables = [table for part, members in zip(self.parts, self.members, strict=True)
                  for table in _partition_means(part, members, level)]
        if not tables:
            return pl.DataFrame(schema=_MEANS_SCHEMA)
        return pl.concat(tables).sort([*_KEYS, *SLICE_KEYS], nulls_last=True, maintain_order=True).select(*_MEANS_SCHEMA)

    def tests(self, cols: np.ndarray | None = None, **options) -> pl.DataFrame:
        """:func:`slice_tests` of these parts, or of their matrix columns at ``cols`` (ascending;
        one part only) alone."""
        from recsys_eval.compare.paired import TEST_SCHEMA, correct, test_columns

        options = dict(options)
        correction, alpha = options.pop("correction", "holm"), options.pop("alpha", 0.05)
        columns: dict[str, list] = {name: [] for name in [*TEST_SCHEMA, "_at", *SLICE_KEYS]}
        for at, ((name, group, order), parts) in enumerate(self._group_partitions(cols).items()):
            if max(len(part.users) for part in parts) < 2 and len({u for part in parts for u in part.users}) < 2:
                continue  # (a group's users differ between folds: the set is taken only when each has one)
            rows = test_columns(parts, correction=correction, **options)
            for column, values in rows.items():
                columns[column] += values
            for column, value in zip(("_at", *SLICE_KEYS), (at, name, group, order), strict=True):
                columns[column] += [value] * len(rows["test"])
        if not columns["test"]:
            return pl.DataFrame()
        frame = pl.DataFrame(columns, schema={**TEST_SCHEMA, "_at": pl.Int64, "slice": pl.String, "group": pl.String,
                                              "order": pl.Int32})
        return correct(frame, correction, alpha, labels=("_at", *SLICE_KEYS)).drop("_at")

    def _group_partitions(self, cols: np.ndarray | None) -> dict[tuple, list[Partition]]:
        """Per slice group (slice, group, order; slices as first listed, groups in order), the
        sub-partition of its users (and of the columns ``cols``) in every part that has some."""
        groups: dict[tuple, list[Partition]] = {key: [] for key in self.groups}
        for part, members in zip(self.parts, self.members, strict=True):
            shown = part if cols is None else Partition(part.protocol, part.fold, part.columns[cols],
                                                        part.values[:, cols], part.present[:, cols], part.users)
            for key, rows in members.items():
                mask = np.zeros(len(part.users), dtype=bool)
                mask[rows] = True
                groups[key].append(shown.subset(mask))
        return {key: [p for p in found if len(p.users)] for key, found in groups.items()
                if any(len(p.users) for p in found)}


def slice_means(per_user_frame: pl.DataFrame, slices: pl.DataFrame, *, level: float = 0.95) -> pl.DataFrame:
    """Per (system, protocol, fold, metric, k, slice, group): mean, lower, upper (t-interval at
    ``level``), n (users with a defined value) and n_undefined (users with a row but no defined
    value), rows sorted by those keys.

    Each (protocol, fold) is laid out once as a matrix (:class:`SlicedPartitions`); a group's rows
    of it, transposed, lay each column's values of the group's users end to end, and every column
    of every group is summed exactly in one pass, as the summary sums
    (:func:`~recsys_eval.measure.aggregate.run_stats`): the means equal those of the group's rows
    filtered by hand, bit for bit."""
    return SlicedPartitions.of(per_user_frame, slices).means(level)


def slice_tests(per_user_frame: pl.DataFrame, slices: pl.DataFrame, **options) -> pl.DataFrame:
    """:func:`recsys_eval.compare.paired_tests` (with ``options``) on the users of each slice group,
    with its slice, group and order; a group with fewer than two users is left out.

    The rows equal ``paired_tests`` of the group's rows filtered by hand (the same seed, so the
    same draws), but the per-user frame is laid out as matrices once and each group tests the
    rows of its users (:meth:`~recsys_eval.compare.frames.Partition.subset`), instead of joining
    and laying out every group's rows again."""
    return SlicedPartitions.of(per_user_frame, slices).tests(**options)


def slice_tables(part: Partition, metrics: list[str], slices: pl.DataFrame, comparable: list[np.ndarray],
                 **options) -> tuple[pl.DataFrame, list[pl.DataFrame]]:
    """From a (fold, protocol)'s matrix as the analysis reads it (every metric; ``metrics`` in the
    order its per-user frame first gives them), with no other layout of its users: its
    :func:`slice_means`, metric by metric (the rows of a call per metric, end to end), and
    :func:`slice_tests` (with ``options``) of each group of columns of ``comparable`` (systems
    tested together, as the frame's rows of those columns alone would be)."""
    laid_out = SlicedPartitions.of_partitions([part], slices)
    means = laid_out.means().sort(pl.col("metric").replace_strict(metrics, range(len(metrics))), maintain_order=True)
    return means, [laid_out.tests(cols, **options) for cols in comparable]


def slice_fold_means(means: pl.DataFrame) -> pl.DataFrame:
    """With several folds, rows of fold ``all``: the mean of the fold means, users summed, no
    interval (the folds' groups hold different users)."""
    return with_fold_means(means, [*_KEYS, *SLICE_KEYS], summed=("n", "n_undefined"), blank=("lower", "upper"))


def slice_test_options(options: dict) -> dict:
    """The paired-test options of the slice groups, from the run's (``tests`` among them): one
    test, Wilcoxon's signed-rank when the run has it (no resampling; exact for a small group without
    ties), else the run's first, and the relative difference without its bootstrap interval.

    A study has many groups of few users, and the report shows one test per group: every test and
    a 1,000-resample interval per group cost as much as the whole run's tests again."""
    tests = [options["tests"]] if isinstance(options["tests"], str) else list(options["tests"])
    return {**options, "tests": ["wilcoxon" if "wilcoxon" in tests else tests[0]], "relative_resamples": 0}


def _partition_means(part: Partition, members: dict[tuple, np.ndarray], level: float) -> list[pl.DataFrame]:
    """The slice means of one partition: a row per slice group and column its users have a row
    of. Each group's rows of the matrix, transposed, lay its users' values of each column end to
    end; the groups' blocks end to end are summed in one pass."""
    if not members:
        return []
    width = part.columns.height
    values = np.concatenate([part.values[rows].T.ravel() for rows in members.values()])
    sizes = np.repeat([len(rows) for rows in members.values()], width)
    stats = with_t_bounds(pl.DataFrame(run_stats(values, np.cumsum(sizes) - sizes)), level)
    present = np.concatenate([part.present[rows].sum(axis=0) for rows in members.values()])
    labels = pl.DataFrame(list(members), schema={"slice": pl.String, "group": pl.String, "order": pl.Int32}, orient="row")
    table = pl.concat([pl.concat([part.columns] * len(members)), labels.select(pl.all().repeat_by(width).explode()),
                       stats], how="horizontal")
    return [table.with_columns(protocol=pl.lit(part.protocol), fold=pl.lit(part.fold),
                               n_undefined=pl.Series(present, dtype=pl.Int64) - pl.col("n")).filter(pl.Series(present > 0))]


def _members(part: Partition, slices: pl.DataFrame) -> dict[tuple, np.ndarray]:
    """Per slice group (slice, group, order) with users in ``part``: the matrix rows of its users."""
    members = (pl.DataFrame({"user": part.users}).with_row_index("row")
               .join(slices.filter(pl.col("fold") == part.fold).select("user", *SLICE_KEYS), on="user",
                     maintain_order="left").group_by(SLICE_KEYS, maintain_order=True).agg("row"))
    return {(name, group, order): np.asarray(rows, dtype=np.int64) for name, group, order, rows in members.iter_rows()}


def unit_slices(splits: list[Split], specs: list[str], threshold: float | None) -> pl.DataFrame:
    """For the ``popularity:S`` slices of ``specs``: every relevant test interaction (rating at
    least ``threshold``) of every fold, one row per (fold, user, position, slice) with its group
    and order; ``position`` is the item's place among the user's relevant items in index order,
    the order of the user's units under a 1R protocol (module docstring)."""
    parsed = [spec for spec in map(parse_slice, specs) if spec.kind in UNIT_KINDS]
    frames = [_popularity_groups(split, spec, threshold) for split in splits for spec in parsed]
    return pl.concat(frames) if frames else pl.DataFrame()


def _popularity_groups(split: Split, spec: SliceSpec, threshold: float | None) -> pl.DataFrame:
    from recsys_eval.measure.popularity import item_popularity
    from recsys_eval.targets.relevance import qrels

    judged = qrels(split, threshold)
    relevant = judged.gain > 0
    users = np.repeat(np.arange(judged.n_users), judged.counts())[relevant]
    items = judged.items[relevant]
    popularity = item_popularity(split.train, split.n_items)
    order = np.where(popularity.head(spec.share)[items], 0, np.where(popularity.head(1 - spec.share)[items], 1, 2))
    share = f"{spec.share:.0%}"
    labels = np.array([f"head (top {share})", "mid", f"tail (bottom {share})"], dtype=object)
    return pl.DataFrame({
        "fold": split.name, "user": raw_users(split, users),
        "position": np.arange(len(users)) - np.searchsorted(users, users),
        "slice": spec.label, "group": pl.Series(labels[order], dtype=pl.String),
        "order": pl.Series(order, dtype=pl.Int32)}).sort("order", "user", "position")


def popularity_parts(folder: ResultsFolder, units: pl.DataFrame, undefined: str):
    """Per (fold, 1R protocol of the standard design, popularity group): the per-user values of
    every metric over each user's units in the group, and the group's slices table (its users), as
    :func:`slice_means` and :func:`slice_tests` take them. A unit is its user's n-th, n its
    position (unit numbers run over a user's units in their items' order)."""
    from recsys_eval.errors import DataError

    manifest = folder.manifest
    n_slices = units.get_column("slice").n_unique()
    protocols = [p for p, info in manifest.protocol_definitions.items()
                 if info.get("relevant") == "1R" and info.get("design") == "standard"]
    for fold in manifest.folds:
        fold_units = units.filter(pl.col("fold") == fold).drop("fold")
        for protocol in protocols:
            scan = folder.scan_per_unit(fold=fold, protocol=protocol).filter(
                pl.col("user").is_not_null() & ~pl.col("metric").is_in(AUXILIARY_METRICS))
            groups: dict[tuple, list[pl.DataFrame]] = {}
            for metric in scan.select(pl.col("metric").unique(maintain_order=True)).collect().get_column("metric"):
                part = scan.filter(pl.col("metric") == metric).with_columns(
                    position=pl.col("unit") - pl.col("unit").min().over("system", "k", "user")).collect()
                placed = part.join(fold_units, on=["user", "position"], how="inner")
                if placed.height != part.height * n_slices:
                    raise DataError(f"{folder.path}: the units of {protocol} (fold {fold}) are not the relevant "
                                    "test items the popularity slices were made of: the per-unit files and "
                                    f"the {UNIT_SLICES} table come from different runs")
                for keys, rows in placed.partition_by(SLICE_KEYS, as_dict=True, maintain_order=True).items():
                    groups.setdefault(keys, []).append(per_user(rows.drop("position", *SLICE_KEYS), undefined=undefined))
            for (name, group, order), frames in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2])):
                users = pl.concat(frames)
                yield users, users.select("fold", "user").unique(maintain_order=True).with_columns(
                    slice=pl.lit(name), group=pl.lit(group), order=pl.lit(order, pl.Int32))
