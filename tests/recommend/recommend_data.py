"""Small data and slow obvious references shared by the recommender tests."""

from __future__ import annotations

import numpy as np
import polars as pl

from recsys_eval.core import Interactions, Rankings, Targets
from recsys_eval.recommend import Recommender


def random_data(seed: int, n_users: int = 40, n_items: int = 30, density: float = 0.2) -> Interactions:
    """Random interactions with ratings 1..5 in which every user and every item occurs."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n_users, n_items)) < density
    mask[np.arange(n_users), rng.integers(0, n_items, n_users)] = True
    mask[rng.integers(0, n_users, n_items), np.arange(n_items)] = True
    users, items = np.nonzero(mask)
    return Interactions.from_frame(pl.DataFrame({
        "user": users, "item": items, "rating": rng.integers(1, 6, len(users)).astype(np.float64),
    }))


def all_scores(model: Recommender, n_users: int) -> np.ndarray:
    """Every user's score of every item, through ``score`` of (user, item) pairs."""
    users = np.repeat(np.arange(n_users), model.n_items)
    items = np.tile(np.arange(model.n_items), n_users)
    return np.asarray(model.score(users, items), dtype=np.float64).reshape(n_users, model.n_items)


def brute_top_k(scores: np.ndarray, data: Interactions, users, k: int, candidates=None) -> list[list[int]]:
    """Per user: every allowed item sorted by (score desc, item asc), the first k."""
    seen = data.csr().toarray() > 0
    out = []
    for u in users:
        allowed = ~seen[u] & np.isfinite(scores[u])
        if candidates is not None:
            allowed &= candidates
        out.append(sorted(np.flatnonzero(allowed).tolist(), key=lambda i: (-scores[u, i], i))[:k])
    return out


def per_unit(rankings: Rankings) -> list[list[int]]:
    return [rankings.items[rankings.offsets[i]:rankings.offsets[i + 1]].tolist() for i in range(rankings.n_units)]


def random_targets(rng: np.random.Generator, data: Interactions, n_units: int, max_size: int = 12) -> Targets:
    """Units of random users with random distinct target items (sorted within a unit)."""
    sizes = rng.integers(0, max_size, n_units)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    units = rng.integers(0, data.n_users, n_units).astype(np.int32)
    items = [np.sort(rng.choice(data.n_items, s, replace=False)) for s in sizes]
    items = np.concatenate(items).astype(np.int32) if n_units else np.zeros(0, np.int32)
    return Targets(units, offsets, items, np.zeros(len(items), np.float32), data.n_items, "t")


ALL_MODELS = [
    ("random", {}), ("popular", {}), ("als", {"factors": 8, "iterations": 3}),
    ("bpr", {"factors": 8, "iterations": 5}), ("lmf", {"factors": 8, "iterations": 3}),
    ("item_knn", {"similarity": "cosine", "k": 10}), ("item_knn", {"similarity": "bm25"}),
    ("item_knn", {"similarity": "tfidf"}), ("user_knn", {"k": 5}), ("bias", {}),
    ("user_knn_rating", {"k": 5}),
]
