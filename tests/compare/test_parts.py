"""The analysis's single read of a run's per-unit files (recsys_eval.compare.parts) against the
slow path it replaces, bit for bit: per_user on each file, f_count_sums on the (fold, protocol)'s
per-unit rows, the sampled ranks joined to their candidate counts, and paired_tests on the per-user
rows of each group of comparable systems (docs/CONVENTIONS.md#averaging)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from recsys_eval.compare import paired_tests
from recsys_eval.compare.paired import partition_tests
from recsys_eval.compare.parts import FULL_CANDIDATES, SAMPLED_RANK, read_parts
from recsys_eval.compare.study import _comparable_groups, _seeded, part_paired_tests
from recsys_eval.core.results import (
    MANIFEST,
    PER_UNIT_SCHEMA,
    Manifest,
    PartitionFiles,
    ResultsFolder,
    read_per_unit,
)
from recsys_eval.measure.aggregate import f_count_sums, per_user
from recsys_eval.measure.metrics import AUXILIARY_METRICS, N_RELEVANT

FOLDS, PROTOCOLS = ["fold1", "fold2"], ["AI+AR+AN", "AI+1R+NN20"]
SYSTEMS = ["popular", "knn", "mf", "bias"]
OPTIONS = {"baseline": "popular", "tests": ["t", "wilcoxon", "sign", "permutation"], "correction": "holm",
           "alpha": 0.05, "n_resamples": 60, "seed": 5}


def _units(rng: np.random.Generator, system: str, protocol: str, fold: str, users: np.ndarray,
           text_users: bool) -> pl.DataFrame:
    """A system's per-unit rows as measure() writes them: blocks of (metric, k), users ascending,
    1 unit per user under AR, 1-4 under 1R (unit numbers running over the fold), NaN values, the
    auxiliary rows, and ``bias`` (a rating predictor) without the ranking metrics' last cutoff."""
    per_user_units = np.ones(len(users), dtype=np.int64) if "AR" in protocol else rng.integers(1, 5, len(users))
    user = np.repeat(users, per_user_units)
    unit = np.arange(len(user)) + (1000 if fold == "fold2" else 0)
    blocks = [(metric, k) for metric in ("precision", "f1", "ndcg") for k in (5, 10)
              if not (system == "bias" and k == 10)] + [("auc", None), (N_RELEVANT, None)]
    if "NN" in protocol:
        blocks += [(SAMPLED_RANK, None), (FULL_CANDIDATES, None)]
    n_relevant = rng.integers(1, 6, len(user)).astype(np.float64)
    rows = []
    for metric, k in blocks:
        value = {N_RELEVANT: n_relevant, SAMPLED_RANK: rng.integers(0, 22, len(user)).astype(np.float64),
                 FULL_CANDIDATES: rng.integers(30, 60, len(user)).astype(np.float64)}.get(metric)
        if value is None:
            value = np.where(rng.random(len(user)) < 0.1, np.nan, rng.random(len(user)).round(2))
        rows.append(pl.DataFrame({"user": [f"u{u:03d}" for u in user] if text_users else user, "unit": unit,
                                  "metric": metric, "k": pl.Series([k] * len(user), dtype=pl.Int32), "value": value}))
    return pl.concat(rows).with_columns(system=pl.lit(system), protocol=pl.lit(protocol), fold=pl.lit(fold))


def _folder(tmp_path, text_users: bool = False, shuffle: bool = False) -> ResultsFolder:
    """A results folder of per-unit files written as a run writes them (chunks of whole users,
    then a file of a whole run's values), in the manifest's order; ``shuffle`` writes one file's
    rows out of order."""
    rng = np.random.default_rng(7)
    layout = {"folds": FOLDS, "systems": SYSTEMS, "protocols": PROTOCOLS}
    files = PartitionFiles(tmp_path, layout)
    written = []
    for fold in FOLDS:
        users = np.sort(rng.choice(200, 60, replace=False))
        for protocol in PROTOCOLS:
            for system in SYSTEMS:
                units = _units(rng, system, protocol, fold, users, text_users)
                chunks = [units.filter(pl.col("user").is_in(list(chunk)))
                          for chunk in np.array_split(units.get_column("user").unique(maintain_order=True).to_numpy(), 3)]
                if shuffle and (fold, protocol, system) == ("fold2", "AI+1R+NN20", "knn"):
                    chunks[1] = chunks[1].sample(fraction=1.0, shuffle=True, seed=3)
                whole_run = pl.DataFrame({"system": system, "protocol": protocol, "fold": fold, "user": [None],
                                          "unit": [None], "metric": "catalog_coverage", "k": [10], "value": [0.5]},
                                         schema=dict(PER_UNIT_SCHEMA, user=units.schema["user"]))
                for part, chunk in enumerate([*chunks, whole_run]):
                    written.append(str(files.write(chunk, part=part).relative_to(tmp_path)))
    manifest = Manifest(folds=FOLDS, systems=SYSTEMS, protocols=PROTOCOLS, partitions=written)
    (tmp_path / MANIFEST).write_text(json.dumps(manifest.to_json()))
    return ResultsFolder(tmp_path)


def _per_unit_files(folder: ResultsFolder, fold: str, protocol: str) -> list[pl.DataFrame]:
    return [read_per_unit([path]).collect() for path in folder.per_unit_files(fold=fold, protocol=protocol)]


def _per_user_by_metric(folder: ResultsFolder, fold: str, protocol: str) -> dict[str, pl.DataFrame]:
    """The slow path: per_user of each file, its rows gathered by metric in file order."""
    by_metric: dict[str, list[pl.DataFrame]] = {}
    for units in _per_unit_files(folder, fold, protocol):
        units = units.filter(pl.col("user").is_not_null() & ~pl.col("metric").is_in(AUXILIARY_METRICS))
        if units.height:
            for (metric,), users in per_user(units).partition_by("metric", as_dict=True, maintain_order=True).items():
                by_metric.setdefault(metric, []).append(users)
    return {metric: pl.concat(frames) for metric, frames in by_metric.items()}


@pytest.mark.parametrize(("text_users", "shuffle"), [(False, False), (True, False), (False, True)])
def test_each_part_holds_what_per_user_gives_each_file(tmp_path, text_users, shuffle):
    folder = _folder(tmp_path, text_users, shuffle)
    parts = list(read_parts(folder, "skip"))
    assert [(p.fold, p.protocol) for p in parts] == [(f, p) for f in FOLDS for p in PROTOCOLS]
    for part in parts:
        expected = _per_user_by_metric(folder, part.fold, part.protocol)
        assert part.metrics == list(expected)
        for metric, users in expected.items():
            assert_frame_equal(part.frame(metric), users, check_exact=True)
        assert_frame_equal(part.frame(), pl.concat(expected.values()), check_exact=True)
        matrix = part.matrix
        assert matrix.users.to_list() == sorted(set(pl.concat(expected.values()).get_column("user")))
        assert matrix.columns.equals(matrix.columns.sort("system", "metric", "k", nulls_last=True))


@pytest.mark.parametrize("shuffle", [False, True])
def test_the_f_counts_and_sampled_ranks_are_those_of_the_per_unit_rows(tmp_path, shuffle):
    folder = _folder(tmp_path, shuffle=shuffle)
    for part in read_parts(folder, "skip"):
        units = pl.concat(_per_unit_files(folder, part.fold, part.protocol))
        f_rows = units.filter(pl.col("metric").is_in(["f1", N_RELEVANT]))
        assert_frame_equal(f_count_sums(part.f_users), f_count_sums(f_rows), check_exact=True)
        if "NN" not in part.protocol:
            assert part.ranks is None
            continue
        ranks = units.filter(pl.col("metric") == SAMPLED_RANK)
        ranks = ranks.join(units.filter(pl.col("metric") == FULL_CANDIDATES).select("system", "unit", n_full="value"),
                           on=["system", "unit"], how="left", maintain_order="left").select(part.ranks.columns)
        if shuffle:  # a file out of order is read in order, as grouping it for the per-user means sorts it
            ranks, got = ranks.sort("system", "user", "unit"), part.ranks.sort("system", "user", "unit")
        else:
            got = part.ranks
        assert_frame_equal(got, ranks, check_exact=True)


def test_a_partition_is_tested_as_paired_tests_tests_each_group_of_its_rows(tmp_path):
    folder = _folder(tmp_path, text_users=True)
    order = ["metric", "k", "test", "system", "baseline"]
    for part in read_parts(folder, "skip"):
        options = _seeded(OPTIONS, {}, part.fold, part.protocol)
        expected = pl.concat([paired_tests(group, **options) for metric in part.metrics
                              for group in _comparable_groups(part.frame(metric), OPTIONS["baseline"])])
        assert set(expected.get_column("metric")) == {"precision", "f1", "ndcg", "auc"}
        # bias lacks every metric's cutoff 10: those are tested without it
        assert "bias" not in expected.filter(pl.col("k") == 10).get_column("system").to_list()
        expected = expected.sort(order, nulls_last=True)
        assert_frame_equal(partition_tests(part.matrix, **options).sort(order, nulls_last=True), expected,
                           check_exact=True)
        assert_frame_equal(pl.concat(part_paired_tests(part.frame(), OPTIONS, {})).sort(order, nulls_last=True),
                           expected, check_exact=True)


@pytest.mark.parametrize("baseline", ["popular", "bias", None])
def test_the_comparable_groups_are_the_columns_of_the_analysis_groups_of_the_frame(tmp_path, baseline):
    """PartValues.comparable_groups gives the matrix columns of each frame _comparable_groups
    splits the part's per-user frame into, in its order (bias lacks the cutoff 10: two groups)."""
    folder = _folder(tmp_path)
    for part in read_parts(folder, "skip"):
        index = {key: i for i, key in enumerate(part.matrix.columns.rows())}
        expected = [np.sort([index[key] for key in group.select("system", "metric", "k").unique().rows()])
                    for group in _comparable_groups(part.frame(), baseline)]
        got = part.comparable_groups(baseline)
        assert len(got) == len(expected) == (1 if baseline == "bias" else 2)
        for cols, want in zip(got, expected, strict=True):
            np.testing.assert_array_equal(cols, want)


def test_a_parts_distributions_are_those_of_its_per_user_frame(tmp_path):
    """The distributions of a part's matrix columns (numpy's sort) are those of its per-user frame
    (one polars sort per group), bit for bit, groups in the same order."""
    from recsys_eval.compare.distributions import SortedValues

    for part in read_parts(_folder(tmp_path), "skip"):
        expected = SortedValues.of(part.frame())
        got = SortedValues.of_columns(part.matrix, part.defined_columns())
        assert_frame_equal(got.summary(), expected.summary(), check_exact=True)
        assert_frame_equal(got.curves(), expected.curves(), check_exact=True)


def test_a_column_whose_first_cells_are_undefined_comes_where_its_first_defined_value_does():
    """The frame's groups of defined values follow the first defined value of each column: B's
    first file holds only undefined values, so A's group comes first, then B's (its second file)."""
    from recsys_eval.compare.distributions import SortedValues
    from recsys_eval.compare.frames import partition_of_cells
    from recsys_eval.compare.parts import PartValues

    columns = pl.DataFrame({"system": ["A", "B"], "metric": ["ndcg", "ndcg"], "k": [5, 5]},
                           schema={"system": pl.String, "metric": pl.String, "k": pl.Int32})
    cols = np.array([1, 1, 1, 0, 0, 0, 1, 1, 1])  # B's first file, A's, B's second
    rows = np.array([0, 1, 2, 0, 1, 2, 3, 4, 5])
    values = np.array([np.nan] * 3 + [0.5, 0.0, 1.0] + [0.2, 0.4, 0.0])
    matrix = partition_of_cells("p", "0", columns, rows, cols, values, pl.Series("user", np.arange(6)))
    part = PartValues("0", "p", matrix, (cols, rows), None, None)
    np.testing.assert_array_equal(part.frame_columns, [1, 0])
    np.testing.assert_array_equal(part.defined_columns(), [0, 1])
    got = SortedValues.of_columns(part.matrix, part.defined_columns()).summary()
    assert_frame_equal(got, SortedValues.of(part.frame()).summary(), check_exact=True)
    assert got.get_column("system").to_list() == ["A", "B"] and got.get_column("n").to_list() == [3, 3]
