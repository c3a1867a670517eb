"""An experiment on Spark (``[engine] name = "spark"``) gives the local runner's per-unit values and
summary for the same config, and a config the Spark engine cannot run is refused at validation."""

from __future__ import annotations

import json
import pickle

import numpy as np
import polars as pl
import pytest

from config_text import HOLDOUT, config_text, ratings_file, split_table
from recsys_eval.cli import main
from recsys_eval.core.results import ResultsFolder
from recsys_eval.engine.fold import broadcastable, check_spark_support
from recsys_eval.errors import ConfigError
from recsys_eval.experiment.checks import check_names
from recsys_eval.pipeline.config import load_config
from recsys_eval.experiment.runner import run_experiment

KEYS = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
RECS = ["popular", {"name": "als", "params": {"factors": 8, "iterations": 3}},
        {"name": "item_knn", "params": {"k": 20}}]


def _config(tmp_path, data, engine, partitions=3, split=HOLDOUT, recommenders=RECS, interval="t"):
    path = tmp_path / f"{engine}-{partitions}.toml"
    path.write_text(config_text(
        "fold", seed=5, dataset=ratings_file(data), split=split,
        protocols=["AI+AR+AN", "AI+1R+NN20", {"name": "UT+AR+AN", "label": "own test items"}],
        recommenders=recommenders,
        metrics={"names": ["precision", "recall", "f1", "ndcg", "ap", "rr", "auc"], "k": [1, 5, 10],
                 "relevance_threshold": 4},
        output={"report": False, "save_splits": False}, engine={"name": engine, "partitions": partitions},
        compare={"interval": interval, "resamples": 50}))
    return path


def _run(path, out):
    return run_experiment(load_config(path), path.read_text(), out_root=out, quiet=True)


def _assert_same(local: pl.DataFrame, spark: pl.DataFrame) -> None:
    assert spark.height == local.height
    joined = local.join(spark, on=KEYS, how="full", nulls_equal=True, suffix="_spark")
    a, b = joined.get_column("value").to_numpy(), joined.get_column("value_spark").to_numpy()
    assert not np.isnan(a).all() and np.array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_allclose(b[~np.isnan(b)], a[~np.isnan(a)], rtol=0, atol=1e-12)


@pytest.mark.spark
@pytest.mark.parametrize(("partitions", "split", "interval"), [
    (1, HOLDOUT, "t"),
    (7, split_table("kfold", k=2, per_user=True), "t"),
    (4, HOLDOUT, "bootstrap"),
])
def test_experiment_on_spark_equals_local(spark, tmp_path, synthetic_ratings, partitions, split, interval):
    folders = {"local": _run(_config(tmp_path, synthetic_ratings, "local", partitions, split, interval=interval),
                             tmp_path / "local").folder}
    if partitions == 1:  # `run --engine spark` on a config of the local engine
        with pytest.raises(SystemExit) as exit_info:
            main(["run", str(_config(tmp_path, synthetic_ratings, "local", partitions, split)),
                  "--out", str(tmp_path / "spark"), "--quiet", "--engine", "spark"])
        assert exit_info.value.code in (0, None)
        folders["spark"] = next(p for p in (tmp_path / "spark" / "fold").iterdir() if not p.name.startswith("."))
    else:
        path = _config(tmp_path, synthetic_ratings, "spark", partitions, split, interval=interval)
        folders["spark"] = _run(path, tmp_path / "spark").folder
    local, spark_folder = ResultsFolder.open(folders["local"]), ResultsFolder.open(folders["spark"])
    _assert_same(local.scan_per_unit().collect(), spark_folder.scan_per_unit().collect())
    # per-unit files in ResultsFolder's layout, every one in the manifest
    files = sorted(str(p.relative_to(spark_folder.path)) for p in (spark_folder.path / "per_unit").rglob("*.parquet"))
    manifest = json.loads((spark_folder.path / "manifest.json").read_text())
    assert files == sorted(manifest["partitions"])
    # the manifest says where the folds ran, with Spark's version
    assert manifest["engine"]["name"] == "spark" and manifest["versions"]["pyspark"] != "not installed"
    assert json.loads((local.path / "manifest.json").read_text())["engine"]["name"] == "local"
    # the same summary to the last bit: exact sums (t), or the same users resampled (bootstrap)
    assert (local.path / "summary.csv").read_bytes() == (spark_folder.path / "summary.csv").read_bytes()
    assert local.table("exposure_bins").equals(spark_folder.table("exposure_bins"))


def test_unsupported_config_is_refused_at_validation(tmp_path, synthetic_ratings):
    recs = [*RECS, "user_knn"]
    config = load_config(_config(tmp_path, synthetic_ratings, "spark", recommenders=recs))
    with pytest.raises(ConfigError, match=r"recommenders\[3\]\.name: recommender 'user_knn' cannot run on the "
                                          r"Spark engine: it scores a user from its neighbours' train rows"):
        check_names(config)
    check_names(load_config(_config(tmp_path, synthetic_ratings, "local", recommenders=recs)))


@pytest.mark.parametrize(("name", "message"), [
    ("user_knn", "whole train matrix"), ("user_knn_rating", "neighbours' train rows"), ("my.module:Model", "plugin"),
    ("path", "external run"),
])
def test_recommenders_that_cannot_broadcast(name, message):
    with pytest.raises(ConfigError, match=message):
        check_spark_support(name)
    for ok in ("random", "popular", "als", "bpr", "lmf", "item_knn", "spark_als", "bias"):
        check_spark_support(ok)


def test_broadcast_models_drop_the_library_and_the_train_matrix(synthetic_ratings):
    from recsys_eval.data import load_file
    from recsys_eval.recommend import make_recommender

    data = load_file(synthetic_ratings, {"user": "userId", "item": "movieId", "rating": "rating"})
    knn = make_recommender("item_knn", {"k": 5}, threads=1).fit(data)
    light = broadcastable(knn)
    assert light.model is None and light.user_items is None and knn.user_items is not None
    assert light.similarity is knn.similarity
    with pytest.raises(ConfigError, match="cannot be broadcast"):
        broadcastable(object())


@pytest.mark.spark
def test_spark_als_fits_on_spark_and_runs_on_both_engines(spark, tmp_path, synthetic_ratings, monkeypatch):
    from recsys_eval.data import load_file
    from recsys_eval.recommend import make_recommender
    from recsys_eval.recommend.spark_als import SparkALS

    data = load_file(synthetic_ratings, {"user": "userId", "item": "movieId", "rating": "rating"})
    model = make_recommender("spark_als", {"factors": 4, "iterations": 3}, seed=1).fit(data)
    assert model.user_factors.shape == (data.n_users, 4) and model.item_factors.shape == (data.n_items, 4)
    assert np.abs(model.item_factors).sum() > 0
    users, items = np.array([0, 1, 2]), np.array([3, 4, 5])
    np.testing.assert_allclose(model.score(users, items),
                               (model.user_factors[users] * model.item_factors[items]).sum(1), rtol=1e-5)
    # with BPR beside it: implicit's factors (and their item-bias column) joined from the driver
    recs = [{"name": "spark_als", "params": {"factors": 4, "iterations": 3}},
            {"name": "bpr", "params": {"factors": 4, "iterations": 5}}]
    folders = {"local": _run(_config(tmp_path, synthetic_ratings, "local", 3, recommenders=recs), tmp_path / "local").folder}
    with monkeypatch.context() as patch:  # the Spark engine never collects spark_als's user factors
        patch.setattr(SparkALS, "user_factors", property(_collected))
        patch.setattr(SparkALS, "fit", _fit_on_spark(SparkALS.fit))  # nor sends it the driver's train
        for partitions in (2, 5):
            path = _config(tmp_path, synthetic_ratings, "spark", partitions, recommenders=recs)
            folders[partitions] = _run(path, tmp_path / f"spark{partitions}").folder
    local = ResultsFolder.open(folders["local"])
    for partitions in (2, 5):
        spark_folder = ResultsFolder.open(folders[partitions])
        per_unit = spark_folder.scan_per_unit().collect()
        assert set(per_unit.get_column("system")) == {"spark_als", "bpr"}
        _assert_same(local.scan_per_unit().collect(), per_unit)  # Spark ML's ALS is seeded: the same factors
        assert (local.path / "summary.csv").read_bytes() == (spark_folder.path / "summary.csv").read_bytes()


@pytest.mark.spark
def test_spark_als_fits_the_same_factors_from_rows_on_spark_in_any_order(spark, synthetic_ratings):
    from recsys_eval.data import load_file
    from recsys_eval.recommend.spark_als import SparkALS, trains_on_spark

    data = load_file(synthetic_ratings, {"user": "userId", "item": "movieId", "rating": "rating"})
    driver = SparkALS({"factors": 4, "iterations": 3}, seed=1).fit(data)
    shuffled = data.frame.select("user", "item").sample(fraction=1.0, shuffle=True, seed=4)
    rows = spark.createDataFrame(shuffled.to_arrow()).repartition(7)
    with trains_on_spark([(data, rows)]):
        on_spark = SparkALS({"factors": 4, "iterations": 3}, seed=1).fit(data)
    assert np.abs(driver.item_factors).sum() > 0
    np.testing.assert_array_equal(on_spark.item_factors, driver.item_factors)
    np.testing.assert_array_equal(on_spark.user_factors, driver.user_factors)


def _fit_on_spark(fit):
    from recsys_eval.recommend import spark_als

    def checked(model, train):
        assert any(side is train for side, _ in spark_als._ON_SPARK), "spark_als fitted on the driver's train frame"
        return fit(model, train)

    return checked


def _collected(model):
    raise AssertionError("the Spark engine collected spark_als's user factors to the driver")


@pytest.mark.parametrize("text_ids", [False, True])
def test_the_template_sent_to_the_tasks_does_not_grow_with_the_users(text_ids):
    from recsys_eval.core import Interactions
    from recsys_eval.engine.targets import chunk_template, shipped_template, with_raw_users

    sizes = []
    for n_users in (100, 200_000):
        users = np.arange(n_users) * 3 + 7
        frame = pl.DataFrame({"user": users, "item": users % 50})
        if text_ids:
            frame = frame.with_columns(pl.format("user-{}", "user").alias("user"))
        data = Interactions.from_frame(frame)
        template = shipped_template(data)
        sizes.append(len(pickle.dumps(template)))
        assert template.item_ids.equals(data.item_ids) and template.user_ids.dtype == data.user_ids.dtype
        # a chunk of some users learns their raw ids from its rows, its users numbered from 0
        rows = with_raw_users(data.frame.filter(pl.col("user").is_in([3, 40, 41, 99])), data.user_ids)
        rest, local, fold_users = chunk_template(template, rows)
        assert rest.columns == data.frame.columns and local.n_users == 4 and fold_users.tolist() == [3, 40, 41, 99]
        users = rest.get_column("user").to_numpy()
        assert np.array_equal(fold_users[users], rows.get_column("user").to_numpy())
        assert local.user_ids.gather(users).equals(data.user_ids.gather(fold_users[users]))
        assert local.user_ids.null_count() == 0
    assert sizes[0] == sizes[1]  # no array over the users


@pytest.mark.spark
def test_a_task_whose_users_all_rate_below_the_threshold_runs_as_the_local_engine(spark, tmp_path):
    """The relevance threshold must be reached by some rating of the fold, not of each task's
    users: half the users rate 1-2 only (threshold 4), and with 30 partitions for 40 users some
    tasks hold only those; the run must give the local engine's per-unit values and summary."""
    rng = np.random.default_rng(1)
    users = np.repeat(np.arange(40), 30)
    items = np.concatenate([rng.choice(200, 30, replace=False) for _ in range(40)])
    ratings = np.where(users % 2 == 0, rng.integers(1, 3, users.size), rng.integers(1, 6, users.size))
    data = tmp_path / "ratings.csv"
    pl.DataFrame({"userId": users, "movieId": items, "rating": ratings.astype(float),
                  "timestamp": np.arange(users.size)}).write_csv(data)
    folders = {}
    for engine, partitions in (("local", 1), ("spark", 30), ("spark", 7)):
        path = tmp_path / f"{engine}-{partitions}.toml"
        path.write_text(config_text(
            "fold", seed=5, dataset=ratings_file(data), split=HOLDOUT, protocols=["AI+AR+AN", "AI+1R+NN20"],
            recommenders=["popular"], metrics={"names": ["ndcg", "recall"], "k": [5], "relevance_threshold": 4},
            output={"report": False, "save_splits": False}, engine={"name": engine, "partitions": partitions}))
        folders[engine, partitions] = ResultsFolder.open(_run(path, tmp_path / f"{engine}{partitions}").folder)
    local = folders["local", 1]
    for partitions in (30, 7):
        _assert_same(local.scan_per_unit().collect(), folders["spark", partitions].scan_per_unit().collect())
        assert (local.path / "summary.csv").read_bytes() == (folders["spark", partitions].path / "summary.csv").read_bytes()
