"""`run --engine spark` reads, prepares and splits the dataset on Spark: the preparation steps
remove what the local ones remove, the split and its record are the local splitter's on any number
of partitions, and a run whose inputs Spark made gives the local engine's per-unit values and
summary; what needs every row at once is named as local-only when the config is validated."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from config_text import COLUMNS, HOLDOUT, config_text, ratings_file, split_table
from recsys_eval.cli import main
from recsys_eval.core import Interactions
from recsys_eval.core.results import ResultsFolder
from recsys_eval.data import load_file
from recsys_eval.engine import inputs
from recsys_eval.core.uris import file_uri
from recsys_eval.errors import DataError
from recsys_eval.experiment.runner import run_experiment
from recsys_eval.pipeline.config import DatasetConfig, PrepareConfig, load_config
from recsys_eval.pipeline.inputs import make_splits, prepare_data

KEYS = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
PREPARE = PrepareConfig(threshold=2.3, min_user_interactions=25, min_item_interactions=3, k_core=4)


def _raw_rows(frame: pl.DataFrame | Interactions) -> set[tuple]:
    if isinstance(frame, Interactions):
        frame = frame.to_raw()
    return set(frame.select("user", "item", "rating").iter_rows())


@pytest.mark.spark
def test_spark_preparation_removes_what_the_local_steps_remove(spark, synthetic_ratings):
    data = load_file(synthetic_ratings, COLUMNS)
    dataset = load_config_dataset(synthetic_ratings)
    raw = inputs.read_dataset(spark, dataset)
    # read as the local reader reads: the same rows, typed alike, in the file's order
    back = pl.from_arrow(raw.toArrow()).sort(inputs.ROW)
    assert back.drop(inputs.ROW).equals(data.to_raw().select(back.drop(inputs.ROW).columns))
    for prepare in (PREPARE, PrepareConfig(threshold=3.5, binarize=True), PrepareConfig(k_core=30)):
        local, local_steps = prepare_data(prepare, data)
        prepared, steps = inputs.spark_prepare(raw, prepare)
        assert steps == local_steps and local_steps[-1]["interactions"] > 0
        assert _raw_rows(pl.from_arrow(prepared.toArrow())) == _raw_rows(local)


@pytest.mark.spark
@pytest.mark.parametrize("text", [False, True])
def test_the_written_index_numbers_ids_as_the_local_index(spark, tmp_path, text):
    rng = np.random.default_rng(2)
    ids = rng.choice(10**6, 3000, replace=False) - 5 * 10**5  # negative ones too
    if text:  # upper and lower case, digits, accents and a symbol outside the BMP: polars sorts by UTF-8 bytes
        words = ["Zeta", "alpha", "10", "9", "ébène", "eb", "𝔘ber", "Ω", "a b"]
        ids = np.array([f"{words[i % len(words)]}{i}" if i % 3 else words[i % len(words)] for i in ids], object)
    rows = pl.DataFrame({"user": np.repeat(ids, 2), "item": np.tile([1, 2], len(ids))}).sample(fraction=1.0, seed=1)
    frame = spark.createDataFrame(rows.to_arrow()).repartition(5)
    index = inputs.write_index(frame, str(tmp_path / inputs.INDEX))
    local = Interactions.from_frame(rows.unique("user").with_columns(pl.lit(0).alias("item")))
    assert inputs.read_ids(Path(index, "user"), "user").equals(local.user_ids)
    written = pl.read_parquet(f"{index}/user/*.parquet").sort(inputs.INDEX_COLUMN)
    assert written.get_column(inputs.INDEX_COLUMN).to_list() == list(range(local.n_users))  # 0.. without a gap


def load_config_dataset(path, **extra):
    return DatasetConfig(**{**ratings_file(path), **extra})


@pytest.mark.spark
def test_the_threshold_is_compared_in_float32_as_numpy_compares_it(spark, tmp_path):
    # 3.3 is not a float32: float32(3.3) < 3.3 in doubles, but numpy compares float32 ratings in float32
    path = tmp_path / "r.csv"
    pl.DataFrame({"user": [1, 1, 2], "item": [1, 2, 1], "rating": [3.3, 3.2, 3.4]}).write_csv(path)
    frame = inputs.read_dataset(spark, load_config_dataset(path, columns={"user": "user", "item": "item",
                                                                          "rating": "rating"}))
    prepared, _ = inputs.spark_prepare(frame, PrepareConfig(threshold=3.3))
    local, _ = prepare_data(PrepareConfig(threshold=3.3), load_file(path))
    assert _raw_rows(pl.from_arrow(prepared.toArrow())) == _raw_rows(local) and len(local) == 2


@pytest.mark.spark
def test_parquet_times_are_the_local_readers_seconds_in_any_session_time_zone(spark, tmp_path):
    path = tmp_path / "times.parquet"
    times = [dt.datetime(2001, 5, 6, 7, 8, 9), dt.datetime(1969, 12, 31, 23, 0, 1), dt.datetime(1999, 1, 1)]
    frame = pl.DataFrame({"user": [1, 2, 3], "item": [3, 4, 5], "rating": [1.0, 2.0, 3.0], "timestamp": times})
    frame.write_parquet(path)
    assert load_file(path).frame.get_column("timestamp")[0] == 989132889  # 2001-05-06 07:08:09 UTC
    zone = spark.conf.get("spark.sql.session.timeZone")
    try:
        spark.conf.set("spark.sql.session.timeZone", "America/New_York")
        for column in (pl.col("timestamp"), pl.col("timestamp").dt.date(), pl.col("timestamp").dt.replace_time_zone("UTC")):
            frame.with_columns(column.alias("timestamp")).write_parquet(path)
            read = inputs.read_dataset(spark, DatasetConfig(path=str(path)))
            local = load_file(path).frame.get_column("timestamp").to_list()
            assert pl.from_arrow(read.toArrow()).sort(inputs.ROW).get_column("timestamp").to_list() == local
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)


@pytest.mark.spark
def test_bad_rows_are_refused_naming_what_is_wrong(spark, tmp_path):
    path = tmp_path / "dup.csv"
    pl.DataFrame({"user": [1, 1, 2], "item": [5, 5, 1], "rating": [3.0, 4.0, 1.0]}).write_csv(path)
    dataset = load_config_dataset(path, columns={"user": "user", "item": "item", "rating": "rating"})
    with pytest.raises(DataError, match=r"1 \(user, item\) pairs occur more than once \(2 rows\), e.g. user 1, item 5"):
        inputs.read_dataset(spark, dataset)
    path.write_text("user,item,rating\n1,5,3\n,6,4\n")
    with pytest.raises(DataError, match="1 null values in column 'user'"):
        inputs.read_dataset(spark, dataset)


@pytest.mark.spark
@pytest.mark.parametrize(("method", "params", "counted"), [
    ("holdout", {"fraction": 0.3, "per_user": True, "drop_unknown": True}, "test_dropped_unknown_items"),
    ("all_but_n", {"n": 3, "order": "latest", "min_user_interactions": 40, "drop_unknown": "items"},
     "users_kept_in_train"),
    ("leave_last_n", {"n": 2, "drop_unknown": "users"}, "test_interactions"),
    ("time", {"at": 0.75, "min_user_interactions": 45, "drop_unknown": True}, "users_kept_in_train"),
    ("rolling_time", {"length": "60d", "n": 2, "drop_unknown": True}, "test_interactions"),
    ("holdout", {"fraction": 0.2, "min_user_interactions": 45, "drop_unknown": "items"}, "users_kept_in_train"),
    ("kfold", {"k": 3, "per_user": True, "drop_unknown": True}, "test_dropped_unknown_items"),
    ("user_disjoint", {"fraction": 0.3, "order": "latest"}, "fold_in_interactions"),
])
def test_spark_inputs_are_the_local_split_on_any_partitions(spark, tmp_path, synthetic_ratings, method, params,
                                                            counted):
    data = load_file(synthetic_ratings, COLUMNS)
    prepare = {"threshold": 2.3}  # leaves rare items, whose test rows drop_unknown drops
    prepared, _ = prepare_data(PrepareConfig(**prepare), data)
    folds = make_splits(load_config(_path(tmp_path, synthetic_ratings, split_table(method, **params))).split,
                        prepared, seed=17)
    for partitions in (1, 3, 8):
        config = load_config(_path(tmp_path, synthetic_ratings, split_table(method, **params), partitions=partitions,
                                   prepare=prepare))
        folder = tmp_path / f"splits-{method}-{partitions}"
        # on 3 partitions the split is written elsewhere than the driver's folder, which reads copies of it
        scratch = (inputs.SplitScratch(file_uri(folder / "written"), folder / "copies") if partitions == 3
                   else inputs.SplitScratch.of(folder))
        made = inputs.spark_inputs(config, 17, scratch)
        assert len(made.splits) == len(folds) and list(made.written) == [local.name for local in folds]
        for split, local in zip(made.splits, folds, strict=True):
            assert split.name == local.name and split.info == local.info, partitions
            for mine, theirs in ((split.train, local.train), (split.test, local.test), (made.data, prepared)):
                assert mine.user_ids.equals(theirs.user_ids) and mine.item_ids.equals(theirs.item_ids)
                assert mine.frame.equals(theirs.frame), partitions  # the same rows, in the local order
    assert all(local.info[counted] > 0 for local in folds)  # the counts compared are not all zero


def _path(tmp_path, data, split=HOLDOUT, engine="spark", partitions=3, prepare=None, **extra):
    path = tmp_path / f"{engine}-{partitions}.toml"
    path.write_text(config_text(
        "inputs", seed=5, dataset=ratings_file(data), split=split,
        prepare=prepare or {"threshold": 2.3, "min_user_interactions": 25, "min_item_interactions": 3, "k_core": 4},
        protocols=["AI+AR+AN", "TI+1R+NN20", {"name": "AI+AR+AN", "label": "uniform", "design": "uniform_test",
                                              "per_item": 3}],
        recommenders=["popular", {"name": "als", "params": {"factors": 8, "iterations": 3}},
                      {"name": "item_knn", "params": {"k": 20}}, "bias"],
        metrics={"names": ["precision", "recall", "ndcg", "ap", "auc", "catalog_coverage", "novelty", "rmse"], "k": [1, 5, 10],
                 "relevance_threshold": 4},
        output={"report": False, "save_splits": False}, engine={"name": engine, "partitions": partitions}, **extra))
    return path


@pytest.mark.spark
def test_a_run_whose_inputs_spark_made_equals_the_local_run(spark, tmp_path, synthetic_ratings, monkeypatch):
    made = []
    real = inputs.spark_inputs
    monkeypatch.setattr(inputs, "spark_inputs", lambda *a: made.append(real(*a)) or made[-1])
    split = split_table("all_but_n", n=4, order="latest", drop_unknown=True)
    local = run_experiment(load_config(p := _path(tmp_path, synthetic_ratings, split, "local")), p.read_text(),
                           out_root=tmp_path / "local", quiet=True).folder
    local = ResultsFolder.open(local)
    for partitions in (2, 5):
        path = _path(tmp_path, synthetic_ratings, split, "spark", partitions)
        folder = ResultsFolder.open(run_experiment(load_config(path), path.read_text(),
                                                   out_root=tmp_path / f"spark{partitions}", quiet=True).folder)
        assert len(made) == partitions // 2  # Spark made the inputs; its split is scratch, gone once complete
        assert not (folder.path / "spark_splits").exists()
        a, b = (f.scan_per_unit().collect().sort(KEYS) for f in (local, folder))
        assert a.select(KEYS).equals(b.select(KEYS))
        np.testing.assert_array_equal(a.get_column("value").to_numpy(), b.get_column("value").to_numpy())
        assert (local.path / "summary.csv").read_bytes() == (folder.path / "summary.csv").read_bytes()
        assert local.table("data_stats").equals(folder.table("data_stats"))


def test_validate_names_where_the_inputs_are_made(tmp_path, synthetic_ratings, capsys):
    for split, expected in ((HOLDOUT, "inputs: read, prepared and split on Spark"),
                            (split_table("time", at=0.8), "inputs: read, prepared and split on Spark"),
                            (split_table("kfold", k=3, per_user=True), "inputs: read, prepared and split on Spark"),
                            (split_table("holdout", fraction=0.2), "inputs: read, prepared and split on Spark")):
        with pytest.raises(SystemExit) as exit_info:
            main(["validate", str(_path(tmp_path, synthetic_ratings, split))])
        assert exit_info.value.code in (0, None)
        assert expected in capsys.readouterr().out
    config = load_config(_path(tmp_path, synthetic_ratings, prepare={"on": "train", "k_core": 2}))
    assert inputs.local_only(config) == ["prepare.on = 'train': each fold's train side is prepared on the driver"]


@pytest.mark.parametrize(("method", "params"), [
    ("holdout", {"fraction": 0.3, "per_user": True}),
    ("all_but_n", {"n": 3, "order": "latest", "min_user_interactions": 40}),
    ("given_n", {"n": 2, "drop_unknown": "items"}),
    ("leave_last_n", {"n": 2, "drop_unknown": "users"}),
    ("user_time", {"fraction": 0.2}),
    ("user_time", {"n": 2, "drop_unknown": True}),
    ("time", {"at": 0.6, "min_user_interactions": 3}),
    ("rolling_time", {"length": "90d", "n": 2}),
    ("holdout", {"fraction": 0.3}),
    ("kfold", {"k": 3, "drop_unknown": "items"}),
    ("kfold", {"k": 4, "per_user": True, "min_user_interactions": 40}),
    ("user_disjoint", {"n_users": 5, "fold_in": 0}),
    ("user_disjoint", {"fraction": 0.2, "order": "latest", "drop_unknown": True}),
    ("cold_items", {"n_items": 7}),
])
def test_the_spark_split_records_the_local_splitters_params(synthetic_ratings, method, params):
    from recsys_eval.split import make_split

    data = load_file(synthetic_ratings, COLUMNS)
    made = make_split(data, method, seed=3, **params)
    recorded, least = inputs.recorded_params(method, {**params, "seed": 3})
    counts = data.user_counts()
    for split in made if isinstance(made, list) else [made]:
        assert split.info["params"] == recorded
        assert split.info["users_kept_in_train"] == int(((counts > 0) & (counts < least)).sum())


@pytest.mark.spark
def test_the_driver_counts_the_written_split_on_spark_without_reading_its_rows(spark, tmp_path, synthetic_ratings):
    from recsys_eval.engine.targets import check_relevant
    from recsys_eval.pipeline.config import ProtocolConfig
    from recsys_eval.targets.relevance import qrels, test_gains
    from recsys_eval.targets.totals import ItemTotals

    config = load_config(_path(tmp_path, synthetic_ratings, partitions=3))
    made = inputs.spark_inputs(config, 17, inputs.SplitScratch.of(tmp_path / "splits"))
    local_data, _ = prepare_data(config.prepare, load_file(synthetic_ratings, COLUMNS))
    (local,) = make_splits(config.split, local_data, seed=17)
    (split,) = made.splits
    reads = len(inputs.ROW_READS)
    # what the run reads of the split besides its rows, counted by Spark: the local split's (the
    # relevance: the relevant test rows, and one user's most, R-precision's rank depth)
    assert (len(made.data), made.data.n_users, made.data.n_items) == (len(local_data), local_data.n_users,
                                                                        local_data.n_items)
    assert (len(split.train), len(split.test), split.n_test_users()) == (len(local.train), len(local.test),
                                                                          local.n_test_users())
    spark_totals, local_totals = ItemTotals.of(split), ItemTotals.of(local)
    np.testing.assert_array_equal(spark_totals.train_counts, local_totals.train_counts)
    np.testing.assert_array_equal(spark_totals.in_test, local_totals.in_test)
    for threshold in (None, 4, 4.5):  # 4.5 is no rating: compared in float32 as numpy compares
        judged = qrels(local, threshold)
        assert split.relevance(threshold) == (int((judged.gain > 0).sum()), int(judged.relevant_counts().max()))
    assert len(inputs.ROW_READS) == reads  # none of it read a row on the driver
    # a fold the local checks refuse is read (its sides' ratings, over the user ids), to raise the local engine's error
    with pytest.raises(DataError) as local_error:
        test_gains(local, 9)
    with pytest.raises(DataError, match="is above every rating") as spark_error:
        check_relevant(ProtocolConfig(name="TI+1R+NN20"), split, 9)
    assert str(spark_error.value) == str(local_error.value)
    assert inputs.ROW_READS[reads:] == [("holdout", "test"), ("", "user ids"), ("holdout", "train")]


def test_validate_names_what_the_driver_holds_and_why(tmp_path, synthetic_ratings):
    spark_only = tmp_path / "spark-only.toml"
    spark_only.write_text(config_text(
        "held", seed=5, dataset=ratings_file(synthetic_ratings), split=HOLDOUT, protocols=["AI+AR+AN", "TI+1R+NN20"],
        recommenders=["popular", "random", "spark_als"], metrics={"names": ["ndcg", "auc"], "k": [5]},
        output={"report": False, "save_splits": True}, engine={"name": "spark"}))
    assert inputs.inputs_note(load_config(spark_only)).splitlines()[1] == (
        "driver: holds no row of the split (its counts, item totals and checks are Spark jobs); popular, random, "
        "spark_als fit without its rows (on Spark, or from Spark's counts)")
    held = inputs.inputs_note(load_config(_path(tmp_path, synthetic_ratings))).splitlines()[1]
    assert held.startswith("driver: holds the fold's train side (als fits on the driver with implicit; item_knn's "
                           "item neighbourhoods are computed on the driver; bias's user and item biases are fitted on "
                           "the driver; the beyond-accuracy metrics read its item side; uniform: the uniform test is "
                           "chosen item by item over every test rating) and the fold's test side (uniform: ")
    assert held.endswith("; popular fits without its rows (on Spark, or from Spark's counts)")
    assert inputs.driver_rows(load_config(_path(tmp_path, synthetic_ratings, engine="local"))) == inputs.driver_rows(
        load_config(_path(tmp_path, synthetic_ratings)))
