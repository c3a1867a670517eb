"""Tuning hygiene (docs/CONVENTIONS.md#tuning-hygiene): the budget table against the trial log it
sums, the check that tuning read no test interaction (and catches one that did), and the flags."""

from __future__ import annotations

import tomllib

import polars as pl
import pytest

from config_text import config_text, ratings_file
from recsys_eval.experiment.runner import config_splits
from recsys_eval.pipeline.config import parse_config
from recsys_eval.pipeline.inputs import load_data
from recsys_eval.report.diagnostics import tuning_flags
from recsys_eval.tune import budget as budget_module
from recsys_eval.tune.budget import tuning_budget


def _config(data, **tuning):
    return parse_config(tomllib.loads(config_text(
        "tuned", seed=7, dataset=ratings_file(data),
        recommenders=["popular", "item_knn", {"name": "user_knn", "search": {"k": [3, 10, 40]}}],
        tuning={"method": "grid", **tuning})))


def test_the_budget_sums_the_trial_log_and_tuning_read_no_test_data(synthetic_ratings):
    config = _config(synthetic_ratings)
    splits = config_splits(config, load_data(config.dataset))
    trials = pl.DataFrame({"fold": "holdout", "system": "user_knn", "trial": [0, 1, 2], "value": [0.1, 0.3, 0.2],
                           "fit_seconds": [1.0, 2.0, 3.0], "eval_seconds": [0.5, 0.5, 0.5]})
    table = tuning_budget(config, splits, trials)
    rows = {r["system"]: r for r in table.iter_rows(named=True)}
    assert rows["user_knn"]["tuned"] and rows["user_knn"]["trials"] == 3
    assert rows["user_knn"]["trial_seconds"] == pytest.approx(7.5) and rows["user_knn"]["best_value"] == 0.3
    assert rows["user_knn"]["search_space"] == '{"k": [3, 10, 40]}' and rows["user_knn"]["budget"] == "trials"
    assert rows["user_knn"]["validation_rows_in_test"] == 0
    assert not rows["item_knn"]["tuned"] and rows["item_knn"]["tunable"] and rows["item_knn"]["trials"] == 0
    assert not rows["popular"]["tunable"]


def test_a_validation_split_that_reads_the_test_side_is_counted(synthetic_ratings, monkeypatch):
    config = _config(synthetic_ratings)
    splits = config_splits(config, load_data(config.dataset))
    monkeypatch.setattr(budget_module, "validation_of", lambda config, split: split)  # tuning on the test side
    table = tuning_budget(config, splits, None)
    leaked = table.filter(pl.col("system") == "user_knn").item(0, "validation_rows_in_test")
    assert leaked == len(splits[0].test)


def _budget(rows):
    return pl.DataFrame([dict(zip(("system", "tunable", "tuned", "budget", "trials", "trial_seconds",
                                   "search_space", "validation_rows_in_test"), r, strict=True)) for r in rows])


def test_flags_name_under_tuned_untuned_and_test_reading_systems():
    table = tuning_flags(_budget([
        ("proposed", True, True, "trials", 100, 50.0, "{}", 0),
        ("als", True, True, "trials", 40, 80.0, "{}", 0),  # 40 < 50 trials: under-tuned
        ("bpr", True, True, "trials", 50, 5.0, "{}", 3),  # half the trials is enough; read test data
        ("item_knn", True, False, None, 0, 0.0, None, 0),
        ("popular", False, False, None, 0, 0.0, None, 0),
    ]))
    flags = dict(zip(table["system"], table["flags"], strict=True))
    assert flags == {"proposed": "", "als": "under-tuned", "bpr": "tuning read test data",
                     "item_knn": "untuned beside tuned", "popular": ""}


def test_a_seconds_budget_compares_seconds():
    table = tuning_flags(_budget([("a", True, True, "seconds", 10, 60.0, "{}", 0),
                                  ("b", True, True, "seconds", 100, 20.0, "{}", 0)]))
    assert dict(zip(table["system"], table["flags"], strict=True)) == {"a": "", "b": "under-tuned"}


def test_nothing_is_flagged_when_nothing_is_tuned():
    table = tuning_flags(_budget([("a", True, False, None, 0, 0.0, None, 0),
                                  ("b", False, False, None, 0, 0.0, None, 0)]))
    assert table["flags"].to_list() == ["", ""]
