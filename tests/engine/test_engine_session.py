"""Spark sessions: missing PySpark, missing Java and an unreachable master give one clear error.
These run without Java (no session is started)."""

from __future__ import annotations

import socket
import sys

import pytest

from config_text import config_text, ratings_file, split_table
from recsys_eval.core import spark as engine
from recsys_eval.core.spark import SparkError, check_master, spark_session


def test_missing_pyspark_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark raises ImportError
    with pytest.raises(SparkError, match=r"needs pyspark.*recsys-eval\[spark\].*uv sync --extra spark"):
        spark_session("local[1]")


def test_missing_java_names_the_runtime(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkError, match="no 'java' on PATH.*openjdk-17-jre-headless"):
        engine.java_executable()
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(SparkError, match="JAVA_HOME is .*nowhere"):
        engine.java_executable()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nobody listens there


def test_unreachable_master_is_refused_before_the_jvm_starts():
    port = _closed_port()
    with pytest.raises(SparkError, match=rf"spark://127.0.0.1:{port}' is unreachable within 2 s"):
        check_master(f"spark://127.0.0.1:{port}", timeout=2)


@pytest.mark.parametrize("master", ["", "local[x]", "spark://nohostport", "spark://host:"])
def test_malformed_master(master):
    with pytest.raises(SparkError, match="Spark master"):
        check_master(master)


def test_reachable_master_passes():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        check_master(f"spark://127.0.0.1:{server.getsockname()[1]}", timeout=2)
    check_master("yarn")
    check_master("local[*]")


def test_an_experiment_on_spark_without_pyspark_names_the_extra(monkeypatch, tmp_path, synthetic_ratings):
    from recsys_eval.pipeline.config import load_config
    from recsys_eval.experiment.runner import run_experiment

    config = tmp_path / "c.toml"
    config.write_text(config_text("c", dataset=ratings_file(synthetic_ratings, timestamp=False),
                                  split=split_table("holdout", fraction=0.2), metrics={"names": ["ndcg"]},
                                  engine={"name": "spark"}))
    for module in ("pyspark", "pyspark.sql"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(SparkError, match=r"needs pyspark.*recsys-eval\[spark\]"):
        run_experiment(load_config(config), config.read_text(), out_root=tmp_path / "out", quiet=True)
    folder = tmp_path / "out" / "c"
    assert not [p for p in folder.iterdir() if not p.name.startswith(".")]  # nothing that looks complete
