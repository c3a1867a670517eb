"""User-based nearest neighbours, for ranking (binary cosine, one neighbourhood per user) and for
rating prediction (mean-centred ratings, one neighbourhood per user and item).

Similarities of a block of users to every user are one sparse product; the block is sized so that
it holds at most ``BLOCK_CELLS`` similarities. Neighbours are users of positive similarity only,
never the user itself, and ties go to the smaller user index.
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp

from recsys_eval.core import Interactions
from recsys_eval.errors import DataError
from recsys_eval.recommend.base import (
    BLOCK_CELLS,
    Recommender,
    SparseRecommender,
    user_blocks,
)
from recsys_eval.recommend.topk import heap_drain, heap_offer, no_places, top_k_rows


def row_normalised(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """Rows scaled to unit length (all-zero rows stay zero), so that products are cosines."""
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
    return sp.csr_matrix(sp.diags(scale.astype(np.float32)) @ matrix, dtype=np.float32)


def similarity_block(vectors: sp.csr_matrix, users: np.ndarray) -> np.ndarray:
    """Dense cosines (len(users), n_users) of ``users`` to every user; -inf for a user itself."""
    sims = (vectors[users] @ vectors.T).toarray().astype(np.float32, copy=False)
    sims[np.arange(len(users)), users] = -np.inf
    return sims


def _block_users(n_users: int) -> int:
    return max(1, BLOCK_CELLS // max(n_users, 1))


def nearest_neighbours(vectors: sp.csr_matrix, users: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of ``users``, its ``k`` most similar users of positive cosine, best first:
    ``(neighbours, similarities, counts)``, the first two (len(users), k), of which each row's
    first ``counts`` entries hold."""
    users = np.asarray(users, dtype=np.int32)
    n_users = vectors.shape[0]
    k = max(1, min(k, n_users))
    step = _block_users(n_users)
    # top_k_rows skips the columns of a CSR row and blocked columns: here none (the user itself and
    # non-positive similarities are -inf, which it never takes)
    empty_indptr = np.zeros(step + 1, dtype=np.int64)
    empty_indices = np.zeros(0, dtype=np.int32)
    none_blocked = np.zeros(n_users, dtype=np.bool_)
    nbr = np.empty((len(users), k), dtype=np.int32)
    sim = np.empty((len(users), k), dtype=np.float32)
    count = np.zeros(len(users), dtype=np.int64)
    for start in range(0, len(users), step):
        block = users[start:start + step]
        sims = similarity_block(vectors, block)
        sims[sims <= 0] = -np.inf
        rows = np.arange(len(block), dtype=np.int32)
        stop = start + len(block)
        nbr[start:stop], sim[start:stop], count[start:stop], _ = top_k_rows(
            sims, rows, empty_indptr, empty_indices, none_blocked, k, *no_places(len(block)))
    return nbr, sim, count


class UserKNN(SparseRecommender):
    """score(u, i) = sum of cosine(u, v) over u's ``k`` nearest users v that interacted with i
    (binary interaction vectors).

    A user's neighbours do not depend on the protocol, so each user's are found the first time it
    is scored and kept (users x k entries): a study that ranks the same users under many protocols
    pays the similarity products once, not once per protocol."""

    def __init__(self, k: int = 50) -> None:
        self.k = int(k)

    def fit(self, train: Interactions) -> UserKNN:
        self.n_items = train.n_items
        self.user_items = train.csr()
        self.vectors = row_normalised(self.user_items)
        n_users = self.vectors.shape[0]
        width = max(1, min(self.k, n_users))
        self._neighbours = np.empty((n_users, width), dtype=np.int32)
        self._similarities = np.empty((n_users, width), dtype=np.float32)
        self._counts = np.full(n_users, -1, dtype=np.int64)  # -1: not found yet
        return self

    def sparse_block(self, users: np.ndarray) -> sp.csr_matrix:
        users = np.asarray(users, dtype=np.int32)
        missing = np.unique(users[self._counts[users] < 0])
        if len(missing):
            nbr, sim, count = nearest_neighbours(self.vectors, missing, self.k)
            self._neighbours[missing], self._similarities[missing], self._counts[missing] = nbr, sim, count
        count = self._counts[users]
        keep = np.arange(self._neighbours.shape[1])[None, :] < count[:, None]
        weights = sp.csr_matrix(
            (self._similarities[users][keep], self._neighbours[users][keep], np.concatenate([[0], np.cumsum(count)])),
            shape=(len(users), self.vectors.shape[0]),
        )
        return weights @ self.user_items


@numba.njit(cache=True)
def _resnick_offset(sims_row, item, indptr, raters, centred, heap_s, heap_i, best_s, best_i):
    """sum_v w(u, v) c_vi / sum_v w(u, v) over the len(heap_s) raters v of ``item`` most similar
    to u (positive similarity only); 0 when there is none. c_vi: v's mean-centred rating. The sums
    run over the neighbours best first (similarity descending, then user ascending), the order of
    :func:`_resnick_sweep`, so that both give the same float32 value."""
    size = 0
    for ptr in range(indptr[item], indptr[item + 1]):  # raters in ascending user index
        s = sims_row[raters[ptr]]
        if s > 0 and (size < len(heap_s) or s > heap_s[0]):
            size = heap_offer(heap_s, heap_i, size, s, ptr)
    n = size
    heap_drain(heap_s, heap_i, size, best_s, best_i)
    numerator = 0.0
    denominator = 0.0
    for h in range(n):
        numerator += best_s[h] * centred[best_i[h]]
        denominator += best_s[h]
    return numerator / denominator if denominator > 0 else 0.0


@numba.njit(cache=True, parallel=True, nogil=True)
def _resnick_pairs(sims, rows, items, indptr, raters, centred, k):
    out = np.empty(len(rows), dtype=np.float32)
    for p in numba.prange(len(rows)):
        heap_s = np.empty(k, dtype=np.float32)
        heap_i = np.empty(k, dtype=np.int64)
        best_s = np.empty(k, dtype=np.float32)
        best_i = np.empty(k, dtype=np.int64)
        out[p] = _resnick_offset(sims[rows[p]], items[p], indptr, raters, centred, heap_s, heap_i,
                                 best_s, best_i)
    return out


@numba.njit(cache=True, parallel=True, nogil=True)
def _resnick_sweep(sims, indptr, items, centred, n_items, k):
    """Every item's offset for each row of ``sims`` in one sweep over the user's neighbours, best
    first (similarity descending, user ascending; positive only): each neighbour adds its centred
    ratings to the items that have fewer than k neighbours so far. An item's first k raters in that
    order are its k most similar raters, the ones :func:`_resnick_offset` keeps, so the sweep costs
    one pass over the neighbours' ratings instead of one over every item's raters with a heap."""
    out = np.empty((sims.shape[0], n_items), dtype=np.float32)
    for r in numba.prange(sims.shape[0]):
        row = sims[r]
        neighbours = np.argsort(-row, kind="mergesort")  # stable: equal similarities by user index
        count = np.zeros(n_items, dtype=np.int64)
        numerator = np.zeros(n_items, dtype=np.float64)
        denominator = np.zeros(n_items, dtype=np.float64)
        for v in neighbours:
            s = row[v]
            if not s > 0:
                break
            for ptr in range(indptr[v], indptr[v + 1]):
                i = items[ptr]
                if count[i] < k:
                    count[i] += 1
                    numerator[i] += s * centred[ptr]
                    denominator[i] += s
        for i in range(n_items):
            out[r, i] = numerator[i] / denominator[i] if denominator[i] > 0 else 0.0
    return out


class UserKNNRating(Recommender):
    """Mean-centred user kNN rating prediction (Resnick et al. 1994, as LensKit's UserUser):

    r(u, i) = mean_u + sum_v w(u, v) (r_vi - mean_v) / sum_v w(u, v)

    over the ``k`` users v most similar to u among those who rated i, w the cosine of mean-centred
    rating vectors, positive similarities only; mean_u when no such user exists (the overall mean
    for a user without training ratings).
    """

    predicts_ratings = True
    pairs_match_blocks = True  # same neighbours, summed in the same order (the sweep's docstring)

    def __init__(self, k: int = 50) -> None:
        self.k = int(k)

    def fit(self, train: Interactions) -> UserKNNRating:
        if not train.has_rating:
            raise DataError(f"{train.source}: the user kNN rating predictor needs ratings")
        self.n_items = train.n_items
        ratings = train.csr("rating").astype(np.float64)
        counts = np.diff(ratings.indptr)
        sums = np.asarray(ratings.sum(axis=1)).ravel()
        overall = float(sums.sum() / max(counts.sum(), 1))
        self.means = np.where(counts > 0, sums / np.maximum(counts, 1), overall).astype(np.float32)
        centred = ratings.copy()
        centred.data -= np.repeat(self.means.astype(np.float64), counts)
        self.vectors = row_normalised(centred)
        centred.sort_indices()
        self.user_indptr = centred.indptr.astype(np.int64)
        self.user_rated = centred.indices.astype(np.int32)
        self.user_centred = centred.data.astype(np.float32)
        by_item = centred.tocsc()  # keeps centred ratings of exactly 0: the rater still counts
        by_item.sort_indices()
        self.item_indptr = by_item.indptr.astype(np.int64)
        self.item_raters = by_item.indices.astype(np.int32)
        self.item_centred = by_item.data.astype(np.float32)
        return self

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        items = np.asarray(items, dtype=np.int64)
        out = np.empty(len(items), dtype=np.float32)
        for block, positions, rows in user_blocks(users, _block_users(len(self.means))):
            sims = similarity_block(self.vectors, block)
            out[positions] = self.means[block[rows]] + _resnick_pairs(
                sims, rows, items[positions], self.item_indptr, self.item_raters, self.item_centred,
                self._heap_size(),
            )
        return out

    def score_block(self, users: np.ndarray) -> np.ndarray:
        users = np.asarray(users, dtype=np.int32)
        out = np.empty((len(users), self.n_items), dtype=np.float32)
        step = _block_users(len(self.means))
        for start in range(0, len(users), step):
            block = users[start:start + step]
            offset = _resnick_sweep(
                similarity_block(self.vectors, block),
                self.user_indptr, self.user_rated, self.user_centred, self.n_items, self._heap_size(),
            )
            out[start:start + len(block)] = self.means[block][:, None] + offset
        return out

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return self.score(users, items)

    def _heap_size(self) -> int:
        return max(1, min(self.k, len(self.means)))
