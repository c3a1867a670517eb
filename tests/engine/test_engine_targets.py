"""Target sets built per user partition (recsys_eval.engine.targets) are the whole fold's, for the
protocols whose targets read other users' data: TI candidates, popularity sampling, the uniform-test
and percentile designs, and negatives read from a file (an NCF file: its held-out pairs are checked
against the whole fold).

Without Spark: the fold's rows are cut into random groups of users (rows shuffled within each
user), each group's target sets are built as a Spark task builds them, and every unit, with the
number the driver gives it, must be the unit of the same number in the local engine's target sets
of the whole fold (its user, listed items and gains, candidate count, shared negatives). With
Spark: a run gives the local engine's per-unit values and summary.csv byte for byte, on 1, 3 and 7
partitions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from config_text import HOLDOUT, config_text, ratings_file
from recsys_eval.core.results import ResultsFolder
from recsys_eval.engine import targets as targets_module
from recsys_eval.engine.targets import (
    FIRST_UNIT,
    UNIT_LABEL,
    FoldTargets,
    UnitCounts,
    chunk_template,
    first_units,
    partition_target_sets,
    shipped_template,
    take_unit_numbers,
    unit_number_rows,
    with_raw_users,
)
from recsys_eval.errors import ConfigError
from recsys_eval.experiment.checks import check_names
from recsys_eval.experiment.runner import config_splits, run_experiment
from recsys_eval.pipeline.config import load_config
from recsys_eval.pipeline.plan import RunOptions

PROTOCOLS = [
    "TI+AR+AN",
    "TI+1R+NN20",
    {"name": "AI+AR+NN30", "sampling": "popularity"},
    {"name": "AI+1R+NN15", "sampling": "popularity", "fresh_negatives": True},
    {"name": "UT+AR+NN3", "sampling": "popularity"},
    {"name": "AI+AR+AN", "design": "uniform_test", "per_item": 2},
    {"name": "TI+1R+NN10", "design": "uniform_test", "per_item": 3},
    {"name": "AI+AR+AN", "design": "percentiles", "bins": 3},
    {"name": "TI+1R+NN20", "design": "percentiles", "bins": 4, "sampling": "popularity"},
    {"name": "AI+1R+NN10", "negatives": "negatives.ncf"},
]
DRAWN = {"name": "AI+1R+NN10"}  # whose samples the negatives file holds
RECS = ["popular", {"name": "item_knn", "params": {"k": 20}}]
KEYS = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
ROOT = Path(__file__).resolve().parents[2]


def _config_path(directory: Path, data: Path, engine: str, partitions: int = 3, protocols=PROTOCOLS,
                 recommenders=RECS) -> Path:
    """The config of a run of ``protocols`` and ``recommenders``, with the negatives file they may
    read beside it."""
    path = directory / f"{engine}-{partitions}.toml"
    if protocols is PROTOCOLS and not (directory / "negatives.ncf").exists():
        _write_negatives(directory, data)
    path.write_text(config_text(
        "targets", seed=11, dataset=ratings_file(data), split=HOLDOUT, protocols=protocols, recommenders=recommenders,
        metrics={"names": ["precision", "recall", "ndcg", "ap", "rr", "auc"], "k": [1, 5, 10],
                 "relevance_threshold": 4},
        output={"report": False, "save_splits": False}, engine={"name": engine, "partitions": partitions}))
    return path


def _fold(directory: Path, data: Path, protocols, recommenders=RECS):
    from recsys_eval.data import load_file

    config = load_config(_config_path(directory, data, "spark", protocols=protocols, recommenders=recommenders))
    dataset = load_file(data, {"user": "userId", "item": "movieId", "rating": "rating"})
    return config, dataset, config_splits(config, dataset)[0]


def _write_negatives(directory: Path, data: Path) -> None:
    """The fold's samples of :data:`DRAWN` as an NCF negatives file, one line per relevant test pair."""
    from recsys_eval.targets import negatives_of, write_negatives
    from recsys_eval.targets.relevance import qrels

    config, dataset, split = _fold(directory, data, [DRAWN])
    options = RunOptions.from_config(config)
    users, items = negatives_of(options.target_sets(config.protocols[0], split)[0].whole().targets)
    judged = qrels(split, options.measure.relevance_threshold)
    relevant = judged.gain > 0
    held_out = (np.repeat(np.arange(judged.n_users), np.diff(judged.indptr))[relevant], judged.items[relevant])
    write_negatives(users, items, held_out, split.train, directory / "negatives.parquet", directory / "negatives.ncf")


def _units(targets) -> list[tuple]:
    """Every unit of ``targets`` as plain values: user, listed items and gains, candidate count,
    and (compact 1R) its non-relevant items."""
    out = []
    for i in range(targets.n_units):
        lo, hi = targets.offsets[i], targets.offsets[i + 1]
        unit = [int(targets.unit_user[i]), targets.items[lo:hi].tolist(), targets.gain[lo:hi].tolist()]
        if targets.n_candidates is not None:
            unit.append(int(targets.n_candidates[i]))
        if targets.negatives is not None:
            group = targets.unit_group[i]
            unit.append(targets.negatives[targets.negative_offsets[group]:targets.negative_offsets[group + 1]].tolist())
        out.append(tuple(unit))
    return out


def test_partition_target_sets_are_the_whole_folds(tmp_path, synthetic_ratings):
    config, data, split = _fold(tmp_path, synthetic_ratings, PROTOCOLS)
    options = RunOptions.from_config(config)
    whole = {ts.label: ts for p in options.protocols for ts in options.target_sets(p, split)}
    assert len(whole) == 5 + 2 + 3 + 4 + 1 and all(ts.users for ts in whole.values())

    fold = FoldTargets.of(options, split)
    shipped = fold.shipped
    # rows of a user in any order, with its raw id: the tasks' dataset has no user id (an array over users)
    rows = with_raw_users(fold.rows(split), data.user_ids).sample(fraction=1.0, shuffle=True, seed=3)
    group = np.random.default_rng(4).integers(0, 3, split.n_users)
    template = shipped_template(data)
    chunks = [rows.filter(pl.Series(group[rows.get_column("user").to_numpy()] == g)).sort("user", maintain_order=True)
              for g in range(3)]
    # each user's units counted in its own group; numbered by a running sum over every user
    counted = pl.concat([UnitCounts(options, shipped, template, split.name)(chunk) for chunk in chunks])
    first_unit = _numbered(counted, split.n_users)
    numbered: dict[str, dict[int, tuple]] = {label: {} for label in whole}
    for g, chunk in enumerate(chunks):
        chunk, chunk_data, fold_users = chunk_template(template, chunk)  # the group's users numbered from 0
        assert np.array_equal(fold_users, np.flatnonzero(group == g)) and chunk_data.n_users == len(fold_users)
        for p, part_split, target_set in partition_target_sets(options, shipped, chunk, chunk_data, split.name,
                                                               fold_users):
            targets = target_set.whole().targets
            users = fold_users[targets.unit_user]  # the fold's index of each unit's user
            local = whole[target_set.label]
            if targets.all_candidates and local.plan.candidates is not None:  # TI: the fold's test items
                assert np.array_equal(targets.candidates, local.plan.candidates)
            # the exposure's popularity bins and the item kNN rows: the fold's train side of this entry
            assert np.array_equal(shipped.totals[p].train_counts, local.train.item_counts())
            assert fold.trains[shipped.trains[p]].frame.sort("user", "item").equals(local.train.frame.sort("user", "item"))
            assert np.array_equal(target_set.candidates[targets.unit_user], local.candidates[users])
            first = first_unit[target_set.label]
            seen: dict[int, int] = {}
            for unit in _units(targets):
                user = int(fold_users[unit[0]])
                unit = (user, *unit[1:])
                numbered[target_set.label][int(first[user]) + seen.get(user, 0)] = unit
                seen[user] = seen.get(user, 0) + 1
    for label, target_set in whole.items():
        units = _units(target_set.whole().targets)
        assert sorted(numbered[label]) == list(range(len(units))), label
        assert [numbered[label][i] for i in range(len(units))] == units, label


def _numbered(counted: pl.DataFrame, n_users: int) -> dict[str, np.ndarray]:
    """Per label, each user index's first unit: the running sum of ``counted``'s units before it."""
    out = {}
    for (label,), part in counted.partition_by(UNIT_LABEL, as_dict=True).items():
        units = np.zeros(n_users, np.int64)
        np.add.at(units, part.get_column("user").to_numpy(), part.get_column("units").to_numpy())
        out[label] = np.cumsum(units) - units
    return out


def test_a_chunk_numbers_its_users_from_0_and_keys_them_on_the_fold(tmp_path, synthetic_ratings):
    """A task's chunk of two users far apart in the fold: its per-unit rows are the local engine's
    (samples and random scores keyed on the fold's index, units numbered by the fold), and moved to
    the fold indices 0 and 10**7, no array over 10**7 users is made (numpy's allocations, traced)."""
    import tracemalloc

    from recsys_eval.engine.fold import PER_UNIT, FoldTask, broadcastable, fold_chunk_tables
    from recsys_eval.pipeline.plan import FoldPlan

    recommenders = [*RECS, "random"]
    path = _config_path(tmp_path, synthetic_ratings, "local", recommenders=recommenders)
    folder = run_experiment(load_config(path), path.read_text(), out_root=tmp_path / "out", quiet=True).folder
    expected = ResultsFolder.open(folder).scan_per_unit().collect()
    config, data, split = _fold(tmp_path, synthetic_ratings, PROTOCOLS, recommenders)
    options = RunOptions.from_config(config)
    fold = FoldTargets.of(options, split)
    rows = with_raw_users(fold.rows(split), data.user_ids)
    template = shipped_template(data)
    first = _numbered(UnitCounts(options, fold.shipped, template, split.name)(rows), split.n_users)
    plan = FoldPlan.build(options, data, split, n_folds=1, targets=False)
    models = {(job.system, side): broadcastable(job.make(data, threads=1).fit(fold.trains[side]))
              for job in plan.models for side in set(fold.shipped.trains)}
    task = FoldTask(options, plan.models, plan.rank, template, split.name, fold.shipped, models,
                    pool_auc=False, n_parts=1, files=None)
    tested = split.test.frame.get_column("user").unique().sort()
    users = np.array([tested[1], tested[-1]], np.int64)  # a user near each end of the fold's index

    def per_unit(at: list[int]) -> pl.DataFrame:
        """The chunk's per-unit rows, its users' rows and unit numbers given the fold indices ``at``."""
        numbers = pl.concat([pl.DataFrame({"user": users, UNIT_LABEL: label, FIRST_UNIT: units[users]})
                             for label, units in first.items()])
        chunk = pl.concat([rows.filter(pl.col("user").is_in(users.tolist())), numbers], how="diagonal_relaxed")
        chunk = chunk.with_columns(pl.col("user").replace_strict(users.tolist(), at, return_dtype=pl.Int32))
        return pl.concat([frame for kind, frame in fold_chunk_tables(chunk, task) if kind == PER_UNIT])

    got = per_unit(users.tolist())
    want = expected.filter(pl.col("user").is_in(data.user_ids.gather(users).implode()))
    assert got.height == want.height and set(got.get_column("protocol")) == set(want.get_column("protocol"))
    assert want.get_column("protocol").n_unique() >= 10 and want.get_column("system").n_unique() == 3
    joined = want.join(got.select(want.columns), on=KEYS, how="full", nulls_equal=True, suffix="_chunk")
    x, y = joined.get_column("value").to_numpy(), joined.get_column("value_chunk").to_numpy()
    assert np.array_equal(np.isnan(x), np.isnan(y))
    np.testing.assert_allclose(y[~np.isnan(y)], x[~np.isnan(x)], rtol=0, atol=1e-12)

    tracemalloc.start()
    try:
        far = per_unit([0, 10**7])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10**7  # an array over the fold's indices would be 10**7 bytes (bools) to 8 x 10**7
    assert far.select(KEYS).sort(KEYS).equals(got.select(KEYS).sort(KEYS))  # the same units, numbered alike


@pytest.mark.spark
def test_unit_numbers_are_made_per_block_and_joined_to_their_users(spark, tmp_path, synthetic_ratings, monkeypatch):
    monkeypatch.setattr(targets_module, "UNIT_BLOCK", 16)  # many blocks, users numbered across them
    config, data, split = _fold(tmp_path, synthetic_ratings, PROTOCOLS)
    options = RunOptions.from_config(config)
    fold = FoldTargets.of(options, split)
    task = UnitCounts(options, fold.shipped, data.with_frame(data.frame.clear()), split.name)
    expected = _numbered(task(fold.rows(split)), split.n_users)
    # on a whole fold of standard protocols, the numbering first_units gives
    whole = first_units(options.protocols[0], split, fold.shipped.totals[0], 4)
    assert np.array_equal(whole["TI+AR+AN"], expected["TI+AR+AN"])
    frame = spark.createDataFrame(fold.rows(split).to_arrow())
    for partitions in (1, 3, 7):
        rows = pl.from_arrow(unit_number_rows(frame, task, partitions).toArrow())
        assert rows.get_column(UNIT_LABEL).n_unique() == len(expected) == 5 + 2 + 3 + 4 + 1
        for (label,), part in rows.partition_by(UNIT_LABEL, as_dict=True).items():
            users = part.get_column("user").to_numpy()
            assert np.array_equal(part.get_column(FIRST_UNIT).to_numpy(), expected[label][users]), (label, partitions)
            units = task(fold.rows(split)).filter(pl.col(UNIT_LABEL) == label)
            assert sorted(users) == sorted(units.get_column("user").to_list())  # a row per user with units alone
        # a chunk takes its users' numbers out of its rows
        chunk = fold.rows(split).head(50)
        mixed = pl.concat([chunk, rows.filter(pl.col("user").is_in(chunk.get_column("user").unique().implode()))],
                          how="diagonal_relaxed")
        plain, numbers = take_unit_numbers(mixed)
        assert plain.equals(chunk)
        users = chunk.get_column("user").unique().sort().to_numpy().astype(np.int64)
        with_units = users[np.isin(users, rows.filter(pl.col(UNIT_LABEL) == "TI+AR+AN").get_column("user"))]
        assert np.array_equal(numbers.of("TI+AR+AN", with_units), expected["TI+AR+AN"][with_units])


@pytest.mark.parametrize(("protocol", "message"), [
    ({"name": "AI+AR+AN", "design": "uniform_test", "per_item": 10_000}, "leaves no item in test"),
    ({"name": "AI+AR+AN", "design": "percentiles", "bins": 10_000}, "number of bins must be an integer from 2"),
    ({"name": "AI+1R+NN5", "negatives": "negatives.ncf"}, "more than n = 5 negatives"),
])
def test_what_the_fold_cannot_take_is_refused_on_the_driver(tmp_path, synthetic_ratings, protocol, message):
    from recsys_eval.errors import DataError

    _write_negatives(tmp_path, synthetic_ratings)
    config, _, split = _fold(tmp_path, synthetic_ratings, [protocol])
    with pytest.raises((DataError, ConfigError), match=message):
        FoldTargets.of(RunOptions.from_config(config), split)


def test_the_protocol_study_validates_on_spark_but_for_what_stays_local():
    config = load_config(ROOT / "experiments" / "ml100k-protocols.toml", ["engine.name=spark"])
    with pytest.raises(ConfigError) as refused:
        check_names(config)
    message = str(refused.value)
    assert "protocols[" not in message and "TI candidates" not in message and "design" not in message
    assert "user_knn" in message  # what stays local is still named
    # its protocols alone run on Spark: the recommenders and metrics that stay local dropped
    kept = load_config(ROOT / "experiments" / "ml100k-protocols.toml", [
        "engine.name=spark", 'recommenders=[{name = "popular"}, {name = "als"}]',
        'metrics.names=["precision", "ndcg"]'])
    check_names(kept)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, synthetic_ratings) -> Path:
    directory = tmp_path_factory.mktemp("local")
    path = _config_path(directory, synthetic_ratings, "local")
    return run_experiment(load_config(path), path.read_text(), out_root=directory / "out", quiet=True).folder


@pytest.mark.spark
@pytest.mark.parametrize("partitions", [1, 3, 7])
def test_spark_run_equals_local(spark, tmp_path, synthetic_ratings, local_run, partitions):
    path = _config_path(tmp_path, synthetic_ratings, "spark", partitions)
    folder = run_experiment(load_config(path), path.read_text(), out_root=tmp_path / "out", quiet=True).folder
    local, remote = ResultsFolder.open(local_run), ResultsFolder.open(folder)
    a, b = local.scan_per_unit().collect(), remote.scan_per_unit().collect()
    assert a.height == b.height and set(a.get_column("protocol")) == set(b.get_column("protocol"))
    assert a.get_column("protocol").n_unique() == 5 + 2 + 3 + 4 + 1
    joined = a.join(b, on=KEYS, how="full", nulls_equal=True, suffix="_spark")
    x, y = joined.get_column("value").to_numpy(), joined.get_column("value_spark").to_numpy()
    assert not np.isnan(x).all() and np.array_equal(np.isnan(x), np.isnan(y))
    np.testing.assert_allclose(y[~np.isnan(y)], x[~np.isnan(x)], rtol=0, atol=1e-12)
    assert (local.path / "summary.csv").read_bytes() == (remote.path / "summary.csv").read_bytes()
    assert local.table("exposure_bins").equals(remote.table("exposure_bins"))
