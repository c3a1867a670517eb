"""Baselines from the ``implicit`` library: ALS, BPR, logistic MF and item kNN.

Models are fitted on the binary train matrix (every interaction counts as one positive, whatever
its rating). Scoring reads the learnt factors or similarity matrix directly, so that a block of
users is one matrix product instead of one library call per user.

Threads: implicit parallelises fitting over its own threads; OpenBLAS threads on top of them only
oversubscribe the cores (implicit warns about it), so ALS, the one that solves with BLAS, is fitted
with BLAS limited to one thread.
Scoring is :mod:`recsys_eval.recommend.factor_scores`' fixed-order float32 sums, the same bits
for a (user, item) pair whether it is scored alone, in a block or in a full ranking's tile.
"""

from __future__ import annotations

import os
import warnings
from contextlib import nullcontext

import numpy as np
import scipy.sparse as sp
from implicit.cpu.als import AlternatingLeastSquares
from implicit.utils import ParameterWarning
from threadpoolctl import threadpool_limits

from recsys_eval.core import Interactions
from recsys_eval.recommend.base import Recommender, SparseRecommender
from recsys_eval.recommend.factor_scores import factor_scores, pack_items, pair_scores


def default_threads(threads: int | None) -> int:
    """The threads to use: the given number, else every core of the machine."""
    return threads or os.cpu_count() or 1


class FactorModel(Recommender):
    """A matrix-factorisation model of implicit: score(u, i) = user_factors[u] . item_factors[i].

    For BPR and logistic MF, implicit stores the item biases as an extra factor column matched by
    a column of ones on the user side, so the dot product is the model's full score.
    """

    pairs_match_blocks = True  # pairs, blocks and tiles: one fixed-order sum per score

    def __init__(self, model_class: type, params: dict, *, seed: int, threads: int, blas_in_fit: bool = True) -> None:
        self.params = dict(params)
        # ALS solves with BLAS (implicit warns when BLAS has threads of its own), under a
        # process-wide limit: such a fit is not left to run beside other threads
        self.blas_in_fit = blas_in_fit
        self.single_threaded_fit = threads == 1 and not blas_in_fit
        with threadpool_limits(1, "blas"):  # implicit checks the BLAS threads when a model is made
            self.model = model_class(**params, num_threads=threads, random_state=seed)
        # ALS solves a user's factors in closed form given the item factors (recalculate_user);
        # BPR and logistic MF learn them by gradient steps, for which implicit has no fold-in
        self.folds_in = isinstance(self.model, AlternatingLeastSquares)

    def fit(self, train: Interactions) -> FactorModel:
        self.n_items = train.n_items
        # BLAS limits are process-wide and restored on exit: a fit without BLAS (BPR, LMF: their
        # own update loops) sets none, so it may run beside threads that set and restore theirs
        with threadpool_limits(1, "blas") if self.blas_in_fit else nullcontext():
            self.model.fit(train.csr(), show_progress=False)
        self.user_factors = np.ascontiguousarray(self.model.user_factors, dtype=np.float32)
        self.item_factors = np.ascontiguousarray(self.model.item_factors, dtype=np.float32)
        self._item_factors_t = np.ascontiguousarray(self.item_factors.T)  # row-major for the product
        return self

    def fold_in(self, history: Interactions, users: np.ndarray) -> FactorModel:
        """ALS: each fold-in user's factors solved from its history and the fitted item factors
        (implicit's ``recalculate_user``, the least-squares step of a fit's user half)."""
        if not self.folds_in:
            return super().fold_in(history, users)
        users = np.asarray(users, dtype=np.int32)
        with threadpool_limits(1, "blas") if self.blas_in_fit else nullcontext():
            solved = self.model.recalculate_user(users, history.csr()[users])
        self.user_factors[users] = np.asarray(solved, dtype=np.float32)
        return self

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return pair_scores(self.user_factors, self.item_factors, self.factor_rows(np.asarray(users)), np.asarray(items))

    def score_block(self, users: np.ndarray) -> np.ndarray:
        return factor_scores(self.user_factors, self.packed_items(), self.factor_rows(np.asarray(users)), self.n_items)

    def packed_items(self) -> np.ndarray:
        """The item factors in :func:`~recsys_eval.recommend.factor_scores.pack_items`' panels,
        packed once per item matrix."""
        if getattr(self, "_packed_for", None) is not self._item_factors_t:
            self._packed, self._packed_for = pack_items(self._item_factors_t), self._item_factors_t
        return self._packed

    def factors(self) -> tuple[np.ndarray, np.ndarray]:
        return self.user_factors, self._item_factors_t


class ItemKNN(SparseRecommender):
    """implicit's item-item kNN: score(u, i) = sum over u's training items j of sim(j, i), where
    sim keeps the K most similar items of every item (cosine, BM25 or TF-IDF weighting)."""

    folds_in = True

    def __init__(self, model_class: type, params: dict, *, threads: int) -> None:
        self.params = dict(params)
        self.model = model_class(**params, num_threads=threads)

    def fit(self, train: Interactions) -> ItemKNN:
        self.n_items = train.n_items
        self.user_items = train.csr()
        with warnings.catch_warnings():  # implicit's own weighting step hands itself a COO matrix
            warnings.simplefilter("ignore", ParameterWarning)
            self.model.fit(self.user_items, show_progress=False)
        self.similarity = sp.csr_matrix(self.model.similarity, dtype=np.float32)
        return self

    def fold_in(self, history: Interactions, users: np.ndarray) -> ItemKNN:
        """Fold-in users are scored from their history rows; the similarities stay as fitted."""
        self.user_items = history.csr()
        return self

    def sparse_block(self, users: np.ndarray) -> sp.csr_matrix:
        return self.user_items[users] @ self.similarity
