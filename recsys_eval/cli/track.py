"""``recsys-eval track``: log a finished results folder to an experiment tracker (MLflow), as a
run with ``[track] mlflow`` does at its end; for folders of ``evaluate`` or of runs made without it."""

from __future__ import annotations

from pathlib import Path

import typer

from recsys_eval.cli import app


@app.command()
def track(
    folder: Path = typer.Argument(..., help="A complete results folder (of `run` or `evaluate`)."),
    mlflow: str = typer.Option(..., "--mlflow", help="MLflow tracking URI, e.g. file:///tmp/mlruns."),
    experiment: str | None = typer.Option(None, "--experiment", help="MLflow experiment (default: the run's name)."),
) -> None:
    """Log a results folder to MLflow: a parent run with the config, manifest and report, and a
    nested run per (system, protocol) holding every summary value as a metric."""
    from recsys_eval.pipeline.track import track_mlflow

    run_id = track_mlflow(mlflow, folder, experiment=experiment)
    typer.echo(f"MLflow run {run_id} at {mlflow}")
