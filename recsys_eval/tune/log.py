"""The trial log, ``tuning.parquet``: every trial of every (fold, system), written as trials finish.

One row per trial: fold, system, trial (its number, from 0), params (the trial's hyperparameters
as sorted JSON), one ``param_<name>`` column per hyperparameter, value (the validation metric,
the mean over users), fit_seconds and eval_seconds. The file is rewritten atomically after each
trial, so a killed run leaves every finished trial readable and ``--resume`` skips them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from recsys_eval.core import atomic
from recsys_eval.core.results import TUNING_PARAM_PREFIX as PARAM_PREFIX

COLUMNS = {"fold": pl.String, "system": pl.String, "trial": pl.Int64, "params": pl.String,
           "value": pl.Float64, "fit_seconds": pl.Float64, "eval_seconds": pl.Float64}


class TrialLog:
    """The trials recorded so far in one results folder's ``tuning.parquet``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.frame = pl.read_parquet(self.path) if self.path.is_file() else pl.DataFrame(schema=COLUMNS)

    def finished(self, fold: str, system: str) -> dict[int, dict[str, Any]]:
        """The finished trials of one (fold, system): trial number -> row (params parsed)."""
        rows = self.frame.filter((pl.col("fold") == fold) & (pl.col("system") == system))
        return {r["trial"]: {**r, "params": json.loads(r["params"])} for r in rows.iter_rows(named=True)}

    def add(self, fold: str, system: str, trial: int, params: dict[str, Any], value: float,
            fit_seconds: float, eval_seconds: float) -> None:
        row = pl.DataFrame(
            [{"fold": fold, "system": system, "trial": trial, "params": json.dumps(params, sort_keys=True),
              "value": value, "fit_seconds": fit_seconds, "eval_seconds": eval_seconds}],
            schema=COLUMNS,
        ).with_columns(pl.lit(v).alias(f"{PARAM_PREFIX}{k}") for k, v in params.items())
        self.frame = pl.concat([self.frame, row], how="diagonal_relaxed")
        atomic.write_parquet(self.frame, self.path)


def best_trial(trials: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The trial of highest validation value; ties go to the earliest trial (a NaN value, a
    validation set with no defined user, never wins)."""
    defined = [t for t in trials.values() if t["value"] == t["value"]]
    if not defined:
        raise ValueError("no trial has a defined validation value")
    return max(defined, key=lambda t: (t["value"], -t["trial"]))
