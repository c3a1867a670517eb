"""Seeded synthetic interactions of MovieLens size, for benchmarks where the real file is absent.

Item popularity is Zipf-like (weight of the r-th most popular item ~ 1 / r^0.9), user activity
heavy-tailed (log-normal, at least 20 per user as in MovieLens), ratings 0.5..5 in half stars,
timestamps spread over ten years with each user active in a window of their own.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from recsys_eval.core import Interactions

ML25M = {"users": 162_541, "items": 59_047, "interactions": 25_000_095}


def synthetic_interactions(
    users: int = ML25M["users"],
    items: int = ML25M["items"],
    interactions: int = ML25M["interactions"],
    *,
    seed: int = 0,
) -> Interactions:
    rng = np.random.default_rng(seed)
    activity = rng.lognormal(0.0, 1.1, users)
    counts = np.maximum(20, np.round(activity / activity.sum() * interactions * 1.2)).astype(np.int64)
    counts = np.minimum(counts, items // 2)
    weights = 1.0 / np.arange(1, items + 1) ** 0.9
    cdf = np.cumsum(weights / weights.sum())
    user = np.repeat(np.arange(users, dtype=np.int64), counts)
    item = np.minimum(np.searchsorted(cdf, rng.random(len(user))), items - 1)
    item = rng.permutation(items)[item]  # popularity not tied to the index
    key = np.unique(user * items + item)  # duplicates removed, then a uniform subsample to size
    key = np.sort(key[rng.permutation(len(key))[:interactions]])
    user, item = key // items, key % items
    start = rng.integers(0, 10 * 365 * 86400, users)
    stamp = 1_000_000_000 + start[user] + rng.integers(0, 365 * 86400, len(user))
    rating = rng.integers(1, 11, len(user)) / 2.0
    frame = pl.DataFrame({"user": user, "item": item, "rating": rating, "timestamp": stamp})
    return Interactions.from_frame(frame, source=f"synthetic {users:,} x {items:,} (seed {seed})")
