"""User-based nearest neighbours, for ranking (binary cosine, one neighbourhood per user) and for
rating prediction (mean-centred ratings, one neighbourhood per user and item).

A user's similarities to every user are one row that a numba kernel sums from the unit vectors by
user and by item (:func:`similarity_row`) into a scratch row of the thread that uses it at once:
no block of users x users similarities is stored, and the kernels run on chunks of users in
parallel. Neighbours are users of positive similarity only, never the user itself, and ties go to
the smaller user index: the order (similarity descending, user ascending) of :func:`best_first`.
"""

from __future__ import annotations

import numba
import numpy as np
import scipy.sparse as sp

from recsys_eval.core import Interactions
from recsys_eval.core.chunks import chunk_bounds, run_chunks
from recsys_eval.core.sorting import equal_range, sort_items
from recsys_eval.errors import DataError
from recsys_eval.recommend.base import Recommender, SparseRecommender, user_blocks


def row_normalised(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """Rows scaled to unit length (all-zero rows stay zero), so that products are cosines; float32,
    the structure of ``matrix`` kept (explicit zeros too)."""
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0).astype(np.float32)
    unit = sp.csr_matrix(matrix, dtype=np.float32, copy=True)
    unit.data = (np.repeat(scale.astype(np.float64), np.diff(matrix.indptr)) * matrix.data).astype(np.float32)
    return unit


def cosine_index(vectors: sp.csr_matrix) -> tuple[np.ndarray, ...]:
    """What :func:`similarity_row` reads of the unit vectors ``vectors`` (users x items, indices
    sorted): by user ``(indptr, items, values)`` and by item ``(item_indptr, users,
    item_values)``, users ascending."""
    by_item = vectors.tocsc()
    by_item.sort_indices()
    return (vectors.indptr.astype(np.int64), vectors.indices.astype(np.int32), vectors.data.astype(np.float32),
            by_item.indptr.astype(np.int64), by_item.indices.astype(np.int32), by_item.data.astype(np.float32))


@numba.njit(cache=True, nogil=True)
def similarity_row(u, indptr, items, values, item_indptr, users, item_values, row):
    """``row[v]`` = cosine(u, v) for every user v (``row`` has n_users entries), -inf for u itself:
    for each of u's items i (ascending), for each rater v of i (ascending), row[v] += x_ui x_vi in
    float32, the sums of scipy's float32 sparse product.

    An item's raters are distinct, so four cells are read before any of them is written: the plain
    read-add-write loop runs 2-3 times slower (0.45 against 0.18 ms per user at ML-1M size), the
    CPU holding each read back behind the earlier writes it might depend on."""
    row[:] = 0
    for p in range(indptr[u], indptr[u + 1]):
        x = values[p]
        i = items[p]
        q, end = item_indptr[i], item_indptr[i + 1]
        while q + 4 <= end:
            v0, v1, v2, v3 = users[q], users[q + 1], users[q + 2], users[q + 3]
            a0 = row[v0] + x * item_values[q]
            a1 = row[v1] + x * item_values[q + 1]
            a2 = row[v2] + x * item_values[q + 2]
            a3 = row[v3] + x * item_values[q + 3]
            row[v0], row[v1], row[v2], row[v3] = a0, a1, a2, a3
            q += 4
        for q in range(q, end):
            row[users[q]] += x * item_values[q]
    row[u] = -np.inf


@numba.njit(cache=True)
def _order_scratch(n_users):
    """Scratch of :func:`best_first` for rows of ``n_users``: ``(order, keys, tmp, count)``."""
    return (np.empty(n_users, dtype=np.int32), np.empty(n_users, dtype=np.int64),
            np.empty(n_users, dtype=np.int64), np.empty(257, dtype=np.int64))


@numba.njit(cache=True)
def best_first(row, order, keys, tmp, count):
    """The users of positive ``row[v]`` best first (similarity descending, user ascending) into
    ``order``; returns how many.

    A radix sort of the keys (0x7F800000 - the bits of the similarity) << user bits | v: positive
    float32 values order as their bit patterns, so ascending keys are the order. At ML-1M size
    (3,000 positive neighbours of 6,040 users) 0.09 ms a user against 0.7 for a merge sort of the
    row."""
    user_bits = np.int64(1)
    while (np.int64(1) << user_bits) < len(row):
        user_bits += 1
    bits = row.view(np.int32)
    n = np.int64(0)
    for v in range(len(row)):  # written whatever the sign, kept if positive: no branch to mispredict
        keys[n] = ((np.int64(0x7F800000) - bits[v]) << user_bits) | v
        n += row[v] > 0
    sort_items(keys, n, 31 + user_bits, tmp, count)
    mask = (np.int64(1) << user_bits) - 1
    for j in range(n):
        order[j] = keys[j] & mask
    return n


def nearest_neighbours(cosines: tuple[np.ndarray, ...], users: np.ndarray,
                       k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each of ``users``, its ``k`` most similar users of positive cosine (``cosines`` from
    :func:`cosine_index`), best first: ``(neighbours, similarities, counts)``, the first two
    (len(users), k), of which each row's first ``counts`` entries hold."""
    users = np.asarray(users, dtype=np.int32)
    n_users = len(cosines[0]) - 1
    k = max(1, min(k, n_users))
    nbr = np.zeros((len(users), k), dtype=np.int32)
    sim = np.zeros((len(users), k), dtype=np.float32)
    count = np.zeros(len(users), dtype=np.int64)
    run_chunks(_nearest_chunk, chunk_bounds(len(users)), users, *cosines, nbr, sim, count)
    return nbr, sim, count


@numba.njit(cache=True, nogil=True)
def _nearest_chunk(lo, hi, users, indptr, items, values, item_indptr, item_users, item_values, nbr, sim, count):
    """:func:`nearest_neighbours` for the users ``lo:hi``."""
    row = np.empty(len(indptr) - 1, dtype=np.float32)
    order, keys, tmp, counts = _order_scratch(len(row))
    for r in range(lo, hi):
        similarity_row(users[r], indptr, items, values, item_indptr, item_users, item_values, row)
        count[r] = min(best_first(row, order, keys, tmp, counts), nbr.shape[1])
        for j in range(count[r]):
            nbr[r, j] = order[j]
            sim[r, j] = row[order[j]]


class UserKNN(SparseRecommender):
    """score(u, i) = sum of cosine(u, v) over u's ``k`` nearest users v that interacted with i
    (binary interaction vectors).

    A user's neighbours do not depend on the protocol, so each user's are found the first time it
    is scored and kept (users x k entries): a study that ranks the same users under many protocols
    pays the similarities once, not once per protocol."""

    folds_in = True

    def __init__(self, k: int = 50) -> None:
        self.k = int(k)

    def fold_in(self, history: Interactions, users: np.ndarray) -> UserKNN:
        """Fold-in users are compared by their history rows with the users fitted on only: the
        query side of the cosines comes from ``history``, the neighbour side stays as fitted (a
        fold-in user is nobody's neighbour)."""
        queries = cosine_index(row_normalised(history.csr()))
        self.cosines = queries[:3] + self.cosines[3:]
        self._counts[np.asarray(users)] = -1
        return self

    def fit(self, train: Interactions) -> UserKNN:
        self.n_items = train.n_items
        self.user_items = train.csr()
        self.cosines = cosine_index(row_normalised(self.user_items))
        n_users = self.user_items.shape[0]
        width = max(1, min(self.k, n_users))
        self._neighbours = np.empty((n_users, width), dtype=np.int32)
        self._similarities = np.empty((n_users, width), dtype=np.float32)
        self._counts = np.full(n_users, -1, dtype=np.int64)  # -1: not found yet
        return self

    def neighbourhoods(self, users: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each of ``users``' neighbours and similarities, best first, ``(len(users), k)``, and how
        many of each row hold; found now for the users not scored before."""
        users = np.asarray(users, dtype=np.int32)
        missing = np.unique(users[self._counts[users] < 0])
        if len(missing):
            nbr, sim, count = nearest_neighbours(self.cosines, missing, self.k)
            self._neighbours[missing], self._similarities[missing], self._counts[missing] = nbr, sim, count
        return self._neighbours[users], self._similarities[users], self._counts[users]

    def sparse_block(self, users: np.ndarray) -> sp.csr_matrix:
        neighbours, similarities, count = self.neighbourhoods(users)
        keep = np.arange(neighbours.shape[1])[None, :] < count[:, None]
        weights = sp.csr_matrix(
            (similarities[keep], neighbours[keep], np.concatenate([[0], np.cumsum(count)])),
            shape=(len(count), self.user_items.shape[0]),
        )
        return weights @ self.user_items

    def score_block(self, users: np.ndarray) -> np.ndarray:
        """:meth:`sparse_block` made dense, summed straight into the block by
        :func:`_neighbour_sums_chunk` (the same float32 sums in the same order: the same bits)
        rather than as a sparse product turned dense, 3 times the time."""
        neighbours, similarities, count = self.neighbourhoods(users)
        out = np.zeros((len(count), self.n_items), dtype=np.float32)
        run_chunks(_neighbour_sums_chunk, chunk_bounds(len(count)), neighbours, similarities, count,
                   self.user_items.indptr, self.user_items.indices, self.user_items.data, out)
        return out


@numba.njit(cache=True, nogil=True)
def _neighbour_sums_chunk(lo, hi, neighbours, similarities, count, indptr, items, values, out):
    """``out[r, i]`` += sim(u, v) x_vi for each neighbour v of row r's user best first and each of
    v's items i, in float32, for the rows ``lo:hi``: the sums of scipy's float32 sparse product of
    the neighbour weights and the user-item matrix, in its order."""
    for r in range(lo, hi):
        for j in range(count[r]):
            v = neighbours[r, j]
            s = similarities[r, j]
            for p in range(indptr[v], indptr[v + 1]):
                out[r, items[p]] += s * values[p]


@numba.njit(cache=True)
def _offset(numerator, denominator):
    """sum_v w(u, v) c_vi / sum_v w(u, v) as float32, 0 without neighbours."""
    return np.float32(numerator / denominator if denominator > 0 else 0.0)


@numba.njit(cache=True, nogil=True)
def _resnick_sweep_chunk(lo, hi, users, indptr, items, values, item_indptr, raters, item_values, walk_ranks,
                         walk_centred, full, rank_of_item, means, k, out):
    """Every item's prediction for the users ``lo:hi`` (rows of ``out``) in one walk of the user's
    neighbours best first: each adds w(u, v) c_vi (c_vi its rating less its mean) and w(u, v) to
    the numerator and denominator of the items that have fewer than k neighbours so far. An
    item's first k raters in that order are its k most similar raters, the ones
    :func:`_resnick_pairs_chunk` keeps, summed in the same order: the same float32 values.

    The walk reads each neighbour's ratings by item popularity (``walk_ranks``, the items'
    popularity ranks, ascending in each row, and ``walk_centred``). The popular items fill up
    first, so the ranks below a frontier soon all hold ``full[t]`` = min(k, raters) neighbours,
    and every later neighbour's row is read from the frontier on (a binary search): at ML-1M size
    and k = 50 the walk reads 190,000 of the 400,000 ratings of a user's 3,000 positive
    neighbours, 170,000 of them taken, and stops once every item is full. (Finishing the open
    items from their raters instead never pays there: the open items keep more raters than the
    walk has ratings left.) The sums are kept by popularity rank and written out by item."""
    n_items = out.shape[1]
    row = np.empty(len(indptr) - 1, dtype=np.float32)
    order, keys, tmp, counts = _order_scratch(len(row))
    count = np.empty(n_items, dtype=np.int64)
    numerator = np.empty(n_items, dtype=np.float64)
    denominator = np.empty(n_items, dtype=np.float64)
    for r in range(lo, hi):
        u = users[r]
        similarity_row(u, indptr, items, values, item_indptr, raters, item_values, row)
        n = best_first(row, order, keys, tmp, counts)
        count[:] = 0
        numerator[:] = 0.0
        denominator[:] = 0.0
        frontier = 0  # every item of popularity rank below it is full
        for j in range(n):
            if frontier == n_items:
                break
            v = order[j]
            s = row[v]
            first, last = indptr[v], indptr[v + 1]
            for p in range(first + equal_range(walk_ranks[first:last], frontier)[0], last):
                t = walk_ranks[p]
                if count[t] < k:
                    count[t] += 1
                    numerator[t] += s * walk_centred[p]
                    denominator[t] += s
            while frontier < n_items and count[frontier] == full[frontier]:
                frontier += 1
        for i in range(n_items):
            t = rank_of_item[i]
            out[r, i] = means[u] + _offset(numerator[t], denominator[t])


# the bit index of each 64-bit de Bruijn product's top 6 bits
_DE_BRUIJN_BITS = np.zeros(64, dtype=np.int64)
for _b in range(64):
    _DE_BRUIJN_BITS[((1 << _b) * 0x03F79D71B4CA8B09 % (1 << 64)) >> 58] = _b


@numba.njit(cache=True)
def _lowest_bit(word):
    """Index of the lowest set bit of a non-zero uint64 (de Bruijn multiplication)."""
    return _DE_BRUIJN_BITS[((word & (~word + np.uint64(1))) * np.uint64(0x03F79D71B4CA8B09)) >> np.uint64(58)]


@numba.njit(cache=True, nogil=True)
def _resnick_pairs_chunk(lo, hi, block, pair_ptr, positions, pair_items, indptr, items, values, item_indptr, raters,
                         item_values, item_centred, means, k, out):
    """The predictions of the pairs of the users ``block[lo:hi]`` (user b's pairs are
    ``positions[pair_ptr[b]:pair_ptr[b + 1]]``).

    Per user, the rank of each positive neighbour in the order best first; per pair, the ranks of
    the item's raters of positive similarity are listed, marked in a bitmap, and the first k marks
    in rank order summed: the sweep's neighbours in the sweep's order, without a heap or a sort
    per pair: 2 against 7 us a pair with a heap of the raters at ML-1M size, and the order costs
    the time of 40 pairs. The marks are set from the list rather than as the raters are read,
    which takes a third off."""
    row = np.empty(len(indptr) - 1, dtype=np.float32)
    order, keys, tmp, counts = _order_scratch(len(row))
    rank = np.empty(len(row), dtype=np.int32)
    listed = np.empty(len(row), dtype=np.int64)  # rank << 32 | the rater's place among the item's raters
    at = np.empty(len(row), dtype=np.int64)  # that place, by rank
    marks = np.zeros((len(row) + 63) // 64, dtype=np.uint64)
    for b in range(lo, hi):
        u = block[b]
        similarity_row(u, indptr, items, values, item_indptr, raters, item_values, row)
        n = best_first(row, order, keys, tmp, counts)
        rank[:] = n  # not a neighbour
        for j in range(n):
            rank[order[j]] = j
        for q in range(pair_ptr[b], pair_ptr[b + 1]):
            p = positions[q]
            i = pair_items[p]
            first = item_indptr[i]
            m = 0
            for ptr in range(first, item_indptr[i + 1]):
                j = rank[raters[ptr]]
                listed[m] = (np.int64(j) << 32) | (ptr - first)
                m += j < n
            for h in range(m):
                j = listed[h] >> 32
                marks[j >> 6] |= np.uint64(1) << np.uint64(j & 63)
                at[j] = first + (listed[h] & 0xFFFFFFFF)
            numerator = 0.0
            denominator = 0.0
            taken = 0
            for w in range((n + 63) >> 6):
                word = marks[w]
                marks[w] = 0
                while word and taken < k:
                    j = w * 64 + _lowest_bit(word)
                    word &= word - np.uint64(1)
                    s = row[order[j]]
                    numerator += s * item_centred[at[j]]
                    denominator += s
                    taken += 1
            out[p] = means[u] + _offset(numerator, denominator)


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
        # the unit vectors keep the centred ratings' structure, a rating equal to the user's mean
        # as an explicit 0 (the rater still counts): the cosine index by user and by item is also
        # the ratings' structure
        self.cosines = cosine_index(row_normalised(centred))
        by_item = centred.tocsc()
        by_item.sort_indices()
        self.item_centred = by_item.data.astype(np.float32)
        # the sweep's copy of the ratings: items by popularity rank (most raters first), ascending
        # in each user's row
        raters = np.diff(by_item.indptr)
        by_popularity = np.argsort(-raters, kind="stable")
        self.rank_of_item = np.empty(self.n_items, dtype=np.int64)
        self.rank_of_item[by_popularity] = np.arange(self.n_items)
        walk = sp.csr_matrix((centred.data, self.rank_of_item[centred.indices], centred.indptr), shape=centred.shape)
        walk.sort_indices()
        self.walk_ranks = walk.indices.astype(np.int32)
        self.walk_centred = walk.data.astype(np.float32)
        self.full = np.minimum(raters[by_popularity], self._k()).astype(np.int64)
        return self

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        items = np.asarray(items, dtype=np.int64)
        out = np.empty(len(items), dtype=np.float32)
        for block, positions, rows in user_blocks(users, max(1, len(items))):  # one block: every user
            pair_ptr = np.searchsorted(rows, np.arange(len(block) + 1))
            run_chunks(_resnick_pairs_chunk, chunk_bounds(len(block)), block, pair_ptr, positions, items,
                       *self.cosines, self.item_centred, self.means, self._k(), out)
        return out

    def score_block(self, users: np.ndarray) -> np.ndarray:
        users = np.asarray(users, dtype=np.int32)
        out = np.empty((len(users), self.n_items), dtype=np.float32)
        run_chunks(_resnick_sweep_chunk, chunk_bounds(len(users)), users, *self.cosines, self.walk_ranks,
                   self.walk_centred, self.full, self.rank_of_item, self.means, self._k(), out)
        return out

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return self.score(users, items)

    def _k(self) -> int:
        """k, at least 1 and at most the number of users."""
        return max(1, min(self.k, len(self.means)))
