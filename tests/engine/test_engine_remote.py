"""``run --engine spark`` into a results folder at a URI (recsys_eval.engine.remote): Spark writes
the per-unit files there, the driver copies the rest, its manifest last. Tested at a ``file://``
URI (what Hadoop's file systems reach without a cluster) against the same run into a local
folder: the same per-unit values, summary.csv byte for byte, the same files; and what reads the
per-unit files on the driver is refused before anything runs, saying how to do without it."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

from config_text import config_text, ratings_file, split_table
from recsys_eval.cli import main
from recsys_eval.core.results import ResultsFolder
from recsys_eval.core.uris import is_uri, uri
from recsys_eval.engine.remote import STAGING_PREFIX, check_remote_run
from recsys_eval.errors import ConfigError, DataError, OutputError
from recsys_eval.experiment.runner import run_experiment
from recsys_eval.pipeline.config import load_config
from recsys_eval.pipeline.sink import RunSink

KEYS = ["system", "protocol", "fold", "user", "unit", "metric", "k"]


def _config(tmp_path: Path, data: Path | str, *, engine: str = "spark", report: bool = False) -> Path:
    path = tmp_path / f"{engine}-{report}.toml"
    path.write_text(config_text(
        "remote", seed=3, dataset=ratings_file(data), split=split_table("kfold", k=2, per_user=True),
        protocols=["AI+AR+AN", {"name": "TI+1R+NN20", "sampling": "popularity"}],
        recommenders=["popular", "random", {"name": "item_knn", "params": {"k": 20}}],
        metrics={"names": ["precision", "ndcg", "auc", "catalog_coverage"], "k": [1, 5], "relevance_threshold": 4},
        output={"report": report, "save_splits": True}, engine={"name": engine, "partitions": 3},
        compare={"interval": "bootstrap", "resamples": 30}))
    return path


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts))


@pytest.mark.spark
def test_a_run_at_a_uri_is_the_run_in_a_local_folder(spark, tmp_path, synthetic_ratings):
    path = _config(tmp_path, synthetic_ratings)
    config = load_config(path)
    local = run_experiment(config, path.read_text(), out_root=tmp_path / "local", quiet=True).folder
    with pytest.raises(SystemExit) as exit_info:  # as a user gives it: --out, a Path to typer
        main(["run", str(path), "--out", f"file://{tmp_path / 'remote'}", "--quiet"])
    assert exit_info.value.code in (0, None)
    (at,) = (tmp_path / "remote" / "remote").iterdir()
    a, b = ResultsFolder.open(local), ResultsFolder.open(at)
    x = a.scan_per_unit().collect().sort(KEYS)
    y = b.scan_per_unit().collect().sort(KEYS)
    assert x.height == y.height and x.select(KEYS).equals(y.select(KEYS))
    values = x.get_column("value").to_numpy(), y.get_column("value").to_numpy()
    assert np.array_equal(np.isnan(values[0]), np.isnan(values[1]))
    assert np.array_equal(values[0][~np.isnan(values[0])], values[1][~np.isnan(values[1])])
    assert (a.path / "summary.csv").read_bytes() == (b.path / "summary.csv").read_bytes()
    assert a.table("exposure_bins").equals(b.table("exposure_bins"))
    # every per-unit file in the manifest, in the layout; nothing of Spark's beside them (no
    # _SUCCESS, no .crc checksum); the other files the local folder's (timings and log aside)
    manifest = json.loads((b.path / "manifest.json").read_text())
    per_unit = [f for f in _files(b.path) if f.startswith("per_unit/")]
    assert per_unit == sorted(manifest["partitions"]) and all(f.endswith(".parquet") for f in per_unit)
    others = {f for f in _files(b.path) if not f.startswith("per_unit/")}
    assert others == {f for f in _files(a.path) if not f.startswith("per_unit/")}
    assert not [p for p in b.path.rglob("*") if p.name.endswith(".crc") or p.name.startswith("_")]


@pytest.mark.spark
def test_a_failed_run_at_a_uri_leaves_neither_its_staging_nor_its_folder(spark, tmp_path, synthetic_ratings,
                                                                        monkeypatch):
    staging_root = tmp_path / "tmp"
    staging_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging_root))
    out = tmp_path / "remote"
    # found by Spark as it reads the data, before it writes at the URI: a (user, item) pair twice
    twice = tmp_path / "twice.csv"
    lines = synthetic_ratings.read_text().splitlines(keepends=True)
    twice.write_text("".join([*lines, lines[1]]))
    with pytest.raises(DataError, match="pairs occur more than once"):
        run_experiment(load_config(_config(tmp_path, twice)), "", out_root=f"file://{out}", quiet=True)
    assert not list(staging_root.glob(f"{STAGING_PREFIX}*"))
    # a full disk once Spark wrote the per-unit files at the URI: the folder there goes too
    written = []

    def full_disk(sink, *args):
        written.extend(out.rglob("*.parquet"))
        raise OutputError("data_stats.csv: the disk is full")

    monkeypatch.setattr(RunSink, "write_data_stats", full_disk)
    with pytest.raises(OutputError, match="the disk is full"):
        run_experiment(load_config(_config(tmp_path, synthetic_ratings)), "", out_root=f"file://{out}", quiet=True)
    assert written, "the run failed after Spark wrote at the URI"
    assert not list(staging_root.glob(f"{STAGING_PREFIX}*"))
    assert not [p for p in out.rglob("*") if p.is_file()]


def test_a_uri_through_pathlib_gets_its_slash_back():
    for given in ("s3a://bucket/key", "hdfs://namenode/r", "abfss://c@a.dfs.core.windows.net/r", "oss://b/r"):
        assert uri(Path(given)) == uri(given) == given  # Path("s3a://b/k") is "s3a:/b/k"
    assert uri(Path("file:///tmp/r")) == "file:/tmp/r"  # file:/path needs no authority: as given to Spark
    for path in ("results", "/tmp/results", "C:/results", Path("/tmp/results")):
        assert uri(path) == str(path)


def test_what_reads_the_folder_on_the_driver_is_refused_at_a_uri(tmp_path, synthetic_ratings):
    assert is_uri("s3a://bucket/results") and is_uri("hdfs:/namenode/results") and is_uri(Path("file:///tmp/r"))
    assert not is_uri("results") and not is_uri("/tmp/results") and not is_uri("C:/results")
    check_remote_run(load_config(_config(tmp_path, synthetic_ratings)), "s3a://b/r", resume=False)
    with pytest.raises(ConfigError) as refused:
        check_remote_run(load_config(_config(tmp_path, synthetic_ratings, engine="local", report=True)),
                         "s3a://b/r", resume=True)
    message = str(refused.value)
    assert "'s3a://b/r' is at a URI" in message and "--engine spark" in message
    assert "--resume" in message and "report = false" in message


@pytest.fixture
def hdfs_like(spark, tmp_path):
    """The session's default file system made a view file system whose one mount, ``/cluster``,
    is a local folder: as on a cluster whose default file system is HDFS, a path Spark is given
    unqualified is not the driver's file, and no ``viewfs://`` URI is a path polars can read.
    Gives the mount's URI."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    settings = {"fs.defaultFS": "viewfs://cluster/", "fs.viewfs.impl.disable.cache": "true",
                "fs.viewfs.mounttable.cluster.link./cluster": f"file://{tmp_path / 'cluster'}"}
    before = {key: conf.get(key) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    yield "viewfs://cluster/cluster"
    for key, value in before.items():
        conf.unset(key) if value is None else conf.set(key, value)


@pytest.mark.spark
def test_a_run_on_a_cluster_whose_default_file_system_is_not_the_drivers(spark, tmp_path, synthetic_ratings,
                                                                         hdfs_like):
    # the split Spark writes, the driver's reads of it (item kNN's train rows, the saved split, the
    # leakage audit), the bootstrap's and the paired tests' reads of per-unit files: every path
    # Spark is given names its file system, so the run into a local folder and the run into the
    # folder at the URI both run, alike
    local_config = _config(tmp_path, synthetic_ratings, report=True)
    local = run_experiment(load_config(local_config), local_config.read_text(), out_root=tmp_path / "local",
                           quiet=True).folder
    (tmp_path / "cluster").mkdir()  # the dataset on the cluster's file system too, read by Spark
    shutil.copy(synthetic_ratings, tmp_path / "cluster" / "ratings.csv")
    path = _config(tmp_path, f"{hdfs_like}/ratings.csv")
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(path), "--out", f"{hdfs_like}/results", "--quiet"])
    assert exit_info.value.code in (0, None)
    (at,) = (tmp_path / "cluster" / "results" / "remote").iterdir()
    a, b = ResultsFolder.open(local), ResultsFolder.open(at)
    x, y = (f.scan_per_unit().collect().sort(KEYS) for f in (a, b))
    assert x.select(KEYS).equals(y.select(KEYS))
    np.testing.assert_array_equal(x.get_column("value").to_numpy(), y.get_column("value").to_numpy())
    assert (a.path / "summary.csv").read_bytes() == (b.path / "summary.csv").read_bytes()
    assert load_config(b.path / "config.toml").dataset.path == f"{hdfs_like}/ratings.csv"
    for table in ("leakage", "leakage_users", "data_stats"):
        assert a.table(table).equals(b.table(table)), table
    saved = sorted(p.relative_to(a.path) for p in (a.path / "splits").rglob("*.parquet"))
    assert len(saved) == 8 and saved == sorted(p.relative_to(b.path) for p in (b.path / "splits").rglob("*.parquet"))
    assert all((a.path / p).read_bytes() == (b.path / p).read_bytes() for p in saved)
    assert not (b.path / "spark_splits").exists()  # the split's scratch at the URI went before the manifest
    assert a.table("paired_tests").height > 0  # a Spark job over the local folder's per-unit files


def test_a_dataset_at_a_uri_is_read_by_spark_or_refused_saying_why(tmp_path, synthetic_ratings):
    from recsys_eval.experiment.checks import check_names

    data = "hdfs://namenode/ratings/ratings.csv"
    config = load_config(_config(tmp_path, data))
    assert config.dataset.path == data  # no local path made of it
    check_names(config)
    with pytest.raises(ConfigError, match=r"dataset.path: the dataset file .* is at a URI, which the Spark engine "
                                          r"reads: set \[engine\] name"):
        check_names(load_config(_config(tmp_path, data, engine="local")))
    official = config.model_copy(update={"split": config.split.model_copy(update={"method": "official", "params": {}})})
    with pytest.raises(ConfigError, match=r"loaded on the driver \(split 'official': its folds are the dataset's own"):
        check_names(official)
