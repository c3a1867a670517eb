"""The runner's 1R fast path (one-relevant targets, closed-form metrics, lists read off each user's
list) against the materialised path it replaced (every unit's listed targets ranked), end to end:
every per-unit value, the summary, the exposure table and the pooled-AUC samples identical, on two
folds, with tied scores, -inf scores (an external run that lists few items) and NaN scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from config_text import config_text, ratings_file, split_table
import recsys_eval.targets as targets_module
from recsys_eval.core.results import ResultsFolder
from recsys_eval.data import load_file
from recsys_eval.errors import DataError
from recsys_eval.experiment import runner
from recsys_eval.pipeline import jobs
from recsys_eval.pipeline.inputs import load_data
from recsys_eval.pipeline.plan import RunOptions
from recsys_eval.pipeline.config import load_config
from recsys_eval.recommend.one_relevant import OneRelevantRanking

PROTOCOLS = ["AI+AR+AN", "AI+1R+NN20", "AI+1R+NN100", "AI+1R+AN", "TI+1R+AN", "UT+1R+AN",
             {"name": "TI+1R+NN5", "fresh_negatives": True}]
METRICS = ["precision", "recall", "f1", "ndcg", "ap", "rr", "hit", "auc", "user_coverage", "novelty",
           "catalog_coverage", "prediction_coverage", "gini"]
MODELS = ["popular", "random", {"name": "item_knn", "params": {"similarity": "cosine", "k": 20}},
          {"name": "als", "params": {"factors": 8, "iterations": 3}}]


def fast1r_config(data: Path, recommenders=MODELS, ties: str = "first", chunk: int = 1000) -> str:
    return config_text(
        "fast1r", seed=11, dataset=ratings_file(data), split=split_table("kfold", k=2, per_user=True),
        # average ties are refused under a full ranking cut at run.depth (AR+AN), exact under 1R+AN
        protocols=PROTOCOLS if ties == "first" else [p for p in PROTOCOLS if p != "AI+AR+AN"],
        recommenders=recommenders,
        metrics={"names": METRICS, "k": [1, 5, 20], "relevance_threshold": 4, "ties": ties},
        run={"users_per_chunk": chunk})


def materialised(monkeypatch) -> None:
    """Make the runner build 1R targets listed, one list per unit (the path before the fast one)."""
    listed = targets_module.plan_targets

    def plan_listed(*args, one_relevant=False, **kwargs):
        return listed(*args, **kwargs)

    monkeypatch.setattr(targets_module, "plan_targets", plan_listed)


def run(config: Path, out: Path) -> Path:
    return runner.run_experiment(load_config(config), config.read_text(), out_root=out, quiet=True).folder


def external_run(data_path: Path, path: Path) -> dict:
    """A run file listing 30 items per user with scores in 4 levels (ties), every other item -inf."""
    data = load_file(data_path, {"user": "userId", "item": "movieId", "rating": "rating",
                                 "timestamp": "timestamp"})
    rng = np.random.default_rng(3)
    users = np.repeat(np.arange(data.n_users), 30)
    items = np.concatenate([rng.choice(data.n_items, 30, replace=False) for _ in range(data.n_users)])
    frame = data.to_raw(pl.DataFrame({"user": users, "item": items,
                                      "score": rng.integers(0, 4, len(users)).astype(np.float64)}))
    frame.write_parquet(path)
    return {"name": "external", "label": "listed", "path": str(path)}


def assert_same_results(old: Path, new: Path) -> None:
    key = ["system", "protocol", "fold", "metric", "k", "unit", "user"]
    a = ResultsFolder.open(old).scan_per_unit().collect().sort(key, nulls_last=True)
    b = ResultsFolder.open(new).scan_per_unit().collect().sort(key, nulls_last=True)
    assert a.height > 0 and a.select(key).equals(b.select(key))
    x, y = a.get_column("value").to_numpy(), b.get_column("value").to_numpy()
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    assert same.all(), a.filter(~pl.Series(same)).head(5)
    assert (old / "summary.csv").read_text() == (new / "summary.csv").read_text()
    for table in ("exposure_bins.parquet", "auc_pooling.parquet"):
        assert (old / table).is_file() == (new / table).is_file(), table  # exposure: of AR+AN lists only
        assert not (old / table).is_file() or pl.read_parquet(old / table).equals(pl.read_parquet(new / table)), table
    assert pl.read_parquet(new / "auc_pooling.parquet").height > 0  # two folds: the pooled AUC from the samples


@pytest.mark.parametrize("ties,chunk", [("first", 1000), ("average", 70)])
def test_fast_path_equals_materialised_path_end_to_end(synthetic_ratings, tmp_path, monkeypatch, ties, chunk):
    recommenders = [*MODELS, external_run(synthetic_ratings, tmp_path / "run.parquet")]
    config = tmp_path / "c.toml"
    config.write_text(fast1r_config(synthetic_ratings, recommenders, ties, chunk))
    new = run(config, tmp_path / "new")
    protocols = set(ResultsFolder.open(new).scan_per_unit().select("protocol").unique().collect().to_series())
    assert {"AI+1R+AN", "UT+1R+AN", "TI+1R+NN5"} <= protocols
    with monkeypatch.context() as patch:
        materialised(patch)
        old = run(config, tmp_path / "old")
    assert_same_results(old, new)


def test_the_runner_ranks_1r_units_in_closed_form(synthetic_ratings, tmp_path, monkeypatch):
    """No 1R unit is ranked on its own: rank_targets is never called for a 1R protocol."""
    config = tmp_path / "c.toml"
    config.write_text(fast1r_config(synthetic_ratings))
    ranked = []
    original = jobs.rank

    def spy(options, model, target):
        out = original(options, model, target)
        ranked.append((target.targets.protocol, type(out)))
        return out

    monkeypatch.setattr(jobs, "rank", spy)
    run(config, tmp_path / "r")
    one_r = {kind for protocol, kind in ranked if "1R" in protocol}
    assert one_r == {OneRelevantRanking}


def nan_model(train):
    """Popularity scores, NaN for every other item: every path must refuse them."""
    from recsys_eval.recommend import make_recommender

    model = make_recommender("popular", {}).fit(train)
    scores = model.item_scores().copy()
    scores[::2] = np.nan
    model.item_scores = lambda: scores
    model.score = lambda users, items: scores[np.asarray(items)]
    model.score_block = lambda users: np.tile(scores, (len(users), 1))
    return model


@pytest.mark.parametrize("protocol", ["AI+1R+NN100", "AI+1R+AN", "UT+1R+AN"])
def test_nan_scores_raise_on_the_fast_path(synthetic_ratings, tmp_path, protocol):
    config_path = tmp_path / "c.toml"
    config_path.write_text(fast1r_config(synthetic_ratings))
    config = load_config(config_path)
    options = RunOptions.from_config(config)
    data = load_data(config.dataset)
    split = runner.config_splits(config, data)[0]
    entry = next(p for p in config.protocols if p.name == "AI+1R+NN100").model_copy(update={"name": protocol})
    target = next(options.target_sets(entry, split)[0].chunks(10_000))
    assert target.targets.one_relevant
    with pytest.raises(DataError, match="NaN"):
        jobs.rank(options.rank, nan_model(split.train), target)
