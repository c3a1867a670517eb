"""Relevance of the test side: Rel(u) and the gains (docs/CONVENTIONS.md#relevance-and-gains).

Rel(u) is the set of u's test items whose rating reaches the threshold (every test item when the
threshold is None or the data has no ratings). A relevant item's gain is its test rating (graded, as
trec_eval takes qrel grades), or 1.0 when the data has no ratings; every other item's gain is 0.

A relevant item must have a positive gain (the measure stage tells relevance by ``gain > 0``). A test
rating of 0 or below that would be relevant (threshold None or <= 0) is therefore an error, never a
silent change: pick a threshold above 0, or drop the rating column to judge by presence alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from numba import njit

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError, DataError


@dataclass(frozen=True)
class Qrels:
    """Relevance judgements: the test items of every user in CSR form, with their gains
    (0 = not relevant), as trec_eval's qrels.

    Attributes:
        indptr: int64, ``n_users + 1`` row bounds.
        items: int32 item indices, ascending within each user.
        gain: float32 gain of every test item; ``gain > 0`` marks Rel(u).
    """

    indptr: np.ndarray
    items: np.ndarray
    gain: np.ndarray

    @property
    def n_users(self) -> int:
        return len(self.indptr) - 1

    def counts(self) -> np.ndarray:
        """Test items per user."""
        return np.diff(self.indptr)

    def relevant_counts(self) -> np.ndarray:
        """|Rel(u)| per user."""
        return row_sums(self.gain > 0, self.indptr)

    def restrict(self, item_mask: np.ndarray) -> Qrels:
        """The same test side with only the items of ``item_mask`` (a bool mask over items)."""
        keep = item_mask[self.items]
        indptr = np.concatenate([[0], np.cumsum(row_sums(keep, self.indptr))]).astype(np.int64)
        return Qrels(indptr, self.items[keep], self.gain[keep])


def qrels(split: Split, threshold: float | None = None) -> Qrels:
    """Rel(u) and gains of every test interaction of ``split``, grouped by user."""
    gain = test_gains(split, threshold)
    test = split.test
    indptr, order = group_by_user(test.users, test.items, test.n_users, test.n_items)
    return Qrels(indptr, test.items[order], gain[order])


def test_gains(split: Split, threshold: float | None = None) -> np.ndarray:
    """The gain of every test row of ``split`` in its row order (float32; 0 = not relevant).

    Raises DataError for an empty test side, a threshold on data without ratings, a threshold above
    every rating of the split (of a whole fold: a part of its users, :attr:`Split.part`, may all
    rate below it), or a relevant test rating that is not positive.
    """
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.number))
                                  or not np.isfinite(threshold)):
        raise ConfigError(f"relevance threshold must be a finite number or None, got {threshold!r}")
    test = split.test
    if len(test) == 0:
        raise DataError(f"split {split.name!r}: the test side is empty; there is nothing to evaluate")
    ratings = test.ratings
    if threshold is not None and ratings is None:
        raise DataError(
            f"split {split.name!r}: a relevance threshold ({threshold}) needs test ratings, but the "
            "test side has no 'rating' column; use threshold=None to count every test item as relevant"
        )
    if ratings is None:
        return np.ones(len(test), dtype=np.float32)
    if threshold is not None and not split.part:  # a fold's check, made on the fold (Split.part)
        train_ratings = split.train.ratings if len(split.train) else None
        highest = float(ratings.max())
        if train_ratings is not None:
            highest = max(highest, float(train_ratings.max()))
        if threshold > highest:
            raise DataError(
                f"split {split.name!r}: relevance threshold {threshold} is above every rating (the "
                f"highest is {highest:g}); no item could ever be relevant"
            )
    relevant = np.ones(len(test), dtype=bool) if threshold is None else ratings >= threshold
    bad = relevant & (ratings <= 0)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise DataError(
            f"split {split.name!r}: {int(bad.sum()):,} test ratings <= 0 would be relevant "
            f"(threshold {threshold}), e.g. user index {int(test.users[first])}, item index "
            f"{int(test.items[first])}, rating {float(ratings[first]):g}; a relevant item needs a "
            "positive gain: set a threshold above 0, or drop the rating column"
        )
    return np.where(relevant, ratings, 0.0).astype(np.float32)


def group_by_user(
    users: np.ndarray, items: np.ndarray, n_users: int, n_items: int
) -> tuple[np.ndarray, np.ndarray]:
    """CSR row bounds over users and the permutation that sorts rows by (user, item)."""
    position = np.arange(1, len(users) + 1, dtype=np.int64)
    matrix = sp.csr_matrix((position, (users, items)), shape=(n_users, n_items))
    matrix.sort_indices()
    if matrix.nnz != len(users):
        raise DataError("interactions: (user, item) pairs must be unique to build targets")
    return matrix.indptr.astype(np.int64), matrix.data - 1


def train_rows(train: Interactions) -> tuple[np.ndarray, np.ndarray]:
    """Tr(u) of every user as CSR ``(indptr int64, items int32)``, items ascending in each row."""
    matrix = train.csr()
    return matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32, copy=False)


def check_disjoint(split: Split, tr_ptr: np.ndarray, tr_idx: np.ndarray, judged: Qrels) -> None:
    """Raise DataError if a (user, item) pair is both in train and in test: a user's training items
    are never ranked for that user, so such a test item could never be found."""
    shared, user, item = _first_shared(tr_ptr, tr_idx, judged.indptr, judged.items)
    if shared:
        raise DataError(
            f"split {split.name!r}: {shared:,} (user, item) pairs are in both train and test, e.g. "
            f"user index {user}, item index {item}; a split must keep them apart"
        )


@njit(cache=True)
def _first_shared(tr_ptr, tr_idx, te_ptr, te_items):
    """Number of pairs in both sorted CSR structures, and the first such (user, item)."""
    shared, first_user, first_item = 0, -1, -1
    for u in range(len(te_ptr) - 1):
        t, t_end = tr_ptr[u], tr_ptr[u + 1]
        for p in range(te_ptr[u], te_ptr[u + 1]):
            item = te_items[p]
            while t < t_end and tr_idx[t] < item:
                t += 1
            if t < t_end and tr_idx[t] == item:
                if shared == 0:
                    first_user, first_item = u, item
                shared += 1
    return shared, first_user, first_item


@njit(cache=True)
def count_in_pool(indptr, items, pool, rows):
    """Per row of ``rows``, how many of its items the bool mask ``pool`` holds (CSR rows)."""
    counts = np.zeros(len(rows), dtype=np.int64)
    for j in range(len(rows)):
        r = rows[j]
        for p in range(indptr[r], indptr[r + 1]):
            if pool[items[p]]:
                counts[j] += 1
    return counts


def row_sums(flags: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """Per CSR row, the number of true ``flags``."""
    cumulative = np.concatenate([[0], np.cumsum(flags, dtype=np.int64)])
    return cumulative[indptr[1:]] - cumulative[indptr[:-1]]
