"""Per-user splits drawn on Spark are the local splitters' splits, row for row, whatever the
partitions, and are written as Parquet partitioned by side."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from recsys_eval.core import Interactions
from recsys_eval.engine.split import TEST, split_chunk, spark_split, write_split
from recsys_eval.split import make_split
from recsys_eval.split.keyed import PerUserRule

CASES = [
    ("holdout", {"fraction": 0.25, "per_user": True}),
    ("all_but_n", {"n": 2}),
    ("given_n", {"n": 3, "order": "latest", "drop_unknown": "items"}),
    ("leave_last_n", {"n": 1, "min_user_interactions": 4, "drop_unknown": True}),
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
