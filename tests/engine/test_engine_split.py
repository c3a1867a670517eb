"""Per-user splits, the global keyed splits (holdout, k-fold, user-disjoint, cold items), the global
time split and rolling time windows drawn on Spark are the local splitters' splits, row for row,
whatever the partitions, and are written as Parquet partitioned by side."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest

from recsys_eval.core import Interactions
from recsys_eval.engine.split import (
    LATER,
    SIDE,
    TEST,
    nth_smallest,
    rolling_folds,
    spark_split,
    split_chunk,
    split_folds,
    split_sides,
    write_split,
)
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.split import make_split
from recsys_eval.split.keyed import PerUserRule

CASES = [
    ("holdout", {"fraction": 0.25, "per_user": True}),
    ("all_but_n", {"n": 2}),
    ("given_n", {"n": 3, "order": "latest", "drop_unknown": "items"}),
    ("leave_last_n", {"n": 1, "min_user_interactions": 4, "drop_unknown": True}),
    ("user_time", {"fraction": 0.3, "drop_unknown": "users"}),
    ("user_time", {"n": 2, "min_user_interactions": 40, "drop_unknown": True}),
]


def _raw(n_users: int = 80, text_ids: bool = False) -> pl.DataFrame:
    """Unique (user, item) pairs with many ties in time; text ids with ``text_ids``."""
    rng = np.random.default_rng(8)
    frame = pl.DataFrame({"user": rng.integers(0, n_users, 3000), "item": rng.integers(0, 150, 3000)}).unique()
    frame = frame.with_columns(timestamp=pl.Series(rng.integers(0, 30, frame.height), dtype=pl.Int64),
                               rating=pl.Series(rng.integers(1, 6, frame.height).astype(np.float64)))
    if text_ids:
        frame = frame.with_columns(pl.format("u{}", "user").alias("user"), pl.format("i-{}", "item").alias("item"))
    return frame


def _local(raw: pl.DataFrame, method: str, params: dict) -> tuple[set, set]:
    split = make_split(Interactions.from_frame(raw), method, seed=21, **params)
    return tuple(set(side.to_raw().select("user", "item").iter_rows()) for side in (split.train, split.test))


def test_a_chunk_is_split_as_the_local_splitter_splits_its_users():
    raw = _raw()
    for method, params in CASES[:2]:
        train, test = _local(raw, method, params)
        marked = split_chunk(raw.sample(fraction=1.0, shuffle=True, seed=1), PerUserRule.of(method, params), 21)
        assert set(marked.filter(pl.col(TEST)).select("user", "item").iter_rows()) == test
        assert set(marked.filter(~pl.col(TEST)).select("user", "item").iter_rows()) == train


@pytest.mark.spark
@pytest.mark.parametrize("text_ids", [False, True])
def test_spark_splits_equal_the_local_ones_on_any_partitions(spark, tmp_path, text_ids):
    raw = _raw(text_ids=text_ids)
    frame = spark.createDataFrame(raw.to_arrow())
    for method, params in CASES:
        train, test = _local(raw, method, params)
        assert test and train
        for partitions in (3,) if text_ids else (1, 3, 7):
            rows = pl.from_arrow(spark_split(frame, method, {**params, "seed": 21}, partitions).toArrow())
            assert set(rows.filter(pl.col(TEST)).select("user", "item").iter_rows()) == test, (method, partitions)
            assert set(rows.filter(~pl.col(TEST)).select("user", "item").iter_rows()) == train, (method, partitions)
    # written partitioned by side, the input's columns kept
    split = spark_split(frame, "all_but_n", {"n": 2, "seed": 21}, 3)
    write_split(split, str(tmp_path / "split"))
    back = pl.read_parquet(tmp_path / "split" / "**" / "*.parquet", hive_partitioning=True)
    assert sorted(back.columns) == sorted([*raw.columns, "side"])
    train, test = _local(raw, "all_but_n", {"n": 2})
    assert set(back.filter(pl.col("side") == "test").select("user", "item").iter_rows()) == test
    assert back.height == raw.height == len(train) + len(test)


@pytest.mark.spark
def test_the_nth_smallest_value_is_the_sorted_columns_on_any_partitions(spark):
    rng = np.random.default_rng(3)
    values = rng.integers(0, 40, 500)  # many ties
    frame = spark.createDataFrame(pl.DataFrame({"timestamp": values}).to_arrow())
    expected = np.sort(values)
    for partitions in (1, 3, 7):
        spread = frame.repartition(partitions)
        for index in (0, 1, 137, 250, 498, 499):
            assert nth_smallest(spread, "timestamp", index) == expected[index], (partitions, index)
    with pytest.raises(IndexError):
        nth_smallest(frame, "timestamp", 500)


TIME_CASES = [
    {"at": 0.8},  # a quantile: the order statistic of every row's timestamp
    {"at": 0.35, "min_user_interactions": 40, "drop_unknown": True},
    {"at": 17_000, "drop_unknown": "items"},  # a timestamp: the last second of train
    {"at": dt.datetime(1970, 1, 1, 3), "drop_unknown": "users"},  # a datetime: train before it
]


@pytest.mark.spark
@pytest.mark.parametrize("text_ids", [False, True])
def test_spark_time_splits_equal_the_local_ones_on_any_partitions(spark, text_ids):
    raw = _raw(text_ids=text_ids).with_columns(pl.col("timestamp") * 1000 + pl.int_range(pl.len()) % 7)
    frame = spark.createDataFrame(raw.to_arrow())
    local_point = {}
    for params in TIME_CASES:
        split = make_split(Interactions.from_frame(raw), "time", seed=21, **params)
        train, test = (set(side.to_raw().select("user", "item").iter_rows()) for side in (split.train, split.test))
        assert test and train
        local_point[str(params["at"])] = split.info["split_point"]
        for partitions in (3,) if text_ids else (1, 3, 7):
            marked, extra = split_sides(frame, "time", {**params, "seed": 21}, partitions)
            assert extra == {k: split.info[k] for k in ("split_point", "split_point_utc")}
            rows = pl.from_arrow(marked.toArrow())
            assert rows.height == raw.height
            assert set(rows.filter(pl.col(SIDE) == "test").select("user", "item").iter_rows()) == test
            assert set(rows.filter(pl.col(SIDE) == "train").select("user", "item").iter_rows()) == train
            dropped = rows.filter(~pl.col(SIDE).is_in(["train", "test"])).get_column(SIDE).value_counts()
            counts = dict(dropped.iter_rows())
            assert counts.get("unknown_user", 0) == split.info["test_dropped_unknown_users"], params
            assert counts.get("unknown_item", 0) == split.info["test_dropped_unknown_items"], params
    # the quantile's point is the timestamp at place ceil(q n) - 1 of the sorted column
    assert local_point["0.8"] == np.sort(raw.get_column("timestamp").to_numpy())[int(np.ceil(0.8 * raw.height)) - 1]


@pytest.mark.spark
def test_a_spark_time_split_outside_the_data_is_refused_as_locally(spark):
    raw = _raw()
    frame = spark.createDataFrame(raw.to_arrow())
    for at in (10**9, "1969-01-01"):
        with pytest.raises(ConfigError) as local:
            make_split(Interactions.from_frame(raw), "time", seed=1, at=at)
        with pytest.raises(ConfigError) as spark_error:
            split_sides(frame, "time", {"at": at, "seed": 1}, 2)
        assert str(spark_error.value) == str(local.value)
    with pytest.raises(DataError, match="time_split needs timestamps"):
        split_sides(frame.drop("timestamp"), "time", {"at": 0.5, "seed": 1}, 2)


@pytest.mark.spark
def test_spark_rolling_windows_equal_the_local_ones(spark):
    raw = _raw().with_columns(pl.col("timestamp") * 1000 + pl.int_range(pl.len()) % 7)
    frame = spark.createDataFrame(raw.to_arrow())
    data = Interactions.from_frame(raw)
    for params in ({"length": 6000, "n": 3, "drop_unknown": True},
                   {"length": "1h", "starts": [9000, "1970-01-01T05:00:00"], "drop_unknown": "items"}):
        local = make_split(data, "rolling_time", seed=2, **params)
        folds = rolling_folds(frame, {**params, "seed": 2})
        assert [name for name, _, _ in folds] == [split.name for split in local]
        for (_, marked, extra), split in zip(folds, local, strict=True):
            assert extra == {k: split.info[k] for k in ("fold", "window_start", "window_end", "window_utc")}
            rows = pl.from_arrow(marked.toArrow())
            for side, local_side in (("train", split.train), ("test", split.test)):
                assert (set(rows.filter(pl.col(SIDE) == side).select("user", "item").iter_rows())
                        == set(local_side.to_raw().select("user", "item").iter_rows())), (params, side)
            dropped = dict(rows.get_column(SIDE).value_counts().iter_rows())
            assert dropped.get("unknown_user", 0) == split.info["test_dropped_unknown_users"]
            assert dropped.get("unknown_item", 0) == split.info["test_dropped_unknown_items"]
            assert dropped.get(LATER, 0) == raw.height - len(split.train) - len(split.test) - sum(
                split.info[k] for k in ("test_dropped_unknown_users", "test_dropped_unknown_items"))
    with pytest.raises(DataError) as local_error:
        make_split(data, "rolling_time", seed=2, length=10, starts=[500])  # no row in [500, 510)
    with pytest.raises(DataError) as spark_error:
        rolling_folds(frame, {"length": 10, "starts": [500]})
    assert str(spark_error.value) == str(local_error.value)


GLOBAL_CASES = [
    ("holdout", {"fraction": 0.2}),
    ("holdout", {"fraction": 0.45, "min_user_interactions": 40, "drop_unknown": True}),
    ("kfold", {"k": 3, "drop_unknown": "items"}),
    ("kfold", {"k": 4, "per_user": True}),
    ("kfold", {"k": 5, "per_user": True, "min_user_interactions": 40, "drop_unknown": True}),
    ("user_disjoint", {"fraction": 0.3}),
    ("user_disjoint", {"n_users": 9, "fold_in": 0.5, "order": "latest", "min_user_interactions": 30}),
    ("user_disjoint", {"fraction": 0.25, "fold_in": 0}),
    ("cold_items", {"fraction": 0.1}),
    ("cold_items", {"n_items": 12, "drop_unknown": "users"}),
]


def _sides(rows: pl.DataFrame) -> dict[str, set]:
    return {side: set(rows.filter(pl.col(SIDE) == side).select("user", "item").iter_rows())
            for side in rows.get_column(SIDE).unique()}


@pytest.mark.spark
@pytest.mark.parametrize("text_ids", [False, True])
def test_spark_global_splits_equal_the_local_ones_on_any_partitions(spark, text_ids):
    raw = _raw(text_ids=text_ids)
    frame = spark.createDataFrame(raw.to_arrow())
    data = Interactions.from_frame(raw)
    for method, params in GLOBAL_CASES:
        made = make_split(data, method, seed=21, **params)
        local = made if isinstance(made, list) else [made]
        for partitions in (3,) if text_ids else (1, 3, 7):
            folds = split_folds(frame.repartition(partitions), method, {**params, "seed": 21}, partitions)
            assert [name for name, _, _ in folds] == [split.name for split in local], (method, params)
            for (_, marked, extra), split in zip(folds, local, strict=True):
                sides = _sides(pl.from_arrow(marked.toArrow()))
                assert sides.get("test", set()) == set(split.test.to_raw().select("user", "item").iter_rows())
                assert sides.get("train", set()) == set(split.train.to_raw().select("user", "item").iter_rows())
                assert len(sides.get("unknown_user", ())) == split.info["test_dropped_unknown_users"]
                assert len(sides.get("unknown_item", ())) == split.info["test_dropped_unknown_items"]
                assert extra == {key: split.info[key] for key in extra}, (method, params)
                assert split.test.frame.height > 0 and split.train.frame.height > 0


@pytest.mark.spark
def test_spark_global_splits_refuse_what_the_local_ones_refuse(spark):
    raw = _raw()
    frame = spark.createDataFrame(raw.to_arrow())
    data = Interactions.from_frame(raw)
    for method, params in (("kfold", {"k": 200, "per_user": True}), ("kfold", {"k": 5000}),
                           ("user_disjoint", {"n_users": 80}), ("cold_items", {"fraction": 0.1, "drop_unknown": True}),
                           ("user_disjoint", {"fraction": 0.2, "order": "latest"})):
        table = raw.drop("timestamp") if params.get("order") == "latest" else raw
        with pytest.raises((ConfigError, DataError)) as local:
            make_split(Interactions.from_frame(table, source="interactions"), method, seed=3, **params)
        with pytest.raises(type(local.value)) as spark_error:
            split_folds(spark.createDataFrame(table.to_arrow()), method, {**params, "seed": 3}, 3)
        assert str(spark_error.value) == str(local.value), (method, params)
    assert data.n_users == 80 and frame.count() == raw.height
