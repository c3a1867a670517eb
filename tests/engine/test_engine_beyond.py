"""Beyond-accuracy and rating metrics on Spark (``[engine] name = "spark"``) give the local engine's
per-unit values, run-level rows and summary.csv to the last bit, on 1, 3 and 7 partitions: per-user
values from the broadcast item side and each user's own train rows, run-level values (coverage, Gini,
entropy, PopRSP/PopREO, micro MAE/RMSE) from the tasks' counts summed on the driver."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from config_text import HOLDOUT, config_text, ratings_file
from recsys_eval.core.results import ResultsFolder
from recsys_eval.data.synthetic import write_synthetic_items
from recsys_eval.errors import ConfigError
from recsys_eval.experiment.checks import check_names
from recsys_eval.experiment.runner import run_experiment
from recsys_eval.measure.metrics import BEYOND_METRICS, RATING_METRICS
from recsys_eval.pipeline.config import load_config

KEYS = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
NAMES = ["ndcg", "recall", *BEYOND_METRICS, *RATING_METRICS]
RECS = ["popular", "random", {"name": "als", "params": {"factors": 8, "iterations": 3}},
        {"name": "item_knn", "params": {"k": 20}}, "bias"]
# a uniform test ranks and measures against its own train side (the test ratings it moved there):
# its item side is that train's, not the fold's; TI candidates read every user's test items
PROTOCOLS = ["AI+AR+AN", "AI+1R+NN20", "UT+AR+AN", "TI+AR+NN20",
             {"name": "AI+AR+AN", "design": "uniform_test", "per_item": 2}]
RUN_LEVEL = {"catalog_coverage", "prediction_coverage", "gini", "entropy", "pop_rsp", "pop_reo"}
EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _config(tmp_path: Path, ratings: Path, engine: str, partitions: int, interval: str) -> Path:
    items = write_synthetic_items(tmp_path / "items.csv")
    path = tmp_path / f"{engine}-{partitions}.toml"
    path.write_text(config_text(
        "beyond", seed=11, dataset={**ratings_file(ratings), "item_features": str(items)}, split=HOLDOUT,
        protocols=PROTOCOLS, recommenders=RECS,
        metrics={"names": NAMES, "k": [3, 10], "relevance_threshold": 4, "head_share": 0.3},
        output={"report": False, "save_splits": False}, engine={"name": engine, "partitions": partitions},
        compare={"interval": interval, "resamples": 40}))
    return path


def _run(path: Path, out: Path) -> ResultsFolder:
    return ResultsFolder.open(run_experiment(load_config(path), path.read_text(), out_root=out, quiet=True).folder)


@pytest.mark.spark
@pytest.mark.parametrize(("partitions", "interval"), [(1, "t"), (3, "bootstrap"), (7, "t")])
def test_beyond_and_rating_metrics_on_spark_equal_local(spark, tmp_path, synthetic_ratings, partitions, interval):
    local = _run(_config(tmp_path, synthetic_ratings, "local", partitions, interval), tmp_path / "local")
    remote = _run(_config(tmp_path, synthetic_ratings, "spark", partitions, interval), tmp_path / "spark")
    a, b = local.scan_per_unit().collect(), remote.scan_per_unit().collect()
    assert a.height == b.height
    joined = a.join(b, on=KEYS, how="full", nulls_equal=True, suffix="_spark")
    assert joined.get_column("value").null_count() == 0 and joined.get_column("value_spark").null_count() == 0
    x, y = joined.get_column("value").to_numpy(), joined.get_column("value_spark").to_numpy()
    assert np.array_equal(x, y, equal_nan=True)  # every per-user and run-level value, bit for bit
    measured = set(b.filter(pl.col("value").is_not_nan()).get_column("metric"))
    assert set(NAMES) <= measured  # each metric has defined values: none passes by being all NaN
    run_rows = b.filter(pl.col("user").is_null())
    assert set(run_rows.get_column("metric")) == RUN_LEVEL | {"mae", "rmse"}
    assert set(run_rows.filter(pl.col("metric") == "mae").get_column("system")) == {"bias"}
    assert (local.path / "summary.csv").read_bytes() == (remote.path / "summary.csv").read_bytes()


@pytest.mark.spark
@pytest.mark.parametrize("partitions", [1, 3, 7])
def test_rating_metrics_with_uniform_tests_alone_on_spark_equal_local(spark, tmp_path, synthetic_ratings, partitions):
    """With uniform-test protocols alone no target set is drawn on the fold's own train side, yet
    the rating metrics are measured on the fold's split by recommenders fitted on its train: the
    Spark fold fits them there too. Per unit and summary.csv equal the local engine's, and the bias
    predictor's per-user MAE is the one of a bias predictor fitted on the saved split's train side
    (not on a uniform test's moved one)."""
    from recsys_eval.recommend import make_recommender
    from recsys_eval.split import load_split

    recs = ["bias", {"name": "als", "params": {"factors": 4, "iterations": 3}}]  # ALS: kendall from scores
    protocols = [{"name": "AI+AR+AN", "design": "uniform_test", "per_item": 2},
                 {"name": "AI+1R+NN20", "design": "uniform_test", "per_item": 1}]
    runs = {}
    for engine in ("local", "spark"):
        path = tmp_path / f"{engine}.toml"
        path.write_text(config_text(
            "uniform-ratings", seed=5, dataset=ratings_file(synthetic_ratings), split=HOLDOUT, protocols=protocols,
            recommenders=recs, metrics={"names": ["ndcg", "mae", "rmse", "kendall"], "k": [10],
                                        "relevance_threshold": 4},
            output={"report": False, "save_splits": engine == "local"},
            engine={"name": engine, "partitions": partitions}))
        runs[engine] = _run(path, tmp_path / engine)
    a, b = (runs[e].scan_per_unit().collect() for e in ("local", "spark"))
    joined = a.join(b, on=KEYS, how="full", nulls_equal=True, suffix="_spark")
    assert a.height == b.height == joined.height
    assert np.array_equal(joined.get_column("value").to_numpy(), joined.get_column("value_spark").to_numpy(),
                          equal_nan=True)
    assert (runs["local"].path / "summary.csv").read_bytes() == (runs["spark"].path / "summary.csv").read_bytes()
    ratings = b.filter(pl.col("protocol") == "ratings")
    assert set(ratings.get_column("system")) == {"bias", "als"}
    assert set(ratings.filter(pl.col("system") == "als").get_column("metric")) == {"kendall"}
    # the bias predictor's per-user MAE, recomputed on the fold's own split
    fold = ratings.get_column("fold").unique().item()
    split = load_split(runs["local"].split_folder(fold))
    model = make_recommender("bias", {}).fit(split.train)
    test = split.test
    errors = pl.DataFrame({"user": split.test.user_ids.gather(test.users),
                           "error": np.abs(np.asarray(model.predict(test.users, test.items), np.float64)
                                                 - test.ratings.astype(np.float64))})
    expected = errors.group_by("user").agg(pl.col("error").mean().alias("expected"))
    mae = ratings.filter((pl.col("metric") == "mae") & pl.col("user").is_not_null()).join(expected, on="user")
    assert mae.height == expected.height > 100
    np.testing.assert_allclose(mae.get_column("value").to_numpy(), mae.get_column("expected").to_numpy(), rtol=1e-12)


def test_rating_error_sums_merge_to_the_whole_micro_values():
    """The micro MAE and RMSE from the exact sums of disjoint parts, merged in any order, are the
    whole's, and equal the plain formulas (to rounding: the exact sums round once)."""
    from recsys_eval.measure.rating import ErrorSums

    errors = np.random.default_rng(4).normal(scale=1.3, size=1001)
    whole = ErrorSums.of(errors).values()
    parts = [ErrorSums.of(part) for part in np.array_split(errors, 7)]
    assert ErrorSums.merge(parts[::-1]).values() == whole == ErrorSums.merge(parts).values()
    assert whole["mae"] == pytest.approx(np.abs(errors).mean(), rel=1e-15)
    assert whole["rmse"] == pytest.approx(np.sqrt((errors ** 2).mean()), rel=1e-15)


def test_run_exposure_states_of_chunks_add_up_to_the_whole(synthetic_ratings):
    """A run's exposure and PopRSP/PopREO counts added from chunks of users, each with its users'
    train rows and the whole train's item side, sum (in any order) to the counts of the whole run."""
    from recsys_eval.data import load_file
    from recsys_eval.measure.beyond import run_exposure, whole_item_side
    from recsys_eval.measure.lists import with_item_side
    from recsys_eval.recommend import make_recommender, recommend_top_k
    from recsys_eval.split import holdout

    data = load_file(synthetic_ratings, {"user": "userId", "item": "movieId", "rating": "rating"})
    split = holdout(data, 0.2, per_user=True, seed=1)
    model = make_recommender("popular", {}).fit(split.train)
    names, cutoffs = ["catalog_coverage", "gini", "prediction_coverage", "pop_rsp"], [3, 10]
    params = {"head_share": 0.2}
    users = np.arange(data.n_users)
    whole = run_exposure(data.n_items, cutoffs, split.train, names, params)
    whole.add(recommend_top_k(model, split.train, users, 10))
    side = whole_item_side(split.train, data.n_items, names, params)
    states = []
    for chunk in np.array_split(users, 5):
        rows = split.train.frame.filter(pl.col("user").is_in(chunk))
        train = with_item_side(data.with_frame(rows), side)
        part = run_exposure(data.n_items, cutoffs, train, names, params)
        part.add(recommend_top_k(model, split.train, chunk, 10))
        states.append(pickle.loads(pickle.dumps(part.state())))
    merged = run_exposure(data.n_items, cutoffs, with_item_side(data.with_frame(data.frame.clear()), side), names,
                          params)
    for state in states[::-1]:
        merged.add_state(state)
    assert merged.values(names) == whole.values(names)
    assert np.array_equal(merged.counts, whole.counts) and np.array_equal(merged.ranked, whole.ranked)


def test_spark_validation_of_the_protocol_study_no_longer_names_its_metrics():
    """``validate --set engine.name=spark`` on the shipped protocol study still names the two kNN
    recommenders that need the whole train matrix, and none of its metrics (nor the bias
    predictor, whose biases are broadcast)."""
    config = load_config(EXPERIMENTS / "ml100k-protocols.toml", ["engine.name=spark"])
    with pytest.raises(ConfigError) as refused:
        check_names(config)
    message = str(refused.value)
    assert "recommender 'user_knn'" in message and "recommender 'user_knn_rating'" in message
    assert "metric" not in message and "'bias'" not in message
    for name in ("catalog_coverage", "novelty", "gini", "calibration", "arp", "aplt", "pop_reo", "mae", "rmse"):
        assert name not in message


def _rated_files(tmp_path: Path, seed: int, string_ids: bool) -> dict[str, str]:
    """TEST ratings and a RUN of predicted ratings (scores near them, ties among them), with users
    whose list scores none, one or all of their test items, and RUN users not in TEST."""
    rng = np.random.default_rng(seed)
    test, run = [], []
    for u in range(60):
        items = rng.choice(30, size=rng.integers(1, 7), replace=False)
        ratings = rng.integers(1, 6, size=len(items)).astype(float)
        test += [(u, int(i), r) for i, r in zip(items, ratings, strict=True)]
        scored = items[: rng.integers(0, len(items) + 1)]
        listed = np.union1d(scored, rng.choice(30, size=rng.integers(0, 6), replace=False))
        guesses = {int(i): float(np.clip(r + rng.normal(scale=0.8), 1, 5).round(1)) for i, r in zip(items, ratings,
                                                                                               strict=True)}
        run += [(u, int(i), guesses.get(int(i), float(rng.integers(1, 6)))) for i in listed]
    run += [(70, 3, 2.5)]
    frames = {"test": pl.DataFrame(test, schema=["user", "item", "rating"], orient="row"),
              "sys": pl.DataFrame(run, schema=["user", "item", "score"], orient="row")}
    paths = {}
    for name, frame in frames.items():
        if string_ids:
            frame = frame.with_columns(pl.format("u{}", "user").alias("user"))
        path = tmp_path / f"{name}.parquet"
        frame.write_parquet(path)
        paths[name] = str(path)
    return paths


@pytest.mark.spark
@pytest.mark.parametrize(("partitions", "string_ids"), [(1, False), (3, True), (7, False)])
def test_evaluate_rating_metrics_on_spark_equal_local(spark, tmp_path, partitions, string_ids):
    """``evaluate --engine spark`` with rating metrics: per-user rows numbered as the local engine
    numbers them, the micro MAE and RMSE from the partitions' error sums, the same summary.csv."""
    from recsys_eval.data.runs import load_run
    from recsys_eval.engine.runs import evaluate_spark
    from recsys_eval.pipeline.evaluate import evaluate_run
    from recsys_eval.pipeline.options import MeasureOptions

    paths = _rated_files(tmp_path, partitions, string_ids)
    names = ["mae", "ndcg", "rmse", "kendall", "spearman", "ndpm", "hit"]
    evaluate_spark(spark, paths["test"], paths["sys"], str(tmp_path / "spark"), metrics=names, k=[1, 5],
                   threshold=3.0, partitions=partitions)
    evaluate_run(load_run(paths["test"], paths["sys"], threshold=3.0), MeasureOptions.of(names, [1, 5], threshold=3.0),
                 system="sys", out=tmp_path / "local", force=False, source=paths["test"])
    a, b = (ResultsFolder.open(tmp_path / side).scan_per_unit().collect() for side in ("local", "spark"))
    joined = a.join(b, on=KEYS, how="full", nulls_equal=True, suffix="_spark")
    assert a.height == b.height and joined.get_column("value_spark").null_count() == 0
    assert np.array_equal(joined.get_column("value").to_numpy(), joined.get_column("value_spark").to_numpy(),
                          equal_nan=True)
    assert b.filter(pl.col("user").is_null()).get_column("metric").sort().to_list() == ["mae", "rmse"]
    assert set(b.filter(pl.col("value").is_not_nan()).get_column("metric")) >= set(names)
    assert (tmp_path / "local" / "summary.csv").read_bytes() == (tmp_path / "spark" / "summary.csv").read_bytes()
    manifest = ResultsFolder.open(tmp_path / "spark").manifest
    assert manifest.partitions[-1] == f"per_unit/fold=0/protocol=AI+AR+AN/system=sys/part-{partitions:05d}.parquet"


@pytest.mark.spark
def test_evaluate_on_spark_refuses_what_it_cannot_measure(spark, tmp_path):
    from recsys_eval.engine.runs import evaluate_spark
    from recsys_eval.errors import DataError

    paths = _rated_files(tmp_path, 2, False)
    with pytest.raises(ConfigError, match=r"arp needs train interactions"):
        evaluate_spark(spark, paths["test"], paths["sys"], str(tmp_path / "a"), metrics=["ndcg", "arp"])
    pl.read_parquet(paths["test"]).drop("rating").write_parquet(tmp_path / "unrated.parquet")
    with pytest.raises(DataError, match="rating metrics need a 'rating' column in TEST and a 'score' column in RUN"):
        evaluate_spark(spark, str(tmp_path / "unrated.parquet"), paths["sys"], str(tmp_path / "b"), metrics=["mae"])
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
