"""Tuning report builders on a hand-made trial log, and the [[datasets]] study's table and config."""

from __future__ import annotations

import math

import polars as pl
import pytest

from config_text import config_text, split_table
from recsys_eval.errors import ConfigError
from recsys_eval.pipeline.config import parse_config
from recsys_eval.experiment.datasets_study import dataset_table
from recsys_eval.report.tuning import chosen_parameters, curve_figure, tuning_cost, validation_curves

TRIALS = pl.DataFrame({
    "fold": ["u1"] * 4 + ["u2"] * 2, "system": ["als"] * 4 + ["als"] * 2, "trial": [0, 1, 2, 3, 0, 1],
    "params": ["{}"] * 6, "value": [0.1, 0.3, math.nan, 0.3, 0.2, 0.1],
    "fit_seconds": [1.0, 2.0, 3.0, 4.0, 1.0, 1.0], "eval_seconds": [0.5] * 6,
    "param_factors": [8, 16, 32, 64, 8, 16],
})


def test_chosen_parameters_curve_and_cost():
    chosen = chosen_parameters(TRIALS)
    assert chosen.select("fold", "trial", "factors").rows() == [("u1", 1, 16), ("u2", 0, 8)]
    curves = validation_curves(TRIALS)
    assert curves.filter(pl.col("fold") == "u1").get_column("best_so_far").to_list() == [0.1, 0.3, 0.3, 0.3]
    cost = tuning_cost(TRIALS).row(0, named=True)
    assert cost["trials"] == 6 and cost["seconds_per_trial"] == pytest.approx((12.0 + 3.0) / 6)
    assert len(curve_figure(TRIALS).axes) == 1


def _config(**tables) -> dict:
    """A study's config as parsed TOML, with the given [dataset] or [[datasets]] and other tables."""
    import tomllib

    return tomllib.loads(config_text("study", split=split_table("holdout", fraction=0.2),
                                     recommenders=["popular", "random"], output=None, **tables))


def _named(*names: str) -> list[dict]:
    return [{"name": name} for name in names]


def test_one_dataset_or_several():
    with pytest.raises(ConfigError, match=r"exactly one of \[dataset\] or \[\[datasets\]\]"):
        parse_config(_config(dataset={"name": "ml-100k"}, datasets=_named("ml-1m")))
    with pytest.raises(ConfigError, match="distinct names"):
        parse_config(_config(datasets=_named("ml-100k", "ml-100k")))
    with pytest.raises(ConfigError, match="compare.datasets_metric 'ndcg@5'"):
        parse_config(_config(datasets=_named("ml-100k", "ml-1m"), compare={"datasets_metric": "ndcg@5"}))
    assert parse_config(_config(dataset={"name": "ml-100k"})).datasets is None


def test_dataset_table_takes_the_all_rows_or_the_one_fold():
    config = parse_config(_config(datasets=_named("ml-100k", "ml-1m")))

    def summary(folds, means):
        return pl.DataFrame({"system": ["popular"] * len(folds), "protocol": "AI+AR+AN", "fold": folds,
                             "metric": "ndcg", "k": 10, "rule": "user mean", "mean": means})

    table = dataset_table(config, {"a": summary(["f1", "f2", "all"], [0.1, 0.3, 0.2]), "b": summary(["h"], [0.5])})
    assert table.select("dataset", "system", "mean").rows() == [("a", "popular", 0.2), ("b", "popular", 0.5)]
