"""evaluate on Spark gives the local engine's per-unit values, whatever the partition count."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest

from recsys_eval.engine import runs as engine_runs
from recsys_eval.engine.runs import evaluate_spark
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.measure import measure, summarize
from recsys_eval.data.runs import load_run

pytestmark = pytest.mark.spark

METRICS = ["precision", "recall", "f1", "ap", "ndcg", "rr", "hit", "half_life", "auc"]
KEYS = ["system", "protocol", "fold", "user", "unit", "metric", "k"]


def _files(tmp_path, seed: int, string_ids: bool = False):
    """Random TEST/RUN/TRAIN with tied scores, users with no RUN list, users without relevant
    items, RUN users not in TEST and train items the RUN ranks."""
    rng = np.random.default_rng(seed)
    n_users, n_items = 40, 25
    rows = []
    for u in range(n_users):
        items = rng.choice(n_items, size=rng.integers(1, 6), replace=False)
        rows += [(u, int(i), float(rng.integers(1, 6))) for i in items]
    test = pl.DataFrame(rows, schema=["user", "item", "rating"], orient="row")
    run_rows = []
    for u in range(n_users + 3):
        if u % 7 == 3:
            continue  # no list: an empty ranking
        items = rng.choice(n_items, size=rng.integers(0, 12), replace=False)
        scores = rng.integers(0, 4, size=len(items)).astype(float)  # many ties
        run_rows += [(u, int(i), s) for i, s in zip(items, scores, strict=True)]
    run = pl.DataFrame(run_rows, schema=["user", "item", "score"], orient="row")
    train = pl.DataFrame({"user": rng.integers(0, n_users + 5, 120), "item": rng.integers(0, n_items + 4, 120)})
    if string_ids:
        test, run, train = (f.with_columns(pl.format("u{}", "user").alias("user")) for f in (test, run, train))
    paths = {}
    for name, frame in (("test", test), ("run", run), ("train", train)):
        path = tmp_path / (f"{name}.parquet" if name != "run" else "sys.csv")
        frame.write_parquet(path) if path.suffix == ".parquet" else frame.write_csv(path)
        paths[name] = str(path)
    return paths


def _local(paths, **options):
    data = load_run(paths["test"], paths["run"], paths["train"], threshold=options.get("threshold"))
    return measure(data.rankings, data.targets, metrics=METRICS, k=[1, 3, 10], gain=options.get("gain", "graded"),
                   ties=options.get("ties", "first"), system="sys", user_ids=data.user_ids)


def _compare(local: pl.DataFrame, spark: pl.DataFrame) -> None:
    assert spark.height == local.height
    joined = local.join(spark, on=KEYS, how="full", nulls_equal=True, suffix="_spark")
    assert joined.filter(pl.col("value").is_null() | pl.col("value_spark").is_null()).height == 0
    a, b = joined.get_column("value").to_numpy(), joined.get_column("value_spark").to_numpy()
    assert np.array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_allclose(a[~np.isnan(a)], b[~np.isnan(b)], rtol=0, atol=1e-12)


@pytest.mark.parametrize(("partitions", "options", "string_ids"), [
    (1, {"threshold": 3.0}, False),
    (3, {"threshold": 3.0, "ties": "average", "gain": "exp"}, True),
    (7, {}, False),
])
def test_same_per_unit_values_as_local(spark, tmp_path, partitions, options, string_ids):
    paths = _files(tmp_path, seed=partitions, string_ids=string_ids)
    out = tmp_path / "out"
    result = evaluate_spark(spark, paths["test"], paths["run"], str(out), train=paths["train"],
                            metrics=METRICS, k=[1, 3, 10], partitions=partitions, **options)
    per_unit = _per_unit(out)
    local = _local(paths, **options)
    _compare(local, per_unit)
    expected = summarize(local)
    got = pl.read_parquet(out / "summary.parquet")
    assert got.select(expected.columns).equals(expected)  # exact sums: the same bits, any partitioning
    assert result.summary.equals(got)
    assert any("have no ranked list" in n for n in result.notes)
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no temporary folder left


def test_partition_count_changes_no_value(spark, tmp_path):
    paths = _files(tmp_path, seed=11)
    tables = []
    for n in (1, 5):
        out = tmp_path / f"out{n}"
        evaluate_spark(spark, paths["test"], paths["run"], f"file://{out}", metrics=METRICS, k=[2, 5],
                       threshold=2.0, partitions=n)
        tables.append(_per_unit(out).sort(KEYS, nulls_last=False))
    assert tables[0].equals(tables[1])


def _per_unit(out) -> pl.DataFrame:
    """The per-unit table of a results folder, read as the docs say any folder reads."""
    from recsys_eval.core.results import PER_UNIT_HIVE_SCHEMA

    return pl.scan_parquet(f"{out}/per_unit/**/*.parquet", hive_schema=PER_UNIT_HIVE_SCHEMA).collect()


def test_results_folder_is_the_local_engines(spark, tmp_path):
    """The same files as the local engine's results folder (no checksum or marker files), a
    byte-identical summary, and a folder that ResultsFolder, report and compare open."""
    from recsys_eval.core.results import ResultsFolder
    from recsys_eval.pipeline.evaluate import evaluate_run
    from recsys_eval.pipeline.options import MeasureOptions

    paths = _files(tmp_path, seed=21)
    spark_out = tmp_path / "spark"
    evaluate_spark(spark, paths["test"], paths["run"], str(spark_out), train=paths["train"], metrics=METRICS,
                   k=[1, 3, 10], threshold=3.0, partitions=4)
    data = load_run(paths["test"], paths["run"], paths["train"], threshold=3.0)
    evaluate_run(data, MeasureOptions.of(METRICS, [1, 3, 10], threshold=3.0), system="sys", out=tmp_path / "local",
                 force=False, source=paths["test"])
    files = sorted(str(p.relative_to(spark_out)) for p in spark_out.rglob("*") if p.is_file())
    assert files == ["manifest.json", *[f"per_unit/fold=0/protocol=AI+AR+AN/system=sys/part-{i:05d}.parquet"
                                        for i in range(4)], "summary.csv", "summary.parquet"]
    for name in ("summary.csv", "summary.parquet"):
        assert (spark_out / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    folder = ResultsFolder.open(spark_out)
    assert folder.manifest.engine["name"] == "spark"
    assert folder.manifest.partitions == files[1:5]
    local = ResultsFolder.open(tmp_path / "local")
    for key in ("users", "items", "folds", "systems", "protocols", "metrics", "k"):
        assert getattr(folder.manifest, key) == getattr(local.manifest, key), key
    assert folder.scan_per_unit().collect().sort(KEYS).equals(local.scan_per_unit().collect().sort(KEYS))


def _without_places(message: str) -> str:
    """A reader's message without where the row is (a line of the file locally, a row of a partition
    on Spark) and the file's folder."""
    message = re.sub(r"\((first at )?(line|row) [^)]*\)|(first at )?(line|row) [\d,]+:? ?", "", message)
    return re.sub(r"/\S*/", "", message)


def _bad_files(tmp_path, paths):
    run = pl.read_csv(paths["run"])
    pl.concat([run, run.head(1)]).write_csv(tmp_path / "dup.csv")
    run.with_columns(pl.when(pl.col("item") == 3).then(float("nan")).otherwise(pl.col("score")).alias("score")) \
        .write_parquet(tmp_path / "nan.parquet")
    pl.DataFrame({"user": [0, 0, 1], "item": [1, 2, 1], "rank": [1, 3, 1]}).write_csv(tmp_path / "ranks.csv")
    pl.DataFrame({"user": [0, 5, 1], "item": [1, None, 1], "score": [1.0, 2.0, 3.0]}).write_parquet(
        tmp_path / "null.parquet")
    pl.DataFrame({"user": [0, 1], "item": [1, 2], "score": ["0.5", "high"]}).write_csv(tmp_path / "text.csv")
    return [("run", tmp_path / name, {}) for name in ("dup.csv", "nan.parquet", "ranks.csv", "null.parquet",
                                                     "text.csv")] + [("run", paths["run"], {"threshold": 9.0})]


def test_bad_input_gets_the_local_message_and_leaves_nothing(spark, tmp_path, monkeypatch):
    paths = _files(tmp_path, seed=2)
    out = tmp_path / "out"
    for _, run, options in _bad_files(tmp_path, paths):
        with pytest.raises(DataError) as local:
            load_run(paths["test"], run, **options)
        with pytest.raises(DataError) as on_spark:
            evaluate_spark(spark, paths["test"], str(run), str(out), partitions=2, **options)
        assert _without_places(str(on_spark.value)) == _without_places(str(local.value))
        assert not out.exists() and not any(p.name.startswith(".") for p in tmp_path.iterdir())
    # past the driver's sample, the partitions find the same faults with the same message
    # (counts and places are the partition's)
    monkeypatch.setattr(engine_runs, "SAMPLE_ROWS", 1)
    for _, run, options in _bad_files(tmp_path, paths)[1:]:
        with pytest.raises(DataError) as local:
            load_run(paths["test"], run, **options)
        with pytest.raises(DataError) as on_spark:
            evaluate_spark(spark, paths["test"], str(run), str(out), partitions=2, **options)
        digits = re.compile(r"[\d,]+")
        assert digits.sub("N", _without_places(str(on_spark.value))) == digits.sub("N", _without_places(str(local.value)))
    with pytest.raises(DataError, match=r"TEST .*missing.csv: no such file"):
        evaluate_spark(spark, str(tmp_path / "missing.csv"), paths["run"], str(out))
    with pytest.raises(ConfigError, match=r"novelty needs train interactions"):
        evaluate_spark(spark, paths["test"], paths["run"], str(out), metrics=["novelty"])
    assert not out.exists()


def test_existing_output_needs_force(spark, tmp_path):
    paths = _files(tmp_path, seed=3)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ConfigError, match="exists"):
        evaluate_spark(spark, paths["test"], paths["run"], str(out))
    evaluate_spark(spark, paths["test"], paths["run"], str(out), force=True)
    assert (out / "summary.csv").exists()


def test_cli_engine_spark(spark, tmp_path, capsys):
    from recsys_eval.cli import main

    paths = _files(tmp_path, seed=5)
    args = ["evaluate", "--test", paths["test"], "--run", paths["run"], "--train", paths["train"],
            "--threshold", "3", "--metrics", "precision,ndcg,auc", "--k", "1,3"]
    for engine, out in (("local", tmp_path / "local"), ("spark", tmp_path / "spark")):
        with pytest.raises(SystemExit) as exit_info:
            main([*args, "--out", str(out), "--engine", engine, "--master", "local[2]", "--partitions", "3"])
        assert exit_info.value.code in (0, None)
    assert "ndcg@3" in capsys.readouterr().out
    local = (tmp_path / "local" / "summary.csv").read_bytes()
    assert (tmp_path / "spark" / "summary.csv").read_bytes() == local  # exact sums: the same bits
