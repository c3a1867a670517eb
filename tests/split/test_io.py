"""Saving and loading splits: the very same rows, index and info come back."""

import json

import polars as pl
import pytest

from recsys_eval.core import Interactions
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.split import (
    holdout,
    kfold,
    load_split,
    load_splits,
    save_split,
    save_splits,
)

from .helpers import random_interactions


def assert_same(a, b):
    assert a.name == b.name
    for side in ("train", "test"):
        x, y = getattr(a, side), getattr(b, side)
        assert x.frame.equals(y.frame)
        assert x.user_ids.equals(y.user_ids) and x.item_ids.equals(y.item_ids)
    assert json.loads(json.dumps(a.info)) == b.info


def test_round_trip_keeps_rows_index_and_info(tmp_path):
    split = holdout(random_interactions(40), 0.3, per_user=True, seed=5, drop_unknown=True)
    save_split(split, tmp_path / "s")
    loaded = load_split(tmp_path / "s")
    assert_same(split, loaded)
    meta = json.loads((tmp_path / "s" / "split.json").read_text())
    assert meta["splitter"] == "holdout" and meta["seed"] == 5 and meta["params"]["fraction"] == 0.3


def test_files_hold_raw_ids_for_other_tools(tmp_path):
    frame = pl.DataFrame({"user": ["ann", "bob", "bob", "cy"], "item": ["x", "y", "x", "z"]})
    meta = pl.DataFrame({"item": ["x", "y", "z"], "title": ["X", "Y", "Z"]})
    data = Interactions.from_frame(frame, items_meta=meta)
    split = holdout(data, 0.5, seed=1)
    save_split(split, tmp_path / "s")
    sides = pl.concat([pl.read_parquet(tmp_path / "s" / f"{side}.parquet") for side in ("train", "test")])
    assert sorted(sides.rows()) == sorted(frame.rows())
    loaded = load_split(tmp_path / "s")
    assert_same(split, loaded)
    assert loaded.train.items_meta.equals(data.items_meta)


def test_existing_folder_is_refused_unless_overwritten(tmp_path):
    first = holdout(random_interactions(41), 0.3, seed=1)
    second = holdout(random_interactions(41), 0.3, seed=2)
    save_split(first, tmp_path / "s")
    with pytest.raises(ConfigError, match="exists"):
        save_split(second, tmp_path / "s")
    save_split(second, tmp_path / "s", overwrite=True)
    assert_same(second, load_split(tmp_path / "s"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]  # no staging folder left behind


def test_folds_saved_together_load_in_order(tmp_path):
    folds = kfold(random_interactions(42), 10, seed=3)
    save_splits(folds, tmp_path / "cv")
    loaded = load_splits(tmp_path / "cv")
    assert [f.name for f in loaded] == [f"fold{i}" for i in range(1, 11)]
    for a, b in zip(folds, loaded):
        assert_same(a, b)


def test_bad_folders_name_the_file_at_fault(tmp_path):
    with pytest.raises(DataError, match="no split.json"):
        load_split(tmp_path)
    save_split(holdout(random_interactions(43), 0.3, seed=1), tmp_path / "s")
    (tmp_path / "s" / "users.parquet").unlink()
    with pytest.raises(DataError, match="users.parquet: missing"):
        load_split(tmp_path / "s")
    (tmp_path / "s" / "split.json").write_text("{not json")
    with pytest.raises(DataError, match="split.json: not valid JSON"):
        load_split(tmp_path / "s")


@pytest.mark.parametrize("ids", ["int", "str"])
def test_ids_missing_from_the_maps_are_named(tmp_path, ids):
    users = [5, 7, 9] if ids == "int" else ["a", "b", "c"]
    data = Interactions.from_frame(pl.DataFrame({"user": users, "item": users}))
    save_split(holdout(data, 0.5, seed=0), tmp_path / "s")
    stranger = 8 if ids == "int" else "zed"
    side = pl.read_parquet(tmp_path / "s" / "train.parquet").with_columns(
        pl.lit(stranger, dtype=pl.Int64 if ids == "int" else pl.String).alias("user")
    )
    side.write_parquet(tmp_path / "s" / "train.parquet")
    with pytest.raises(DataError, match=f"train.parquet: user '?{stranger}'? is not in users.parquet"):
        load_split(tmp_path / "s")
