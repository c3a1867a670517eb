"""evaluate on Spark brings no per-unit row to the driver: run under Spark's cap on what a job may
hand back to the driver (``spark.driver.maxResultSize``, here 1 MB, with a 512 MB driver), far below
the per-unit table, it succeeds with the local engine's summary; collecting that table to the
driver, as the driver once did, fails under the same cap (the counter-test)."""

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
