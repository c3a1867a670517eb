"""A user-disjoint and a rolling-time study end to end on the synthetic ratings (built by the tests,
so nothing skips): the runs' units are the right users and windows, models without fold-in are
refused before any work, and a second run gives the same values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from config_text import config_text, ratings_file, split_table
from recsys_eval.cli import main
from recsys_eval.core.results import ResultsFolder
from recsys_eval.split import load_split

METRICS = {"names": ["ndcg", "recall"], "k": [10]}


def run(tmp_path: Path, name: str, data: Path, split: dict, recommenders: list, protocols=("AI+AR+AN",)) -> Path:
    tmp_path.mkdir(exist_ok=True)
    config = tmp_path / f"{name}.toml"
    config.write_text(config_text(name, seed=3, dataset=ratings_file(data), split=split, protocols=protocols,
                                  recommenders=recommenders, metrics=METRICS))
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "--out", str(tmp_path / "results"), "--quiet"])
    assert exit_info.value.code in (0, None)
    folders = sorted(p for p in (tmp_path / "results" / name).iterdir() if not p.name.startswith(".") and not p.is_symlink())
    return folders[-1]


def test_user_disjoint_study(tmp_path, synthetic_ratings):
    split = split_table("user_disjoint", fraction=0.2, fold_in=0.5)
    recs = ["popular", "item_knn", {"name": "als", "params": {"factors": 8, "iterations": 3}}, "user_knn"]
    folder = run(tmp_path, "disjoint", synthetic_ratings, split, recs, ("AI+AR+AN", "AI+1R+NN50"))
    saved = load_split(folder / "splits" / "user_disjoint")
    assert saved.fold_in
    per_unit = ResultsFolder.open(folder).scan_per_unit().collect()
    assert set(per_unit.get_column("system").unique()) == {"popular", "item_knn", "als", "user_knn"}
    # the units are the test users (raw ids in results), every one of them, and no other
    test_users = saved.train.user_ids.gather(np.flatnonzero(saved.test_users())).to_list()
    for (system, protocol), rows in per_unit.filter(pl.col("user").is_not_null()).group_by("system", "protocol"):
        assert set(rows.get_column("user").unique().to_list()) <= set(test_users), (system, protocol)
    full = per_unit.filter((pl.col("protocol") == "AI+AR+AN") & (pl.col("metric") == "ndcg") & (pl.col("system") == "item_knn"))
    assert full.height == len(test_users)
    # item kNN scores the test users from their fold-in rows: it finds some of their held-out items
    means = full.group_by("system").agg(pl.col("value").mean())
    assert means.height == 1 and means.item(0, "value") > 0
    again = run(tmp_path / "again", "disjoint", synthetic_ratings, split, recs, ("AI+AR+AN", "AI+1R+NN50"))
    key = ["system", "protocol", "metric", "user", "unit"]
    first = per_unit.sort(key, nulls_last=True)
    second = ResultsFolder.open(again).scan_per_unit().collect().sort(key, nulls_last=True)
    assert first.select(key + ["value"]).equals(second.select(key + ["value"]))


def test_user_disjoint_refuses_a_model_without_fold_in(tmp_path, synthetic_ratings, capsys):
    config = tmp_path / "bad.toml"
    config.write_text(config_text("bad", dataset=ratings_file(synthetic_ratings),
                                  split=split_table("user_disjoint", fraction=0.2), recommenders=["popular", "bpr"]))
    with pytest.raises(SystemExit) as exit_info:
        main(["validate", str(config)])
    assert exit_info.value.code not in (0, None)
    said = capsys.readouterr()
    assert "recommenders[1].name" in said.err + said.out and "cannot score users it was not fitted on" in said.err + said.out


def test_rolling_time_study(tmp_path, synthetic_ratings):
    split = split_table("rolling_time", length="60d", n=3)
    folder = run(tmp_path, "rolling", synthetic_ratings, split, ["popular", "item_knn"])
    folds = [load_split(folder / "splits" / f"window{i}") for i in (1, 2, 3)]
    assert [f.name for f in folds] == ["window1", "window2", "window3"]
    for fold in folds:
        assert fold.train.timestamps.max() < fold.info["window_start"] <= fold.test.timestamps.min()
    per_unit = ResultsFolder.open(folder).scan_per_unit().collect()
    assert set(per_unit.get_column("fold").unique()) == {"window1", "window2", "window3"}


def test_preparing_on_train_is_refused_where_it_would_empty_the_test_side(tmp_path, synthetic_ratings, capsys):
    for split in (split_table("cold_items", fraction=0.1), split_table("user_disjoint", fraction=0.2, fold_in=0)):
        config = tmp_path / "cold.toml"
        config.write_text(config_text("cold", dataset=ratings_file(synthetic_ratings), split=split,
                                      prepare={"on": "train", "min_user_interactions": 2}))
        with pytest.raises(SystemExit) as exit_info:
            main(["validate", str(config)])
        assert exit_info.value.code not in (0, None)
        said = capsys.readouterr()
        assert "prepare.on" in said.err + said.out and "would drop every test row" in said.err + said.out
