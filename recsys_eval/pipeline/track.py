"""A complete results folder logged to an experiment tracker: ``[track] mlflow = "<tracking uri>"``
(the ``mlflow`` extra: ``uv sync --extra mlflow``; mlflow is imported here only, when configured).

What MLflow holds for one ``recsys-eval run`` (docs/CONVENTIONS.md#experiment-tracking):

- a **parent run** named ``<experiment>/<results folder>`` in the MLflow experiment ``[track]
  experiment`` (default: the config's ``name``), with the manifest's main fields as params, the
  folder's path as the tag ``recsys_eval.folder``, and as artifacts the config as run, the manifest,
  the summary table and the report (``report.md``, ``report.html``, ``tables.tex``, ``figures/``);
- a **nested run per (system, protocol)**, tagged ``system`` and ``protocol``, holding every summary
  value as a metric: ``<metric>_at_<k>`` (``ndcg_at_10``; ``rmse`` without a cutoff) for the value
  over all folds (the one fold's with one fold), ``.micro``, ``.lower`` and ``.upper`` beside it for the
  micro mean and the interval, and with several folds each fold's values under ``fold_<fold>/``
  (``fold_u1/ndcg_at_10``; ``fold1/ndcg_at_10`` for the k-fold splitters' ``fold1``). MLflow's metric names allow letters, digits and ``_ - . / `` and space
  only, hence ``_at_`` for ``@``; the ``name`` of a summary row is kept as it is in its tags' docs.

MLflow 3.7+ refuses its file store (``file:`` URIs, plain folders) unless ``MLFLOW_ALLOW_FILE_STORE``
is set; a config that names one asks for it, so it is set for this process when not set already.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import polars as pl

from recsys_eval.core.results import CONFIG, FIGURES, MANIFEST, REPORT_HTML, REPORT_MD, TABLES_TEX, ResultsFolder
from recsys_eval.errors import ConfigError, OutputError
from recsys_eval.measure.aggregate import ALL_FOLDS

#: Summary columns logged beside each value: (column, suffix of the metric name).
VALUE_COLUMNS = (("mean", ""), ("micro_mean", ".micro"), ("lower", ".lower"), ("upper", ".upper"))
#: Manifest fields logged as the parent run's params.
PARAMS = ("experiment", "kind", "seed", "dataset", "users", "items", "interactions", "engine",
          "relevance_threshold", "undefined", "config_hash")
_BATCH = 1000  # MLflow's limit of metrics per log_batch call
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_\-./ ]")


def metric_name(name: str, fold: str | None = None, suffix: str = "") -> str:
    """The MLflow name of a summary row's value: ``ndcg@10`` -> ``ndcg_at_10``, with ``fold_<fold>/``
    in front for one fold's value of several (``fold1/`` for a fold already called so), ``suffix``
    after (``.lower``)."""
    base = _NAME_UNSAFE.sub("_", name.replace("@", "_at_")) + suffix
    if fold is None:
        return base
    label = _NAME_UNSAFE.sub("_", fold)
    return f"{label if label.startswith('fold') else 'fold_' + label}/{base}"


def summary_metrics(summary: pl.DataFrame) -> dict[tuple[str, str], dict[str, float]]:
    """Every summary value by (system, protocol), named by :func:`metric_name`: the all-folds row
    (or the one fold's) without a prefix, each fold's with one when there are several folds."""
    folds = summary.get_column("fold").unique().to_list()
    several = ALL_FOLDS in folds
    out: dict[tuple[str, str], dict[str, float]] = {}
    for row in summary.iter_rows(named=True):
        fold = None if row["fold"] == ALL_FOLDS or not several else row["fold"]
        values = out.setdefault((row["system"], row["protocol"]), {})
        for column, suffix in VALUE_COLUMNS:
            value = row.get(column)
            if value is not None and value == value:  # MLflow stores no null; NaN has no meaning here
                values[metric_name(row["name"], fold, suffix)] = float(value)
    return out


def track_mlflow(uri: str, folder: str | Path, *, experiment: str | None = None) -> str:
    """Log the complete results folder ``folder`` to the MLflow tracking server or store at ``uri``;
    return the parent run's id."""
    mlflow = _import_mlflow()
    results = ResultsFolder.open(folder)
    manifest = results.manifest
    summary = results.table("summary")
    if _is_file_store(uri):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    try:
        client = mlflow.MlflowClient(tracking_uri=uri)
        experiment_id = _experiment_id(client, experiment or manifest.experiment)
        return _log(mlflow, client, experiment_id, results, summary)
    except mlflow.exceptions.MlflowException as exc:
        raise OutputError(f"[track] mlflow = {uri!r}: MLflow refused the run ({_first_line(exc)}); the results "
                          f"folder {results.path} is complete: log it again with `recsys-eval track`") from None


def _log(mlflow, client, experiment_id: str, results: ResultsFolder, summary: pl.DataFrame | None) -> str:
    from mlflow.entities import Metric, Param
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID, MLFLOW_RUN_NAME

    manifest = results.manifest
    name = f"{manifest.experiment}/{results.path.name}"
    parent = client.create_run(experiment_id, run_name=name, tags={"recsys_eval.folder": str(results.path.resolve())})
    run_id = parent.info.run_id
    params = [Param(key, _param(getattr(manifest, key))) for key in PARAMS if getattr(manifest, key, None) is not None]
    client.log_batch(run_id, params=params)
    for artifact in (CONFIG, MANIFEST, "summary.csv", REPORT_MD, REPORT_HTML, TABLES_TEX):
        if results.file(artifact).is_file():
            client.log_artifact(run_id, str(results.file(artifact)))
    if results.file(FIGURES).is_dir():
        client.log_artifacts(run_id, str(results.file(FIGURES)), FIGURES)
    now = int(time.time() * 1000)
    for (system, protocol), values in summary_metrics(summary if summary is not None else pl.DataFrame()).items():
        tags = {MLFLOW_PARENT_RUN_ID: run_id, MLFLOW_RUN_NAME: f"{system} | {protocol}", "system": system,
                "protocol": protocol, "folds": ", ".join(manifest.folds)}
        child = client.create_run(experiment_id, run_name=f"{system} | {protocol}", tags=tags).info.run_id
        metrics = [Metric(key, value, now, 0) for key, value in sorted(values.items())]
        for start in range(0, len(metrics), _BATCH):
            client.log_batch(child, metrics=metrics[start:start + _BATCH])
        client.set_terminated(child)
    client.set_terminated(run_id)
    return run_id


def _experiment_id(client, name: str) -> str:
    found = client.get_experiment_by_name(name)
    return found.experiment_id if found is not None else client.create_experiment(name)


def _param(value: Any) -> str:
    return str(value)[:6000]  # MLflow's limit on a param value


def _is_file_store(uri: str) -> bool:
    return uri.startswith("file:") or "://" not in uri and not uri.startswith(("databricks", "sqlite"))


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _import_mlflow():
    try:
        import mlflow
    except ImportError:
        raise ConfigError("[track] mlflow needs MLflow: uv sync --extra mlflow "
                          "(or pip install 'recsys-eval[mlflow]')") from None
    return mlflow
