"""The analysis's paired tests as a Spark job (recsys_eval.engine.paired) give the local analysis's
``paired_tests`` table to the last bit: on a run's results folder with every test (the permutation
test's sign flips and the relative difference's bootstrap included) on 1, 3 and 7 partitions, end
to end through ``run`` on the Spark engine, and on hand-made per-unit files with text user ids."""

from __future__ import annotations

import importlib.util

import numpy as np
import polars as pl
import pytest
from config_text import config_text, ratings_file, split_table
from polars.testing import assert_frame_equal

from recsys_eval.compare import TESTS
from recsys_eval.compare.frames import PER_USER_COLUMNS
from recsys_eval.compare.study import analyse, part_paired_tests
from recsys_eval.core.results import PER_UNIT_SCHEMA, ResultsFolder
from recsys_eval.experiment.runner import run_experiment
from recsys_eval.measure.aggregate import per_user
from recsys_eval.pipeline.config import load_config

pytestmark = pytest.mark.spark

RECS = ["popular", "random", {"name": "als", "params": {"factors": 8, "iterations": 3}}]
ORDER = ["protocol", "fold", "metric", "k", "test", "system", "baseline"]


def _config(tmp_path, data, engine: str, partitions: int = 3, report: bool = False):
    """Two folds, two protocols (their draws seeded apart), a binary metric (McNemar's test), a
    metric without a cutoff, f1 beside its auxiliary relevant counts; 60 resamples."""
    path = tmp_path / f"{engine}-{partitions}.toml"
    path.write_text(config_text(
        "paired", seed=9, dataset=ratings_file(data), split=split_table("kfold", k=2, per_user=True),
        protocols=["AI+AR+AN", "AI+1R+NN20"], recommenders=RECS,
        metrics={"names": ["hit", "ndcg", "rr", "f1"], "k": [5, 10], "relevance_threshold": 4},
        output={"report": report, "save_splits": False}, engine={"name": engine, "partitions": partitions},
        compare={"tests": list(TESTS), "resamples": 60}))
    return path


@pytest.fixture(scope="module")
def local_run(tmp_path_factory, synthetic_ratings):
    tmp = tmp_path_factory.mktemp("paired")
    return run_experiment(load_config(path := _config(tmp, synthetic_ratings, "local")), path.read_text(),
                          out_root=tmp / "out", quiet=True).folder


def _tables(folder, out, runner=None) -> pl.DataFrame:
    return analyse(folder, baseline="popular", out=out, distributions=False, paired_runner=runner)["paired_tests"]


@pytest.mark.parametrize("partitions", [1, 3, 7])
def test_paired_tests_on_spark_equal_the_local_analysis(spark, tmp_path, local_run, partitions):
    from recsys_eval.engine.paired import SparkPairedTests

    local = _tables(local_run, tmp_path / "local")
    on_spark = _tables(local_run, tmp_path / "spark", SparkPairedTests("local[2]", partitions))
    assert set(local.get_column("test")) == set(TESTS)
    assert local.select("fold", "protocol").unique().height == 4 and local.height > 100
    assert local.get_column("p_value").is_not_nan().sum() > 100  # tests that ran, not a table of NaN
    assert local.get_column("relative_lower").is_not_nan().any()
    assert_frame_equal(on_spark, local, check_exact=True)  # every bit, rows in the same order
    # analyse wrote the Spark job's table as its own
    assert_frame_equal(pl.read_parquet(tmp_path / "spark" / "paired_tests.parquet"), local, check_exact=True)


def test_a_run_on_spark_analyses_on_spark(spark, tmp_path, synthetic_ratings, monkeypatch):
    """`run` on the Spark engine hands its analysis the Spark runner; the table is the local run's."""
    from recsys_eval.engine import paired

    calls = []
    original = paired.paired_tests_on_spark
    monkeypatch.setattr(paired, "paired_tests_on_spark", lambda *a, **k: calls.append(k) or original(*a, **k))
    folders = {engine: run_experiment(load_config(path := _config(tmp_path, synthetic_ratings, engine, report=True)),
                                      path.read_text(), out_root=tmp_path / engine, quiet=True).folder
               for engine in ("local", "spark")}
    assert len(calls) == 1 and calls[0]["partitions"] == 3
    tables = {engine: ResultsFolder.open(folder).table("paired_tests") for engine, folder in folders.items()}
    assert tables["local"].height > 100
    assert_frame_equal(tables["spark"], tables["local"], check_exact=True)


def _per_unit() -> pl.DataFrame:
    """Three systems over 70 text-id users; 1 to 3 units per user; NaN values; the third system
    lacks one metric (tested among the two that have it); a binary metric."""
    rng = np.random.default_rng(4)
    users = np.sort(rng.choice(500, 70, replace=False))
    units = rng.integers(1, 4, 70)
    user = np.repeat(users, units)
    rows = []
    for system in ("a", "b", "c"):
        for metric, k in (("ndcg", 5), ("ndcg", 10), ("rr", None), ("hit", 5)):
            if system == "c" and metric == "rr":
                continue
            value = (rng.random(len(user)) < 0.4).astype(float) if metric == "hit" else rng.random(len(user))
            value[rng.random(len(user)) < 0.1] = np.nan
            rows.append(pl.DataFrame({
                "system": system, "protocol": "AI+1R+NN20", "fold": "0", "user": [f"u{u:04d}" for u in user],
                "unit": np.arange(len(user)), "metric": metric, "k": pl.Series([k] * len(user), dtype=pl.Int32),
                "value": value}))
    return pl.concat(rows).select(list(PER_UNIT_SCHEMA))


@pytest.mark.parametrize("partitions", [1, 7])
def test_text_user_ids_and_systems_lacking_a_metric(spark, tmp_path, partitions):
    from recsys_eval.engine.paired import paired_tests_on_spark

    per_unit = _per_unit()
    files = []
    for i, chunk in enumerate(per_unit.partition_by("system")):  # files of whole users, as a run writes
        for j, users in enumerate(np.array_split(chunk.get_column("user").unique().sort().to_numpy(), 3)):
            files.append(str(path := tmp_path / f"s{i}-{j}.parquet"))
            chunk.filter(pl.col("user").is_in(users.tolist())).write_parquet(path)
    options = {"baseline": None, "tests": list(TESTS), "correction": "holm", "alpha": 0.05, "n_resamples": 40,
               "seed": 3}
    definitions = {"AI+1R+NN20": {"relevant": "1R"}}
    got = paired_tests_on_spark(spark, files, undefined="skip", options=options, definitions=definitions,
                                partitions=partitions)
    users = per_user(per_unit).select(PER_USER_COLUMNS)
    expected = pl.concat([t for part in users.partition_by("metric") for t in part_paired_tests(part, options,
                                                                                                 definitions)])
    rr = got.filter(pl.col("metric") == "rr").select("system", "baseline").unique().rows()
    assert rr == [("a", "b")]  # c lacks rr
    assert got.filter(pl.col("metric") == "ndcg").select("system", "baseline").unique().height == 3  # all pairs
    assert_frame_equal(got.sort(ORDER, nulls_last=True), expected.sort(ORDER, nulls_last=True), check_exact=True)


def test_the_runner_follows_the_run_engine():
    """A local run's folder is analysed here; a Spark run's on its master and partition count."""
    from recsys_eval.engine.paired import SparkPairedTests

    assert SparkPairedTests.of({"name": "local"}) is None
    spark_run = SparkPairedTests.of({"name": "spark", "master": "local[3]", "partitions": 5})
    if importlib.util.find_spec("pyspark") is None:  # a Spark run's folder analysed where PySpark is absent
        assert spark_run is None
    else:
        assert spark_run == SparkPairedTests("local[3]", 5)


CAPPED = """
import json, sys
from recsys_eval.compare import TESTS
from recsys_eval.core.spark import spark_session
from recsys_eval.engine.paired import paired_tests_on_spark
from recsys_eval.engine.stats import per_user_table

files, out = sys.argv[1].split(","), sys.argv[2]
spark = spark_session("local[2]")
options = {"baseline": "a", "tests": list(TESTS), "correction": "holm", "alpha": 0.05, "n_resamples": 30, "seed": 1}
paired_tests_on_spark(spark, files, undefined="skip", options=options, definitions={}, partitions=3).write_parquet(out)
try:
    collected = f"collected {per_user_table(spark, files, 'skip', 3).toArrow().num_rows} per-user rows"
except Exception as exc:
    collected = str(exc)
print(json.dumps({"limit": spark.sparkContext.getConf().get("spark.driver.maxResultSize"), "collect": collected}))
"""


def test_a_capped_driver_tests_what_it_could_not_collect(spark, tmp_path):
    """Under a 1 MB cap on what a job may hand the driver, far below the per-user values, the job
    gives the local tests; collecting those values, the counter-test, is refused."""
    import json
    import os
    import subprocess
    import sys

    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(8)
    users = np.arange(8000)
    files = []
    for system in ("a", "b"):
        for part, chunk in enumerate(np.array_split(users, 2)):
            frame = pl.concat([pl.DataFrame({
                "system": system, "protocol": "AI+AR+AN", "fold": "0", "user": chunk, "unit": chunk,
                "metric": "ndcg", "k": pl.Series([k] * len(chunk), dtype=pl.Int32),
                "value": rng.random(len(chunk))}) for k in (5, 10, 20, 50)]).select(list(PER_UNIT_SCHEMA))
            files.append(str(path := tmp_path / f"{system}-{part}.parquet"))
            frame.write_parquet(path)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("spark.driver.maxResultSize 1m\nspark.driver.memory 512m\n")
    done = subprocess.run([sys.executable, "-c", CAPPED, ",".join(files), str(tmp_path / "tests.parquet")],
                          capture_output=True, text=True, env={**os.environ, "SPARK_CONF_DIR": str(conf)}, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["limit"] == "1m" and "maxResultSize" in outcome["collect"]
    per_unit = pl.read_parquet(files)
    options = {"baseline": "a", "tests": list(TESTS), "correction": "holm", "alpha": 0.05, "n_resamples": 30,
               "seed": 1}
    # one BLAS thread, as PySpark's workers run (OMP_NUM_THREADS = spark.task.cpus): at 8,000 users
    # OpenBLAS splits the bootstrap's matrix product over threads, which moves its last bits
    # (docs/SPARK.md#paired-tests)
    with threadpool_limits(limits=1, user_api="blas"):
        expected = pl.concat(part_paired_tests(per_user(per_unit).select(PER_USER_COLUMNS), options, {}))
    got = pl.read_parquet(tmp_path / "tests.parquet")
    assert got.height == 4 * 4  # ndcg at 4 cutoffs x the t, Wilcoxon, sign and permutation tests (no McNemar)
    assert_frame_equal(got.sort(ORDER), expected.sort(ORDER), check_exact=True)
