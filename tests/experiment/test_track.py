"""MLflow tracking against a real local file store (no mock): after ``recsys-eval run`` with ``[track]
mlflow``, the store holds a parent run with the config, manifest and report, and a nested run per
(system, protocol) whose metrics are the summary's values; the names are checked by hand."""

from __future__ import annotations

import sys

import polars as pl
import pytest
from config_text import config_text, ratings_file, split_table

from recsys_eval.cli import main
from recsys_eval.core.results import ResultsFolder
from recsys_eval.errors import ConfigError
from recsys_eval.pipeline.track import metric_name, summary_metrics, track_mlflow

METRICS = {"names": ["precision", "ndcg", "auc"], "k": [5, 10], "relevance_threshold": 4}


def test_metric_names_follow_mlflows_rules():
    assert metric_name("ndcg@10") == "ndcg_at_10"
    assert metric_name("rmse") == "rmse"
    assert metric_name("ndcg@10", "u1", ".lower") == "fold_u1/ndcg_at_10.lower"
    assert metric_name("hit@5", "fold #2") == "fold _2/hit_at_5"  # '#' is not allowed
    assert metric_name("hit@5", "fold2") == "fold2/hit_at_5"


def test_summary_values_by_system_and_protocol():
    summary = pl.DataFrame({
        "system": ["pop"] * 3, "protocol": ["AI+AR+AN"] * 3, "fold": ["0", "1", "all"],
        "name": ["ndcg@10"] * 3, "mean": [0.2, 0.4, 0.3], "micro_mean": [0.2, 0.4, None],
        "lower": [None, None, 0.1], "upper": [None, None, float("nan")],
    })
    assert summary_metrics(summary) == {("pop", "AI+AR+AN"): {
        "fold_0/ndcg_at_10": 0.2, "fold_0/ndcg_at_10.micro": 0.2, "fold_1/ndcg_at_10": 0.4,
        "fold_1/ndcg_at_10.micro": 0.4, "ndcg_at_10": 0.3, "ndcg_at_10.lower": 0.1,
    }}
    one_fold = summary.head(1).with_columns(pl.lit("holdout").alias("fold"))
    assert summary_metrics(one_fold) == {("pop", "AI+AR+AN"): {"ndcg_at_10": 0.2, "ndcg_at_10.micro": 0.2}}


def test_a_run_is_in_the_mlflow_file_store(tmp_path, synthetic_ratings, capsys):
    mlflow = pytest.importorskip("mlflow", reason="the mlflow extra is not installed (uv sync --extra mlflow)")
    store = tmp_path / "mlruns"
    config = tmp_path / "c.toml"
    config.write_text(config_text(
        "tracked", dataset=ratings_file(synthetic_ratings), split=split_table("kfold", k=2, per_user=True),
        recommenders=["popular", "random"], metrics=METRICS, output={"report": True},
        track={"mlflow": store.as_uri(), "experiment": "recsys tests"}))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(tmp_path / "out"), "--quiet"])
    assert exit_info.value.code in (0, None)
    folder = next(p for p in (tmp_path / "out" / "tracked").iterdir() if not p.name.startswith(".") and not p.is_symlink())
    summary = ResultsFolder.open(folder).table("summary")

    client = mlflow.MlflowClient(tracking_uri=store.as_uri())
    experiment = client.get_experiment_by_name("recsys tests")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = {(r.data.tags["system"], r.data.tags["protocol"]): r for r in runs if r not in parents}
    assert len(parents) == 1 and set(children) == {("popular", "AI+AR+AN"), ("random", "AI+AR+AN")}
    parent = parents[0]
    assert parent.data.params["seed"] == "0" and parent.data.tags["recsys_eval.folder"] == str(folder.resolve())
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"config.toml", "manifest.json", "summary.csv", "report.md", "report.html"} <= artifacts
    for (system, protocol), run in children.items():
        assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
        rows = summary.filter((pl.col("system") == system) & (pl.col("protocol") == protocol))
        overall = rows.filter(pl.col("fold") == "all")
        assert run.data.metrics["ndcg_at_10"] == overall.filter(pl.col("name") == "ndcg@10")["mean"].item()
        assert run.data.metrics["auc"] == overall.filter(pl.col("name") == "auc")["mean"].item()  # no cutoff
        fold = rows.filter((pl.col("fold") == "fold2") & (pl.col("name") == "precision@5"))
        assert run.data.metrics["fold2/precision_at_5"] == fold["mean"].item()
        logged = sum(1 for key in run.data.metrics if not key.endswith((".micro", ".lower", ".upper")))
        assert logged == rows.filter(pl.col("mean").is_not_null()).height  # every summary value

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:  # `recsys-eval track`: by default the run's name as experiment
        main(["track", str(folder), "--mlflow", store.as_uri()])
    assert exit_info.value.code in (0, None)
    again = capsys.readouterr().out.split()[2]  # "MLflow run <id> at <uri>"
    assert client.get_run(again).info.experiment_id == client.get_experiment_by_name("tracked").experiment_id


def test_without_mlflow_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow raises ImportError
    with pytest.raises(ConfigError, match="uv sync --extra mlflow"):
        track_mlflow((tmp_path / "mlruns").as_uri(), tmp_path)
