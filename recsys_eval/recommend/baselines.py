"""Non-personalised baselines: random and most popular."""

from __future__ import annotations

import numpy as np

from recsys_eval.core import Interactions
from recsys_eval.recommend.base import Recommender

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a counter-based hash, so a pair's random score never depends on the
    order or chunking in which pairs are scored."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


class RandomRecommender(Recommender):
    """Uniform random scores in [0, 1), a seeded hash of (seed, user, item)."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)

    def fit(self, train: Interactions) -> RandomRecommender:
        self.n_items = train.n_items
        return self

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            key = (np.uint64(self.seed) * _GOLDEN
                   + np.asarray(users, dtype=np.uint64) * np.uint64(0x100000001B3))
            key = _mix(_mix(key) + np.asarray(items, dtype=np.uint64))
        return ((key >> np.uint64(40)).astype(np.float32)) / np.float32(1 << 24)

    def score_block(self, users: np.ndarray) -> np.ndarray:
        users = np.asarray(users)
        items = np.arange(self.n_items)
        return self.score(np.repeat(users, self.n_items), np.tile(items, len(users))).reshape(
            len(users), self.n_items
        )


class PopularRecommender(Recommender):
    """Scores every item by its number of training interactions (ties by item index)."""

    def fit(self, train: Interactions) -> PopularRecommender:
        self.n_items = train.n_items
        self.counts = train.item_counts().astype(np.float32)
        return self

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return self.counts[np.asarray(items)]

    def score_block(self, users: np.ndarray) -> np.ndarray:
        return np.broadcast_to(self.counts, (len(users), self.n_items))
