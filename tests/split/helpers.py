"""Shared helpers of the split tests: small Interactions, ML-100K from u.data, partition checks."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from recsys_eval.core import Interactions, Split


def interactions(users, items, times=None, ratings=None, source="test") -> Interactions:
    columns = {"user": list(users), "item": list(items)}
    if times is not None:
        columns["timestamp"] = pl.Series(list(times), dtype=pl.Int64)
    if ratings is not None:
        columns["rating"] = pl.Series(list(ratings), dtype=pl.Float64)
    return Interactions.from_frame(pl.DataFrame(columns), source=source)


def random_interactions(seed: int, n_users: int = 60, n_items: int = 90, n: int = 1500,
                        time_values: int = 40, heavy: bool = True) -> Interactions:
    """Unique (user, item) pairs, heavy-tailed user activity, few distinct times (many ties)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_users + 1) ** (1.0 if heavy else 0.0)
    users = rng.choice(n_users, size=3 * n, p=weights / weights.sum())
    items = rng.integers(0, n_items, size=3 * n)
    frame = pl.DataFrame({"user": users + 100, "item": items + 1000}).unique(maintain_order=True).head(n)
    frame = frame.with_columns(
        timestamp=pl.Series(1_000_000 + 3600 * rng.integers(0, time_values, frame.height)),
        rating=pl.Series(rng.integers(1, 6, frame.height).astype(np.float64)),
    )
    return Interactions.from_frame(frame, source=f"random{seed}")


def ml100k_dir() -> Path:
    home = os.environ.get("RECSYS_EVAL_DATA")
    folder = Path(home) / "ml-100k" if home else None
    if folder is None or not (folder / "u.data").is_file():
        pytest.skip("no ml-100k/u.data under RECSYS_EVAL_DATA")
    return folder


def read_ml100k_file(path: Path) -> pl.DataFrame:
    return pl.read_csv(
        path, separator="\t", has_header=False,
        new_columns=["user", "item", "rating", "timestamp"],
    )


def ml100k() -> Interactions:
    return Interactions.from_frame(read_ml100k_file(ml100k_dir() / "u.data"), source="u.data")


def rows(side: Interactions) -> Counter:
    """The side's rows as a multiset of (user, item, rating?, timestamp?) tuples."""
    return Counter(side.frame.iter_rows())


def assert_partition(data: Interactions, split: Split, dropped: int = 0) -> None:
    """Train and test are disjoint and give ``data`` less ``dropped`` test rows."""
    train, test = rows(split.train), rows(split.test)
    assert not (train & test)
    whole = rows(data)
    assert sum(train.values()) + sum(test.values()) + dropped == sum(whole.values())
    assert not ((train + test) - whole)
    assert split.train.user_ids.equals(data.user_ids)
    assert split.test.item_ids.equals(data.item_ids)


def in_test(data: Interactions, split: Split) -> np.ndarray:
    """Bool per row of ``data``: the row is in the split's test side."""
    test = set(split.test.frame.select("user", "item").iter_rows())
    return np.array([pair in test for pair in data.frame.select("user", "item").iter_rows()])


def per_user_counts(side: Interactions, n_users: int) -> np.ndarray:
    return np.bincount(side.users, minlength=n_users)
