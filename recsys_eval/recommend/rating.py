"""The baseline rating predictor: global mean plus regularised item and user biases."""

from __future__ import annotations

import numpy as np

from recsys_eval.core import Interactions
from recsys_eval.errors import DataError
from recsys_eval.recommend.base import Recommender


class BiasPredictor(Recommender):
    """r(u, i) = mu + b_u + b_i (Koren's baseline predictor), fitted in one pass:
    b_i = sum_u (r_ui - mu) / (reg_item + n_i), then b_u = sum_i (r_ui - mu - b_i) / (reg_user + n_u)."""

    predicts_ratings = True

    def __init__(self, reg_item: float = 25.0, reg_user: float = 10.0) -> None:
        self.reg_item = float(reg_item)
        self.reg_user = float(reg_user)

    def fit(self, train: Interactions) -> BiasPredictor:
        if not train.has_rating:
            raise DataError(f"{train.source}: the bias predictor needs ratings")
        self.n_items = train.n_items
        users, items, ratings = train.users, train.items, train.ratings.astype(np.float64)
        self.mu = float(ratings.mean()) if len(ratings) else 0.0
        residual = ratings - self.mu
        n_i = np.bincount(items, minlength=train.n_items)
        self.item_bias = np.bincount(items, residual, minlength=train.n_items) / (self.reg_item + n_i)
        residual = residual - self.item_bias[items]
        n_u = np.bincount(users, minlength=train.n_users)
        self.user_bias = np.bincount(users, residual, minlength=train.n_users) / (self.reg_user + n_u)
        return self

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return (self.mu + self.user_bias[np.asarray(users)] + self.item_bias[np.asarray(items)]).astype(np.float32)

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return self.predict(users, items)

    def score_block(self, users: np.ndarray) -> np.ndarray:
        users = np.asarray(users)
        return (self.mu + self.user_bias[users][:, None] + self.item_bias[None, :]).astype(np.float32)
