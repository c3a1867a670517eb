"""Non-personalised baselines: random and most popular."""

from __future__ import annotations

import copy

import numba
import numpy as np

from recsys_eval.core import Interactions
from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.rng import splitmix64
from recsys_eval.recommend.base import Recommender


@numba.njit(cache=True)
def _uniform(seed: np.uint64, user: np.uint64, item: np.uint64) -> np.float32:
    """A uniform number in [0, 1) on a 24-bit grid (exact in float32), a hash of (seed, user, item)."""
    key = splitmix64(splitmix64(seed * np.uint64(0x9E3779B97F4A7C15) + user) + item)
    return np.float32(key >> np.uint64(40)) / np.float32(16777216.0)


def _random_pairs(seed, users, items):
    out = np.empty(len(users), dtype=np.float32)
    run_chunks(_random_pairs_chunk, chunk_bounds(len(users)), seed, users, items, out)
    return out


@numba.njit(cache=True, nogil=True)
def _random_pairs_chunk(lo, hi, seed, users, items, out):
    for p in range(lo, hi):
        out[p] = _uniform(seed, np.uint64(users[p]), np.uint64(items[p]))


def _random_block(seed, users, n_items):
    out = np.empty((len(users), n_items), dtype=np.float32)
    run_chunks(_random_block_chunk, chunk_bounds(len(users)), seed, users, n_items, out)
    return out


@numba.njit(cache=True, nogil=True)
def _random_block_chunk(lo, hi, seed, users, n_items, out):
    for r in range(lo, hi):
        user = np.uint64(users[r])
        for i in range(n_items):
            out[r, i] = _uniform(seed, user, np.uint64(i))


class RandomRecommender(Recommender):
    """Uniform random scores, a counter-based hash of (seed, user, item): a pair's score does not
    depend on which other pairs are scored with it, or in what chunks."""

    pairs_match_blocks = True
    folds_in = True  # a score never depends on the user's history
    #: Per user index, the user's index in the fold, which its scores hash (None: the index itself;
    #: a Spark task numbers its chunk's users from 0, :meth:`keyed`).
    user_keys: np.ndarray | None = None

    def __init__(self, seed: int = 0) -> None:
        self.seed = np.uint64(int(seed) % 2**64)

    def keyed(self, user_keys: np.ndarray) -> RandomRecommender:
        """The same scores for users read at other indices: user ``i`` scored as ``user_keys[i]``."""
        ready = copy.copy(self)
        ready.user_keys = np.asarray(user_keys, np.int64)
        return ready

    def _keys(self, users: np.ndarray) -> np.ndarray:
        users = np.asarray(users, np.int64)
        return users if self.user_keys is None else self.user_keys[users]

    def fit(self, train: Interactions) -> RandomRecommender:
        self.n_items = train.n_items
        return self

    def fold_in(self, history: Interactions, users: np.ndarray) -> RandomRecommender:
        return self

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return _random_pairs(self.seed, self._keys(users), np.asarray(items, np.int64))

    def score_block(self, users: np.ndarray) -> np.ndarray:
        return _random_block(self.seed, self._keys(users), self.n_items)


class PopularRecommender(Recommender):
    """Scores every item by its number of training interactions (ties by item index)."""

    folds_in = True  # a score never depends on the user's history

    def fit(self, train: Interactions) -> PopularRecommender:
        self.n_items = train.n_items
        self.counts = train.item_counts().astype(np.float32)
        return self

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return self.counts[np.asarray(items)]

    def score_block(self, users: np.ndarray) -> np.ndarray:
        return np.broadcast_to(self.counts, (len(users), self.n_items))

    def fold_in(self, history: Interactions, users: np.ndarray) -> PopularRecommender:
        return self

    def item_scores(self) -> np.ndarray:
        return self.counts
