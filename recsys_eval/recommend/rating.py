"""The baseline rating predictor: global mean plus regularised user and item biases."""

from __future__ import annotations

import numpy as np

from recsys_eval.core import Interactions
from recsys_eval.errors import DataError
from recsys_eval.recommend.base import Recommender


def _shrunk_sums(index: np.ndarray, values: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """sum of ``values`` per index / ``denominator``; 0 where the denominator is 0."""
    sums = np.bincount(index, values, minlength=len(denominator))
    return np.divide(sums, denominator, out=np.zeros(len(denominator)), where=denominator > 0)


class BiasPredictor(Recommender):
    """r(u, i) = mu + b_u + b_i (Koren's baseline predictor), mu the mean training rating.

    The biases minimise sum (r_ui - mu - b_u - b_i)^2 + reg_user sum b_u^2 + reg_item sum b_i^2
    by alternating exact updates, starting from b_u = 0:
    b_i = sum_u (r_ui - mu - b_u) / (reg_item + n_i), then b_u = sum_i (r_ui - mu - b_i) / (reg_user + n_u).
    One iteration (the default) is the usual one-pass estimate (Koren 2010, section 2.1); more
    iterations converge to the least-squares solution. Unseen users and items get a bias of 0.
    """

    predicts_ratings = True
    pairs_match_blocks = True  # mu + b_u + b_i in the same float64 order, then float32

    def __init__(self, reg_item: float = 25.0, reg_user: float = 10.0, iterations: int = 1) -> None:
        self.reg_item = float(reg_item)
        self.reg_user = float(reg_user)
        self.iterations = int(iterations)

    def fit(self, train: Interactions) -> BiasPredictor:
        if not train.has_rating:
            raise DataError(f"{train.source}: the bias predictor needs ratings")
        self.n_items = train.n_items
        users, items, ratings = train.users, train.items, train.ratings.astype(np.float64)
        self.mu = float(ratings.mean()) if len(ratings) else 0.0
        residual = ratings - self.mu
        n_i = np.bincount(items, minlength=train.n_items)
        n_u = np.bincount(users, minlength=train.n_users)
        self.user_bias = np.zeros(train.n_users)
        for _ in range(self.iterations):
            self.item_bias = _shrunk_sums(items, residual - self.user_bias[users], self.reg_item + n_i)
            self.user_bias = _shrunk_sums(users, residual - self.item_bias[items], self.reg_user + n_u)
        return self

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return (
            self.mu + self.user_bias[np.asarray(users)] + self.item_bias[np.asarray(items)]
        ).astype(np.float32)

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return self.predict(users, items)

    def score_block(self, users: np.ndarray) -> np.ndarray:
        users = np.asarray(users)
        return (self.mu + self.user_bias[users][:, None] + self.item_bias[None, :]).astype(np.float32)
