"""evaluate and run on Spark bring no per-unit row to the driver: run under Spark's cap on what a
job may hand back to the driver (``spark.driver.maxResultSize``, here 1 MB, with a 512 MB driver),
far below the per-unit table, they succeed with the local engine's summary; collecting that table
to the driver, as the driver once did, fails under the same cap (the counter-test). ``run`` with
``spark_als`` fits from the split Spark wrote and ships its users' factors as rows: under the same
cap, no Spark job hands the driver the train side (which collected would be larger than the cap
too) nor the user factors; and the driver reads no row of the split Spark wrote
(``recsys_eval.engine.inputs.ROW_READS`` stays empty): popular fits from Spark's item counts, the
fold's item totals, data statistics, leakage audit and saved split are Spark jobs, all equal to
the local engine's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import polars as pl
import pytest

from recsys_eval.core.results import PER_UNIT_HIVE_SCHEMA

pytestmark = pytest.mark.spark

SCRIPT = textwrap.dedent("""
    import json, sys
    from recsys_eval.core.spark import spark_session
    from recsys_eval.engine.runs import evaluate_spark

    test, run, out = sys.argv[1:4]
    spark = spark_session("local[2]")
    result = evaluate_spark(spark, test, run, out, metrics=["precision", "ndcg", "ap"], k=[5, 10, 20],
                            partitions=4)
    try:
        rows = spark.read.parquet(out + "/per_unit").toArrow().num_rows
        collected = f"collected {rows} rows"
    except Exception as exc:
        collected = str(exc)
    print(json.dumps({"limit": spark.sparkContext.getConf().get("spark.driver.maxResultSize"),
                      "summary": result.summary.write_csv(), "collect": collected}))
""")


RUN_SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from recsys_eval.core.spark import spark_session
    from recsys_eval.engine import inputs
    from recsys_eval.experiment.runner import run_experiment
    from recsys_eval.pipeline.config import load_config
    from recsys_eval.recommend import spark_als
    from recsys_eval.recommend.spark_als import SparkALS

    def collected(model):
        raise AssertionError("the driver collected spark_als's user factors")

    def fit_on_spark(model, train, fit=SparkALS.fit):
        assert any(side is train for side, _ in spark_als._ON_SPARK), "spark_als fitted on the driver's train"
        return fit(model, train)

    SparkALS.user_factors = property(collected)
    SparkALS.fit = fit_on_spark
    path, out, ratings = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    spark = spark_session("local[2]")
    folder = run_experiment(load_config(path), path.read_text(), out_root=Path(out), quiet=True).folder
    outcome = {"limit": spark.sparkContext.getConf().get("spark.driver.maxResultSize"), "folder": str(folder),
               "row_reads": inputs.ROW_READS}
    for what, uri in (("per_unit", str(folder) + "/per_unit"), ("ratings", ratings)):
        try:
            frame = spark.read.parquet(uri) if what == "per_unit" else spark.read.csv(uri, header=True)
            outcome[what] = f"collected {frame.toArrow().num_rows} rows"
        except Exception as exc:
            outcome[what] = str(exc)
    print(json.dumps(outcome))
""")


def _inputs(tmp_path, users: int = 6000) -> tuple[str, str]:
    rng = np.random.default_rng(3)
    test = pl.DataFrame({"user": np.repeat(np.arange(users), 5), "item": rng.integers(0, 500, users * 5)}).unique()
    run = pl.DataFrame({"user": np.repeat(np.arange(users), 30), "item": np.tile(np.arange(30), users),
                        "score": rng.random(users * 30)})
    test.write_parquet(tmp_path / "test.parquet")
    run.write_parquet(tmp_path / "run.parquet")
    return str(tmp_path / "test.parquet"), str(tmp_path / "run.parquet")


def test_a_capped_driver_evaluates_what_it_could_not_collect(spark, tmp_path):  # spark: skips without Java or the extra
    from recsys_eval.data.runs import load_run
    from recsys_eval.measure import measure, summarize

    test, run = _inputs(tmp_path)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.driver.maxResultSize 1m\nspark.driver.memory 512m\n")
    done = subprocess.run([sys.executable, "-c", SCRIPT, test, run, str(tmp_path / "out")], capture_output=True,
                          text=True, env={**os.environ, "SPARK_CONF_DIR": str(conf)}, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["limit"] == "1m"
    per_unit = pl.scan_parquet(f"{tmp_path}/out/per_unit/**/*.parquet", hive_schema=PER_UNIT_HIVE_SCHEMA).collect()
    # larger than the cap without its label columns (constant: polars holds each once; Spark's
    # collect would carry them in every row besides)
    assert per_unit.drop("fold", "protocol", "system").estimated_size() > 1 << 20
    assert "maxResultSize" in outcome["collect"]  # the counter-test: collecting it is refused
    data = load_run(test, run)
    local = summarize(measure(data.rankings, data.targets, metrics=["precision", "ndcg", "ap"], k=[5, 10, 20],
                              system="run", user_ids=data.user_ids))
    got = pl.read_parquet(tmp_path / "out" / "summary.parquet")
    assert got.select(local.columns).equals(local.cast(got.select(local.columns).schema))


def _ratings(tmp_path, users: int = 6000) -> str:
    """Ratings of ``users`` users, 25 each out of 400 items, in a CSV with MovieLens' columns."""
    rng = np.random.default_rng(5)
    items = np.concatenate([rng.choice(400, 25, replace=False) for _ in range(users)])
    frame = pl.DataFrame({"userId": np.repeat(np.arange(users), 25), "movieId": items,
                          "rating": rng.integers(1, 6, users * 25).astype(float),
                          "timestamp": rng.integers(0, 10**6, users * 25)})
    frame.write_csv(tmp_path / "ratings.csv")
    return str(tmp_path / "ratings.csv")


@pytest.mark.parametrize("partitions", [2, 5])
def test_a_capped_driver_runs_what_it_could_not_collect(spark, tmp_path, partitions):
    from config_text import HOLDOUT, config_text, ratings_file

    from recsys_eval.core.results import ResultsFolder
    from recsys_eval.experiment.runner import run_experiment
    from recsys_eval.pipeline.config import load_config

    ratings = _ratings(tmp_path)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.driver.maxResultSize 1m\nspark.driver.memory 512m\n")
    paths = {}
    for engine in ("local", "spark"):
        paths[engine] = tmp_path / f"{engine}.toml"
        paths[engine].write_text(config_text(
            "capped", seed=3, dataset=ratings_file(ratings), split=HOLDOUT, protocols=["AI+AR+AN"],
            recommenders=["popular", {"name": "spark_als", "params": {"factors": 4, "iterations": 2}}],
            metrics={"names": ["precision", "ndcg", "ap"], "k": [5, 10, 20], "relevance_threshold": 4},
            output={"report": False, "save_splits": True}, engine={"name": engine, "partitions": partitions}))
    done = subprocess.run([sys.executable, "-c", RUN_SCRIPT, str(paths["spark"]), str(tmp_path / "spark"), ratings],
                          capture_output=True, text=True, env={**os.environ, "SPARK_CONF_DIR": str(conf)},
                          timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["limit"] == "1m"
    assert outcome["row_reads"] == []
    capped = ResultsFolder.open(outcome["folder"])
    per_unit = capped.scan_per_unit().collect()
    assert per_unit.drop("fold", "protocol", "system").estimated_size() > 1 << 20
    assert "maxResultSize" in outcome["per_unit"]  # the counter-tests: the per-unit table and the
    assert "maxResultSize" in outcome["ratings"]  # ratings (the train side is 80% of them) are refused
    local = ResultsFolder.open(run_experiment(load_config(paths["local"]), paths["local"].read_text(),
                                              out_root=tmp_path / "local", quiet=True).folder)
    keys = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
    assert local.scan_per_unit().collect().sort(keys).equals(per_unit.sort(keys).select(
        local.scan_per_unit().collect_schema().names()))
    assert (local.path / "summary.csv").read_bytes() == (capped.path / "summary.csv").read_bytes()
    # what the run reports of the split, counted by Spark: the data statistics, the leakage audit
    # (its per-user table streamed from Spark's files) and the saved split, the local engine's
    for table in ("data_stats", "leakage", "leakage_users"):
        assert local.table(table).equals(capped.table(table)), table
    assert capped.table("leakage_users").height > 5000
    saved = sorted(p.relative_to(local.path) for p in (local.path / "splits").rglob("*.*"))
    assert saved == sorted(p.relative_to(capped.path) for p in (capped.path / "splits").rglob("*.*"))
    for name in saved:
        if name.suffix == ".parquet":
            assert pl.read_parquet(local.path / name).equals(pl.read_parquet(capped.path / name)), name
        else:
            assert (local.path / name).read_bytes() == (capped.path / name).read_bytes(), name
