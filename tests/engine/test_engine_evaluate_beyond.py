"""``evaluate --engine spark`` with the beyond-accuracy metrics gives the local ``evaluate``'s per-unit
values and summary.csv to the last bit on 1, 3 and 7 partitions: the catalogue indexed and TRAIN
counted by Spark jobs (popularity over every TRAIN user, a TRAIN user absent from TEST included),
each user's profile from its own TRAIN rows, the run-level values from the partitions' counts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.results import ResultsFolder
from recsys_eval.errors import ConfigError
from recsys_eval.measure.beyond import counted_item_side, whole_item_side
from recsys_eval.measure.metrics import BEYOND_METRICS, metric_params

KEYS = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
NAMES = ["ndcg", "hit", *BEYOND_METRICS, "mae", "rmse"]
RUN_LEVEL = {"catalog_coverage", "prediction_coverage", "gini", "entropy", "pop_rsp", "pop_reo"}


def _files(tmp_path: Path, seed: int, text_ids: bool) -> dict[str, str]:
    """TEST ratings of users 0..39 over items 0..29; RUN scores (many ties) for users 0..42 but
    those with u % 7 == 3 (empty lists), some of its items only in RUN (40..44); TRAIN for users
    0..46 but those with u % 5 == 1 (no profile), users 40..46 absent from TEST, some items only in
    TRAIN (30..35); genres for most catalogue items, none for some, and one item outside it."""
    rng = np.random.default_rng(seed)
    test, run, train = [], [], []
    for u in range(40):
        items = rng.choice(30, size=rng.integers(1, 6), replace=False)
        test += [(u, int(i), float(rng.integers(1, 6))) for i in items]
    for u in range(43):
        if u % 7 == 3:
            continue
        items = rng.choice(45, size=rng.integers(0, 14), replace=False)
        run += [(u, int(i), float(rng.integers(0, 4))) for i in items]
    for u in range(47):
        if u % 5 == 1:
            continue
        train += [(u, int(i), 1.0) for i in rng.choice(36, size=rng.integers(1, 9), replace=False)]
    train += [train[0]]  # a repeated TRAIN pair counts once
    genres = ["a", "b", "c", "d", "e"]
    items = [i for i in range(46) if i % 9 != 4] + [99]
    labels = ["|".join(rng.choice(genres, size=rng.integers(1, 4), replace=False)) for _ in items]
    frames = {"test": pl.DataFrame(test, schema=["user", "item", "rating"], orient="row"),
              "run": pl.DataFrame(run, schema=["user", "item", "score"], orient="row"),
              "train": pl.DataFrame(train, schema=["user", "item", "rating"], orient="row"),
              "genres": pl.DataFrame({"item": items, "genres": labels})}
    paths = {}
    for name, frame in frames.items():
        if text_ids:  # text order: "i10" < "i2", the catalogue's order is the text's
            frame = frame.with_columns(pl.format("i{}", "item").alias("item"))
            if "user" in frame.columns:
                frame = frame.with_columns(pl.format("u{}", "user").alias("user"))
        path = tmp_path / (f"{name}.csv" if name in ("run", "genres") else f"{name}.parquet")
        frame.write_csv(path) if path.suffix == ".csv" else frame.write_parquet(path)
        paths[name] = str(path)
    return paths


def _local(paths: dict[str, str], out: Path, names: list[str], *, train: bool = True, genres: bool = True) -> None:
    from recsys_eval.cli.evaluate import _genres
    from recsys_eval.data.runs import load_run
    from recsys_eval.pipeline.evaluate import evaluate_run
    from recsys_eval.pipeline.options import MeasureOptions

    data = load_run(paths["test"], paths["run"], paths["train"] if train else None, threshold=3.0)
    evaluate_run(data, MeasureOptions.of(names, [1, 3, 10], threshold=3.0, params={"head_share": 0.3}),
                 system="run", out=out, force=False, source=paths["test"],
                 genres=_genres(Path(paths["genres"]), data.item_ids) if genres else None)


def _same_results(local: Path, spark: Path) -> pl.DataFrame:
    a, b = (ResultsFolder.open(side).scan_per_unit().collect() for side in (local, spark))
    joined = a.join(b, on=KEYS, how="full", nulls_equal=True, suffix="_spark")
    assert a.height == b.height == joined.height
    assert joined.get_column("value").null_count() == 0 and joined.get_column("value_spark").null_count() == 0
    assert np.array_equal(joined.get_column("value").to_numpy(), joined.get_column("value_spark").to_numpy(),
                          equal_nan=True)
    assert (local / "summary.csv").read_bytes() == (spark / "summary.csv").read_bytes()
    return b


@pytest.mark.spark
@pytest.mark.parametrize(("partitions", "text_ids"), [(1, False), (3, True), (7, False)])
def test_evaluate_beyond_metrics_on_spark_equal_local(spark, tmp_path, partitions, text_ids):
    from recsys_eval.engine.runs import evaluate_spark

    paths = _files(tmp_path, partitions, text_ids)
    _local(paths, tmp_path / "local", NAMES)
    evaluate_spark(spark, paths["test"], paths["run"], str(tmp_path / "spark"), train=paths["train"],
                   genres=paths["genres"], metrics=NAMES, k=[1, 3, 10], threshold=3.0, partitions=partitions,
                   params={"head_share": 0.3}, system="run")
    spark_rows = _same_results(tmp_path / "local", tmp_path / "spark")
    run_rows = spark_rows.filter(pl.col("user").is_null())
    assert set(run_rows.get_column("metric")) == RUN_LEVEL | {"mae", "rmse"}
    defined = spark_rows.filter(pl.col("value").is_not_nan()).get_column("metric")
    assert set(defined) >= set(NAMES)  # every metric measured something: no vacuous equality
    # a TRAIN user absent from TEST counts in the popularity (phi and |U|) but is no unit
    assert spark_rows.get_column("user").drop_nulls().n_unique() == 40


@pytest.mark.spark
def test_evaluate_beyond_on_spark_without_train(spark, tmp_path):
    """Without TRAIN the catalogue is every item of TEST and RUN (coverage, Gini, entropy, ILD);
    a metric that reads TRAIN is refused before Spark reads a row, naming what it needs."""
    from recsys_eval.engine.runs import evaluate_spark

    paths = _files(tmp_path, 5, False)
    names = ["ndcg", "catalog_coverage", "prediction_coverage", "gini", "entropy", "ild", "user_coverage"]
    _local(paths, tmp_path / "local", names, train=False)
    evaluate_spark(spark, paths["test"], paths["run"], str(tmp_path / "spark"), genres=paths["genres"],
                   metrics=names, k=[1, 3, 10], threshold=3.0, partitions=3, system="run",
                   params={"head_share": 0.3})
    _same_results(tmp_path / "local", tmp_path / "spark")
    with pytest.raises(ConfigError, match="novelty needs train interactions"):
        evaluate_spark(spark, paths["test"], paths["run"], str(tmp_path / "a"), metrics=["ndcg", "novelty"])
    with pytest.raises(ConfigError, match="calibration needs item genres"):
        evaluate_spark(spark, paths["test"], paths["run"], str(tmp_path / "b"), train=paths["train"],
                       metrics=["calibration"])
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.spark
def test_cli_evaluate_beyond_on_spark(spark, tmp_path):
    from recsys_eval.cli import main

    paths = _files(tmp_path, 11, True)
    args = ["evaluate", "--test", paths["test"], "--run", paths["run"], "--train", paths["train"],
            "--genres", paths["genres"], "--threshold", "3", "--metrics", "ndcg,calibration,arp,pop_reo,gini,epc",
            "--k", "1,5"]
    for engine in ("local", "spark"):
        with pytest.raises(SystemExit) as exit_info:
            main([*args, "--out", str(tmp_path / engine), "--engine", engine, "--master", "local[2]",
                  "--partitions", "3"])
        assert exit_info.value.code in (0, None)
    _same_results(tmp_path / "local", tmp_path / "spark")


def test_counted_item_side_is_the_whole_trains():
    """The item side made of per-item TRAIN user counts (what Spark counts) holds the arrays the
    whole train's rows give, every one of them."""
    rng = np.random.default_rng(3)
    pairs = pl.DataFrame({"user": rng.integers(0, 30, 200), "item": 2 * rng.integers(0, 50, 200)},
                         schema={"user": pl.Int32, "item": pl.Int32}).unique()  # odd items: in no train
    train = Interactions(pairs, pl.Series("user_id", np.arange(40)), pl.Series("item_id", np.arange(100)))
    names, params = list(BEYOND_METRICS), metric_params({"head_share": 0.3})
    whole = whole_item_side(train, 100, names, params)
    holders = np.bincount(train.items, minlength=100)
    counted = counted_item_side(holders, pairs.get_column("user").n_unique(), names, params)
    assert set(whole) == set(counted) and len(whole) >= 6
    for key, value in whole.items():  # an array, or a tuple of arrays (the list pass's ItemRecords)
        pairs_of = zip(value, counted[key], strict=True) if isinstance(value, tuple) else [(value, counted[key])]
        for mine, theirs in pairs_of:
            assert np.array_equal(np.asarray(mine), np.asarray(theirs)), key


@pytest.mark.spark
def test_evaluate_beyond_on_spark_refuses_a_train_row_without_ids(spark, tmp_path, monkeypatch):
    """A TRAIN row of a user absent from TEST is counted in the popularity, not measured by a
    partition: one without an item id, past the rows the driver samples, is refused, naming TRAIN."""
    from recsys_eval.engine import runs as engine_runs
    from recsys_eval.engine.runs import evaluate_spark
    from recsys_eval.errors import DataError

    monkeypatch.setattr(engine_runs, "SAMPLE_ROWS", 1)
    paths = _files(tmp_path, 2, False)
    train = pl.read_parquet(paths["train"])
    pl.concat([train, pl.DataFrame({"user": [46], "item": [None], "rating": [1.0]}, schema=train.schema)]).write_parquet(
        tmp_path / "holed.parquet")
    with pytest.raises(DataError, match=r"TRAIN .*holed.parquet: a row without a user or an item id"):
        evaluate_spark(spark, paths["test"], paths["run"], str(tmp_path / "out"), train=str(tmp_path / "holed.parquet"),
                       metrics=["novelty"], threshold=3.0, partitions=2)
    assert not (tmp_path / "out").exists()
