"""User-based nearest neighbours, for ranking (binary cosine) and for rating prediction
(mean-centred ratings), with scipy sparse products over blocks of users."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from recsys_eval.core import Interactions
from recsys_eval.recommend.base import Recommender


def _row_normalise(matrix: sp.csr_matrix) -> sp.csr_matrix:
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return sp.diags(scale.astype(np.float32)) @ matrix


def neighbour_weights(vectors: sp.csr_matrix, users: np.ndarray, k: int) -> sp.csr_matrix:
    """For each of ``users``, its k most similar other users (cosine of the row vectors) as a
    sparse (len(users), n_users) matrix of similarities; ties by user index. Users with zero or
    negative similarity are never neighbours (as in LensKit's default minimum similarity)."""
    sims = (vectors[users] @ vectors.T).toarray()
    sims[np.arange(len(users)), users] = -np.inf  # never one's own neighbour
    n_users = sims.shape[1]
    k = min(k, n_users - 1)
    if k <= 0:
        return sp.csr_matrix((len(users), n_users), dtype=np.float32)
    # Partition for the k-th value, then pick by (similarity desc, index asc) among those above it.
    top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    kth = sims[np.arange(len(users))[:, None], top].min(axis=1)
    candidates = sims >= kth[:, None]
    row, col = np.nonzero(candidates)
    order = np.lexsort((col, -sims[row, col], row))
    row, col = row[order], col[order]
    rank = np.arange(len(row)) - np.searchsorted(row, row)
    keep = (rank < k) & (sims[row, col] > 0)
    return sp.csr_matrix((sims[row[keep], col[keep]].astype(np.float32), (row[keep], col[keep])),
                         shape=(len(users), n_users))


class UserKNN(Recommender):
    """score(u, i) = sum of cosine(u, v) over u's k nearest users v who interacted with i."""

    def __init__(self, k: int = 50) -> None:
        self.k = int(k)

    def fit(self, train: Interactions) -> UserKNN:
        self.n_items = train.n_items
        self.user_items = train.csr()
        self.vectors = _row_normalise(self.user_items)
        return self

    def score_block(self, users: np.ndarray) -> np.ndarray:
        weights = neighbour_weights(self.vectors, np.asarray(users), self.k)
        return (weights @ self.user_items).toarray()


class UserKNNRating(Recommender):
    """Mean-centred user kNN rating prediction (Resnick):
    r(u, i) = mean_u + sum_v w(u, v) (r_vi - mean_v) / sum_v |w(u, v)| over u's k nearest users
    (cosine of mean-centred rating vectors, positive similarities only) that rated i; mean_u
    where none did."""

    predicts_ratings = True

    def __init__(self, k: int = 50) -> None:
        self.k = int(k)

    def fit(self, train: Interactions) -> UserKNNRating:
        self.n_items = train.n_items
        ratings = train.csr("rating").astype(np.float32)
        counts = np.diff(ratings.indptr)
        sums = np.asarray(ratings.sum(axis=1)).ravel()
        overall = float(sums.sum() / max(counts.sum(), 1))
        self.means = np.where(counts > 0, sums / np.maximum(counts, 1), overall).astype(np.float32)
        centred = ratings.copy()
        centred.data -= np.repeat(self.means, counts)
        self.centred = centred
        self.rated = ratings.copy()
        self.rated.data[:] = 1.0
        self.vectors = _row_normalise(centred)
        return self

    def score_block(self, users: np.ndarray) -> np.ndarray:
        users = np.asarray(users)
        weights = neighbour_weights(self.vectors, users, self.k)
        numerator = (weights @ self.centred).toarray()
        denominator = (abs(weights) @ self.rated).toarray()
        offset = np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)
        return self.means[users][:, None] + offset

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return self.score(users, items)
