"""Baselines from the ``implicit`` library: ALS, BPR, logistic MF and item kNN.

Models are fitted on the binary train matrix (every interaction counts as a positive, whatever its
rating). Scoring reads the learnt factors or similarity directly, so that a block of users is one
matrix product instead of one library call per user.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import scipy.sparse as sp
from implicit.utils import ParameterWarning
from threadpoolctl import threadpool_limits

from recsys_eval.core import Interactions
from recsys_eval.recommend.base import Recommender


def _threads(threads: int | None) -> int:
    return threads or os.cpu_count() or 1


class FactorModel(Recommender):
    """A matrix-factorisation model of implicit: score(u, i) = user_factors[u] . item_factors[i]."""

    def __init__(self, model_class: type, params: dict, *, seed: int, threads: int | None) -> None:
        # implicit checks the BLAS thread count when a model is made; fit runs with BLAS limited to
        # one thread (implicit's own threads do the work), so the check is satisfied here too.
        with threadpool_limits(1, "blas"):
            self.model = model_class(**params, num_threads=_threads(threads), random_state=seed)

    def fit(self, train: Interactions) -> FactorModel:
        self.n_items = train.n_items
        # implicit's own threads do the work; BLAS threads on top of them only oversubscribe.
        with threadpool_limits(1, "blas"):
            self.model.fit(train.csr(), show_progress=False)
        self.user_factors = np.asarray(self.model.user_factors, dtype=np.float32)
        self.item_factors = np.asarray(self.model.item_factors, dtype=np.float32)
        return self

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return np.einsum(
            "ij,ij->i", self.user_factors[np.asarray(users)], self.item_factors[np.asarray(items)]
        )

    def score_block(self, users: np.ndarray) -> np.ndarray:
        return self.user_factors[np.asarray(users)] @ self.item_factors.T


class ItemKNN(Recommender):
    """implicit's item-item kNN: score(u, i) = sum over u's training items j of sim(j, i), with the
    K most similar items kept per item (cosine, BM25 or TF-IDF weighting)."""

    def __init__(self, model_class: type, params: dict, *, threads: int | None) -> None:
        self.model = model_class(**params, num_threads=_threads(threads))

    def fit(self, train: Interactions) -> ItemKNN:
        self.n_items = train.n_items
        self.user_items = train.csr()
        with warnings.catch_warnings():  # implicit's own weighting step hands itself a COO matrix
            warnings.simplefilter("ignore", ParameterWarning)
            self.model.fit(self.user_items, show_progress=False)
        self.similarity = sp.csr_matrix(self.model.similarity, dtype=np.float32)
        return self

    def score_block(self, users: np.ndarray) -> np.ndarray:
        return (self.user_items[np.asarray(users)] @ self.similarity).toarray()
