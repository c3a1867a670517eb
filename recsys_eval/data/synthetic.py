"""Seeded synthetic interactions of MovieLens size: benchmarks where the real file is absent, and the
small dataset the end-to-end tests build so that they run everywhere.

Exactly ``interactions`` distinct (user, item) pairs. User activity is heavy-tailed (log-normal,
at least 20 per user as in MovieLens, at most half the items); items are drawn with Zipf-like
popularity (weight of the r-th most popular item ~ 1 / r^0.9, popularity ranks shuffled over the
item index), repeated pairs dropped and the users' shortfalls drawn again; after a few rounds the
last shortfalls (the heaviest users, who have most of the popular items) are drawn uniformly.
Ratings 0.5..5 in half stars, timestamps spread over ten years with each user active in a window
of their own.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from recsys_eval.core import Interactions
from recsys_eval.errors import ConfigError

ML25M = {"users": 162_541, "items": 59_047, "interactions": 25_000_095}


def _activity(rng: np.random.Generator, users: int, items: int, interactions: int) -> np.ndarray:
    """Interactions per user, log-normal, in [20, items // 2], summing to ``interactions``."""
    low, high = 20, items // 2
    if not users * low <= interactions <= users * high:
        raise ConfigError(
            f"synthetic data: {interactions:,} interactions do not fit {users:,} users x {items:,} items; "
            f"expected between {users * low:,} and {users * high:,} (each user rates {low} to items // 2 items)"
        )
    weight = rng.lognormal(0.0, 1.1, users)
    counts = np.clip(np.floor(weight / weight.sum() * interactions), low, high).astype(np.int64)
    while (gap := interactions - counts.sum()) != 0:  # spread the rounding gap over users with room
        room = counts < high if gap > 0 else counts > low
        chosen = rng.choice(np.flatnonzero(room), min(abs(gap), int(room.sum())), replace=False)
        counts[chosen] += np.sign(gap)
    return counts


def _new_keys(keys: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Distinct ``candidates`` not in the sorted ``keys``."""
    if len(candidates) == 0:
        return candidates
    candidates = np.sort(candidates)  # (np.unique's hash path is slower at this size)
    candidates = candidates[np.r_[True, candidates[1:] != candidates[:-1]]]
    pos = np.minimum(np.searchsorted(keys, candidates), max(len(keys) - 1, 0))
    return candidates[keys[pos] != candidates] if len(keys) else candidates


def synthetic_interactions(
    users: int = ML25M["users"],
    items: int = ML25M["items"],
    interactions: int = ML25M["interactions"],
    *,
    seed: int = 0,
) -> Interactions:
    rng = np.random.default_rng(seed)
    need = _activity(rng, users, items, interactions)
    weights = 1.0 / np.arange(1, items + 1) ** 0.9
    cdf = np.cumsum(weights / weights.sum())
    item_of_rank = rng.permutation(items)
    keys = np.zeros(0, dtype=np.int64)  # user * items + item, sorted
    for round_ in range(100):
        draw_users = np.repeat(np.arange(users, dtype=np.int64), need)
        if round_ < 6:
            drawn = item_of_rank[np.minimum(np.searchsorted(cdf, rng.random(len(draw_users))), items - 1)]
        else:
            drawn = rng.integers(0, items, len(draw_users))
        fresh = _new_keys(keys, draw_users * items + drawn)
        # a user's draws may repeat each other: keep at most its need, chosen at random
        fresh = fresh[rng.permutation(len(fresh))]
        fresh_user = fresh // items
        order = np.argsort(fresh_user, kind="stable")
        fresh, fresh_user = fresh[order], fresh_user[order]
        first = np.searchsorted(fresh_user, fresh_user)
        fresh = fresh[np.arange(len(fresh)) - first < need[fresh_user]]
        need -= np.bincount(fresh // items, minlength=users)
        keys = np.sort(np.concatenate([keys, fresh]))
        if not need.any():
            break
    user = (keys // items).astype(np.int32)
    item = (keys % items).astype(np.int32)
    start = rng.integers(0, 10 * 365 * 86400, users)
    stamp = 1_000_000_000 + start[user] + rng.integers(0, 365 * 86400, len(user))
    rating = (rng.integers(1, 11, len(user)) / 2.0).astype(np.float32)
    frame = pl.DataFrame({"user": user, "item": item, "rating": rating, "timestamp": stamp})
    return Interactions.from_frame(frame, source=f"synthetic {users:,} x {items:,} (seed {seed})")


def write_synthetic_ratings(
    path: str | Path, users: int = 300, items: int = 400, interactions: int = 12_000, *, seed: int = 0
) -> Path:
    """Write :func:`synthetic_interactions` as a MovieLens-like CSV (``userId,movieId,rating,timestamp``,
    raw ids that are not the indices: users from 1, items from 1001), for a config's ``[dataset] path``."""
    data = synthetic_interactions(users, items, interactions, seed=seed)
    frame = data.frame.select(
        (pl.col("user") + 1).alias("userId"), (pl.col("item") + 1001).alias("movieId"), "rating", "timestamp"
    )
    path = Path(path)
    frame.write_csv(path)
    return path


def write_synthetic_items(path: str | Path, items: int = 400, *, genres: int = 8, seed: int = 0) -> Path:
    """Write item features for :func:`write_synthetic_ratings`' items (raw ids from 1001) as a CSV of
    ``item, genres``: each item has 0 to 3 of ``genres`` names (``g0``, ``g1``...) joined by ``|``,
    a few items none; the ``[dataset] item_features`` file of calibration and ILD."""
    rng = np.random.default_rng(seed)
    names = np.array([f"g{g}" for g in range(genres)])
    counts = rng.choice(4, size=items, p=[0.05, 0.45, 0.35, 0.15])
    labels = ["|".join(sorted(rng.choice(names, size=n, replace=False))) for n in counts]
    path = Path(path)
    pl.DataFrame({"item": np.arange(1001, 1001 + items), "genres": labels}).write_csv(path)
    return path
