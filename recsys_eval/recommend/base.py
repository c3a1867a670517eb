"""The recommender interface and the two ways a fitted recommender is ranked.

A recommender is fitted on a train Interactions and then scores (user, item) pairs, higher is
better. Two rankings are built from scores, in chunks so that no users x items matrix exists whole:

- :func:`rank_targets` scores only the listed target items of every unit (a sampled protocol costs
  ``n + 1`` scores per unit, not a full ranking) and sorts each unit's items;
- :func:`recommend_top_k` scores every item for a chunk of users and keeps the top k of the items
  that are candidates and not in the user's train row.

Ties are broken by item index ascending, everywhere. A score of ``-inf`` means "not ranked" (e.g.
an item an external run did not list): such items are left out of rankings, and the metrics count
items left out of a ranking as tied below its last item.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import nullcontext

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from recsys_eval.core import Interactions, Rankings, Targets
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.recommend.topk import (
    compact_units,
    rank_units_by_row_order,
    sort_units,
    top_k_factors,
    top_k_rows,
)

# Cells (users x columns) of one dense block computed at once where the caller did not choose a
# chunk: 8M float32 = 32 MB.
BLOCK_CELLS = 8_000_000
# Scores a thread computes at once for a factor model's top-k (8 MB float32: stays in cache).
TILE_CELLS = 1 << 21
# Fewest (user, item) pairs rank_targets scores in one call (4 MB of scores).
MIN_PAIRS = 1 << 20
# Users per sparse score block when pairs are gathered from sparse blocks.
SPARSE_BLOCK_USERS = 1024


class Recommender(ABC):
    """Fit on a train Interactions, then score (user, item) pairs; higher is better.

    Implement :meth:`fit` and at least one of :meth:`score` (scores of pairs) and
    :meth:`score_block` (scores of every item for a block of users): each has a default built on
    the other, so override both where both have a fast form (factor models: a row-wise dot product
    and one matrix product). ``fit`` sets ``n_items``. Rating predictors set ``predicts_ratings``
    and implement :meth:`predict`.
    """

    predicts_ratings: bool = False
    n_items: int = 0

    @abstractmethod
    def fit(self, train: Interactions) -> Recommender:
        """Learn from the training interactions; return self."""

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """float32 scores of the pairs (users[i], items[i]); by default gathered from score blocks
        of the distinct users, a bounded number of them at a time."""
        self._require_override("score_block")
        items = np.asarray(items, dtype=np.int64)
        out = np.empty(len(items), dtype=np.float32)
        for block, positions, rows in user_blocks(users, max(1, BLOCK_CELLS // max(self.n_items, 1))):
            out[positions] = self.score_block(block)[rows, items[positions]]
        return out

    def score_block(self, users: np.ndarray) -> np.ndarray:
        """float32 scores of every item for each of ``users``: shape (len(users), n_items); by
        default :meth:`score` of every pair."""
        self._require_override("score")
        users = np.asarray(users, dtype=np.int32)
        items = np.arange(self.n_items, dtype=np.int32)
        pairs = self.score(np.repeat(users, self.n_items), np.tile(items, len(users)))
        return np.asarray(pairs, dtype=np.float32).reshape(len(users), self.n_items)

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Predicted ratings of the pairs (rating predictors only)."""
        raise ConfigError(f"{type(self).__name__} does not predict ratings")

    def factors(self) -> tuple[np.ndarray, np.ndarray] | None:
        """For a model whose score is a dot product: ``(user_factors, item_factors_t)``, float32,
        row-major, score = user_factors[u] @ item_factors_t[:, i]. Top-k then computes the scores
        a few rows at a time per thread and scans them while they are in cache. None otherwise."""
        return None

    def _require_override(self, method: str) -> None:
        if not overrides(type(self), method):
            raise NotImplementedError(
                f"{type(self).__name__} must implement score(users, items) or score_block(users)"
            )


class SparseRecommender(Recommender):
    """A recommender whose scores of a block of users come as a sparse matrix (most entries 0, as
    in neighbourhood models): pairs are gathered from it without making it dense."""

    @abstractmethod
    def sparse_block(self, users: np.ndarray) -> sp.csr_matrix:
        """Scores of every item for each of ``users`` as a sparse (len(users), n_items) matrix."""

    def score_block(self, users: np.ndarray) -> np.ndarray:
        return self.sparse_block(np.asarray(users, dtype=np.int32)).toarray().astype(np.float32, copy=False)

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        items = np.asarray(items, dtype=np.int64)
        out = np.empty(len(items), dtype=np.float32)
        for block, positions, rows in user_blocks(users, SPARSE_BLOCK_USERS):
            out[positions] = np.asarray(self.sparse_block(block)[rows, items[positions]]).ravel()
        return out


def overrides(cls: type, method: str) -> bool:
    """True when ``cls`` defines ``method`` itself rather than inheriting Recommender's default."""
    return getattr(cls, method, None) is not getattr(Recommender, method)


def user_blocks(users: np.ndarray, block_size: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Group (user, item) pairs by user, ``block_size`` distinct users at a time.

    Yields ``(block, positions, rows)``: the block's distinct users (ascending), the positions of
    the pairs that belong to them, and each such pair's row in the block."""
    unique, inverse = np.unique(np.asarray(users), return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    sorted_rows = inverse[order]
    for first in range(0, len(unique), block_size):
        lo, hi = np.searchsorted(sorted_rows, [first, first + block_size])
        positions = order[lo:hi]
        yield unique[first:first + block_size].astype(np.int32), positions, inverse[positions] - first


def _checked_scores(model: Recommender, scores: np.ndarray, shape: tuple[int, ...], method: str) -> np.ndarray:
    scores = np.ascontiguousarray(scores, dtype=np.float32)
    if scores.shape != shape:
        raise DataError(f"{type(model).__name__}.{method} gave shape {scores.shape}, expected {shape}")
    return scores


def _nan_scores(model: Recommender, method: str) -> DataError:
    return DataError(f"{type(model).__name__}.{method} returned NaN scores")


def _check_chunk(chunk_size: int) -> None:
    if chunk_size < 1:
        raise ConfigError(f"chunk_size must be a positive integer, got {chunk_size}")


def rank_targets(model: Recommender, targets: Targets, *, chunk_size: int = 2048) -> Rankings:
    """Each unit's listed target items sorted by score (descending, ties by item index); items
    scored ``-inf`` (not ranked) are left out.

    Pairs are scored ``chunk_size`` units at a time, and at least ``MIN_PAIRS`` pairs at a time
    so that units of a few items do not pay one call each."""
    if targets.all_candidates:
        raise ConfigError("full-ranking targets are ranked with recommend_top_k, not rank_targets")
    _check_chunk(chunk_size)
    if _dense_targets(model, targets):
        return _dense_rankings(model, targets)
    offsets = targets.offsets
    pair_user = np.repeat(targets.unit_user, np.diff(offsets))
    scores = np.empty(len(targets.items), dtype=np.float32)
    start = 0
    while start < targets.n_units:
        stop = min(start + chunk_size, targets.n_units)
        stop = max(stop, min(int(np.searchsorted(offsets, offsets[start] + MIN_PAIRS)), targets.n_units))
        lo, hi = offsets[start], offsets[stop]
        scores[lo:hi] = _checked_scores(
            model, model.score(pair_user[lo:hi], targets.items[lo:hi]), (hi - lo,), "score"
        )
        start = stop
    if np.isnan(scores).any():
        raise _nan_scores(model, "score")
    return _sorted_rankings(targets, scores)


def _dense_targets(model: Recommender, targets: Targets) -> bool:
    """Whether the listed pairs cover at least 1/16 of the items per distinct user, and the model
    has a score block of its own."""
    has_block = type(model).score_block is not Recommender.score_block
    users = len(np.unique(targets.unit_user))
    return has_block and users > 0 and len(targets.items) / users >= max(model.n_items, 1) / 16


def _dense_rankings(model: Recommender, targets: Targets) -> Rankings:
    """Rankings of units that list most items (e.g. 1R+AN): one score block per user, its items
    sorted once, and each unit's items read off in that order (the units of a user share it)."""
    n_items = max(model.n_items, 1)
    offsets = targets.offsets.astype(np.int64, copy=False)
    out_items = np.empty(len(targets.items), dtype=np.int32)
    out_scores = np.empty(len(targets.items), dtype=np.float32)
    kept = np.zeros(targets.n_units, dtype=np.int64)
    mark = np.zeros(n_items, dtype=np.bool_)
    units = np.arange(targets.n_units)
    for block, positions, rows in user_blocks(targets.unit_user, max(1, BLOCK_CELLS // n_items)):
        scores = _checked_scores(model, model.score_block(block), (len(block), model.n_items), "score_block")
        order = np.argsort(-scores, axis=1, kind="stable")  # ties keep item order
        if rank_units_by_row_order(units[positions], rows, offsets, targets.items, order, scores,
                                   out_items, out_scores, kept, mark):
            raise _nan_scores(model, "score_block")
    new_offsets = compact_units(offsets, kept, out_items, out_scores)
    total = int(new_offsets[-1])
    if total < len(out_items):  # items scored -inf were left out
        out_items, out_scores = out_items[:total].copy(), out_scores[:total].copy()
    return Rankings(targets.unit_user.astype(np.int32), new_offsets, out_items, out_scores)


def _sorted_rankings(targets: Targets, scores: np.ndarray) -> Rankings:
    """Each unit's items by (score desc, item asc), items scored -inf left out."""
    offsets = targets.offsets
    order = sort_units(offsets, targets.items, scores)
    ranked = scores[order] > -np.inf
    order = order[ranked]
    kept = np.concatenate([[0], np.cumsum(ranked)])
    return Rankings(
        targets.unit_user.astype(np.int32), kept[offsets].astype(np.int64),
        targets.items[order].astype(np.int32), scores[order],
    )


def _top_k_chunk(
    model: Recommender,
    factors: tuple[np.ndarray, np.ndarray] | None,
    chunk: np.ndarray,
    seen: sp.csr_matrix,
    blocked: np.ndarray,
    k: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-k items, scores (chunk x k) and counts of one chunk of users."""
    if factors is not None:
        tile = max(1, TILE_CELLS // max(len(blocked), 1))
        item, score, count, nans = top_k_factors(*factors, chunk, seen.indptr, seen.indices, blocked, k, tile)
    else:
        scores = _checked_scores(model, model.score_block(chunk), (len(chunk), len(blocked)), "score_block")
        item, score, count, nans = top_k_rows(scores, chunk, seen.indptr, seen.indices, blocked, k)
    if nans:
        raise _nan_scores(model, "factors" if factors is not None else "score_block")
    return item, score, count


def recommend_top_k(
    model: Recommender,
    train: Interactions,
    users: np.ndarray,
    k: int,
    *,
    candidates: np.ndarray | None = None,
    chunk_size: int = 2048,
) -> Rankings:
    """The top ``k`` items of every user among the candidate items not in its train row.

    One ranking per entry of ``users`` (repeats allowed), in order; ``candidates`` is a bool mask
    over items (None: every item). Scores are computed ``chunk_size`` users at a time, so memory
    is bounded by ``chunk_size`` x n_items scores plus the output (for a model with
    :meth:`Recommender.factors`, by a few cached tiles per thread).
    """
    if k <= 0:
        raise ConfigError(f"k must be a positive integer, got {k}")
    _check_chunk(chunk_size)
    users = np.asarray(users, dtype=np.int32)
    seen = train.csr()
    n_items = train.n_items
    if candidates is None:
        blocked = np.zeros(n_items, dtype=np.bool_)
    else:
        candidates = np.asarray(candidates)
        if candidates.dtype != np.bool_ or candidates.shape != (n_items,):
            raise DataError(
                f"candidates must be a bool mask over the {n_items:,} items, got "
                f"{candidates.dtype} of shape {candidates.shape}"
            )
        blocked = ~candidates
    factors = model.factors() if callable(getattr(model, "factors", None)) else None
    items_out, scores_out = [], []
    lengths = np.zeros(len(users), dtype=np.int64)
    # a factor model's tiles are the parallelism: BLAS threads on top would oversubscribe
    with threadpool_limits(1, "blas") if factors is not None else nullcontext():
        for start in range(0, len(users), chunk_size):
            chunk = users[start:start + chunk_size]
            item, score, count = _top_k_chunk(model, factors, chunk, seen, blocked, k)
            keep = np.arange(k)[None, :] < count[:, None]
            items_out.append(item[keep])
            scores_out.append(score[keep])
            lengths[start:start + len(chunk)] = count
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return Rankings(
        users,
        offsets,
        np.concatenate(items_out) if items_out else np.zeros(0, np.int32),
        np.concatenate(scores_out) if scores_out else np.zeros(0, np.float32),
    )
