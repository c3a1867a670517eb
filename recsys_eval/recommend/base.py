"""The recommender interface and the two ways a fitted recommender is ranked.

A recommender is fitted on a train Interactions and then scores (user, item) pairs, higher is
better. Two rankings are built from scores, in chunks so that no users x items matrix exists whole:

- :func:`rank_targets` scores only the listed target items of every unit (a sampled protocol costs
  ``n + 1`` scores per unit, not a full ranking) and sorts each unit's items;
- :func:`recommend_top_k` scores every item for a chunk of users and keeps the top k of the items
  that are candidates and not in the user's train row; given the targets, it also places each
  unit's relevant items among all of its candidates in the same pass, for an exact AUC.

Under 1R, :func:`rank_one_relevant` gives what every metric of a unit is a function of, the place
of its one relevant item among its non-relevant targets (:class:`RelevantRanks`), without a
ranking per unit: listed targets are scored and counted, not sorted; "every candidate" targets
(1R+AN) are counted in one scoring pass per user.

A model whose score does not depend on the user (:meth:`Recommender.item_scores`, e.g. popularity)
is ranked from one global order: each user's top k is the head of that order less its train items.

Ties are broken by item index ascending, everywhere. A score of ``-inf`` means "not ranked" (e.g.
an item an external run did not list): such items are left out of rankings, and the metrics count
items left out of a ranking as tied below its last item.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from recsys_eval.core import Interactions, Rankings, Targets
from recsys_eval.core.units import RelevantRanks
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.recommend.factor_scores import pack_items
from recsys_eval.recommend.topk import (
    compact_units,
    no_places,
    place_global,
    place_listed,
    rank_units_by_row_order,
    sort_units,
    top_k_factors,
    top_k_global,
    top_k_rows,
)

# Cells (users x columns) of one dense block computed at once where the caller did not choose a
# chunk: 8M float32 = 32 MB.
BLOCK_CELLS = 8_000_000
# Scores a thread computes at once for a factor model's top-k (32 MB float32). With the fixed-order
# kernel (factor_scores.py) at 59,047 items x 64 factors, 6,000 users' product and scan took the
# same CPU time (1.29-1.35 s, 1 and 2 threads) with tiles of 36 to 142 users, more at 12 or 284.
TILE_CELLS = 1 << 23
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
    #: True when :meth:`fit` runs on one thread by design (e.g. BPR, for reproducibility): a run
    #: fits it in the background while its other systems are evaluated, or, with no other
    #: systems, several such models side by side, one per core.
    single_threaded_fit: bool = False
    #: True when ``score(u, i)`` is ``score_block([u])[0, i]`` to the bit (both computed the same
    #: way): pairs may then be read off a score block already computed (:class:`SharedBlock`).
    pairs_match_blocks: bool = False
    #: True when :meth:`fold_in` can score users the model was not fitted on from their fold-in
    #: history, as a user-disjoint split needs (docs/CONVENTIONS.md#user-disjoint-split).
    folds_in: bool = False

    @abstractmethod
    def fit(self, train: Interactions) -> Recommender:
        """Learn from the training interactions; return self."""

    def fold_in(self, history: Interactions, users: np.ndarray) -> Recommender:
        """After :meth:`fit`: let the model score ``users`` (user indices it was fitted without)
        from their rows of ``history`` (the train side with their fold-in rows), leaving what it
        learnt from the other users as it is; return self. Only where :attr:`folds_in`."""
        raise ConfigError(f"{type(self).__name__} cannot score users it was not fitted on (no fold-in)")

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """float32 scores of the pairs (users[i], items[i]); by default gathered from score blocks
        of the distinct users, a bounded number of them at a time."""
        self._require_override("score_block")
        return block_scores(self, users, items)

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
        row-major, score(u, i) = user_factors[r] @ item_factors_t[:, i], r the :meth:`factor_rows` of u,
        summed as :mod:`recsys_eval.recommend.factor_scores` does (in order, in float32; factors of
        another dtype are rounded to float32 first).
        Top-k then computes the scores a few rows at a time per thread and scans them while they
        are in cache. None otherwise."""
        return None

    def factor_rows(self, users: np.ndarray) -> np.ndarray:
        """The rows of :meth:`factors`' user matrix that hold ``users``: the user indices
        themselves, unless the model holds only some users' factors (a Spark partition's)."""
        return users

    def item_scores(self) -> np.ndarray | None:
        """For a model whose score of an item does not depend on the user (popularity): the
        float32 score of every item. Rankings are then read off one global order of the items
        instead of a score block per user. None otherwise."""
        return None

    def _require_override(self, method: str) -> None:
        if not overrides(type(self), method):
            raise NotImplementedError(
                f"{type(self).__name__} must implement score(users, items) or score_block(users)"
            )


class SparseRecommender(Recommender):
    """A recommender whose scores of a block of users come as a sparse matrix (most entries 0, as
    in neighbourhood models): pairs are gathered from it without making it dense."""

    pairs_match_blocks = True  # a pair is an entry of the sparse block a score block densifies

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


class SharedBlock(Recommender):
    """A fitted model seen through one score block of the users ``first:stop``, computed the first
    time a block of them is asked for and then read by every ranking of those users: the target
    sets of a fold that score the same users (full ranking, popularity bins, 1R lists and their
    pooled-AUC samples) pay one scoring pass instead of one each. Pairs are read off the block once
    it exists when the model's pairs match its blocks (``pairs_match_blocks``); anything else, and
    users outside the range, go to the model. Memory: (stop - first) x n_items float32 scores,
    the chunk the caller's memory budget sized."""

    def __init__(self, model: Recommender, first: int, stop: int) -> None:
        self.model, self.first, self.stop = model, int(first), int(stop)
        self.n_items = model.n_items
        self.predicts_ratings = model.predicts_ratings
        self._block: np.ndarray | None = None

    @staticmethod
    def shares(model: Recommender) -> bool:
        """Whether ``model`` gains from a shared block: it scores users by blocks (no factors for
        tiles, no item scores for one global order)."""
        return not any(callable(getattr(model, name, None)) and getattr(model, name)() is not None
                       for name in ("factors", "item_scores"))

    def fit(self, train: Interactions) -> SharedBlock:
        raise ConfigError("a shared block reads a fitted model; fit the model itself")

    def _rows(self, users: np.ndarray) -> np.ndarray | None:
        rows = np.asarray(users, dtype=np.int64) - self.first
        if len(rows) and (rows.min() < 0 or rows.max() >= self.stop - self.first):
            return None
        return rows

    def score_block(self, users: np.ndarray) -> np.ndarray:
        rows = self._rows(users)
        if rows is None:
            return self.model.score_block(users)
        if self._block is None:
            shape = (self.stop - self.first, self.n_items)
            block = self.model.score_block(np.arange(self.first, self.stop, dtype=np.int32))
            self._block = _checked_scores(self.model, block, shape, "score_block")
        return self._block[rows]

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        rows = self._rows(users)
        if rows is None or self._block is None or not self.model.pairs_match_blocks:
            return self.model.score(users, items)
        return self._block[rows, np.asarray(items, dtype=np.int64)]

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        return self.model.predict(users, items)


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


def block_scores(model: Recommender, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """float32 scores of the pairs (users[i], items[i]) gathered from ``model.score_block`` of the
    distinct users, ``BLOCK_CELLS // n_items`` of them at a time (ascending)."""
    items = np.asarray(items, dtype=np.int64)
    out = np.empty(len(items), dtype=np.float32)
    for block, positions, rows in user_blocks(users, max(1, BLOCK_CELLS // max(model.n_items, 1))):
        out[positions] = model.score_block(block)[rows, items[positions]]
    return out


def _checked_scores(model: Recommender, scores: np.ndarray, shape: tuple[int, ...], method: str) -> np.ndarray:
    scores = np.ascontiguousarray(scores, dtype=np.float32)
    if scores.shape != shape:
        raise DataError(f"{type(model).__name__}.{method} gave shape {scores.shape}, expected {shape}")
    return scores


def _nan_scores(model: Recommender, method: str) -> DataError:
    return DataError(f"{type(model).__name__}.{method} returned NaN scores")


def _check_fitted(model: Recommender, n_items: int, what: str) -> None:
    """A model must be fitted, on data indexed like the ``what`` it ranks (``n_items`` items)."""
    fitted = getattr(model, "n_items", 0)
    if fitted <= 0:
        raise ConfigError(f"{type(model).__name__} is not fitted: call fit(train) before ranking with it")
    if fitted != n_items:
        raise DataError(
            f"{type(model).__name__} was fitted on {fitted:,} items but the {what} index {n_items:,}; "
            "fit and rank on splits of the same Interactions"
        )


def _user_indices(users: np.ndarray, n_users: int) -> np.ndarray:
    """``users`` as int32 user indices, each in 0..n_users - 1 (indices of the train Interactions,
    not raw ids)."""
    users = np.asarray(users)
    if users.size and (users.dtype.kind not in "iu" or users.min() < 0 or users.max() >= n_users):
        shown = f"{users.dtype} values" if users.dtype.kind not in "iu" else f"values in [{users.min()}, {users.max()}]"
        raise DataError(
            f"users must be user indices of the train data, integers in 0..{n_users - 1}; got {shown} "
            "(map raw ids with Interactions' user index first)"
        )
    return users.astype(np.int32, copy=False)


def _check_chunk(chunk_size: int) -> None:
    if chunk_size < 1:
        raise ConfigError(f"chunk_size must be a positive integer, got {chunk_size}")


def rank_targets(
    scorer: Recommender | np.ndarray, targets: Targets, *, k: int | None = None, chunk_size: int = 2048
) -> Rankings:
    """Each unit's listed target items sorted by score (descending, ties by item index ascending);
    items scored ``-inf`` (not ranked) are left out; ``k`` keeps each unit's top k.

    ``scorer`` is a recommender, or the scores you computed yourself: an array with one score per
    listed target item, in ``targets.items`` order. A recommender scores ``chunk_size`` units at a
    time, and at least ``MIN_PAIRS`` pairs at a time so that units of a few items do not pay one
    call each. NaN scores raise."""
    if targets.all_candidates:
        raise ConfigError("full-ranking targets are ranked with recommend_top_k, not rank_targets")
    if targets.one_relevant:
        raise ConfigError("one-relevant targets are ranked with rank_one_relevant, not rank_targets")
    if k is not None and k < 1:
        raise ConfigError(f"rank_targets: k must be a positive integer, got {k}")
    _check_chunk(chunk_size)
    if isinstance(scorer, (np.ndarray, list, tuple)):
        scores = _given_scores(scorer, targets)
    else:
        _check_fitted(scorer, targets.n_items, "targets")
        if _dense_targets(scorer, len(targets.items), targets.unit_user):
            return _top(_dense_rankings(scorer, targets), k)
        scores = score_units(scorer, targets.unit_user, targets.offsets, targets.items, chunk_size)
    return _top(_sorted_rankings(targets, scores), k)


def _given_scores(scores: np.ndarray, targets: Targets) -> np.ndarray:
    """Scores a caller passed for ``targets.items``, checked: one per item, none NaN."""
    scores = np.asarray(scores)
    if scores.dtype.kind not in "fiu" or scores.shape != targets.items.shape:
        raise DataError(
            f"rank_targets: scores of dtype {scores.dtype} and shape {scores.shape} for "
            f"{len(targets.items):,} target items; expected one number per listed target item"
        )
    scores = scores.astype(np.float64, copy=False)
    if np.isnan(scores).any():
        raise DataError(f"rank_targets: {int(np.isnan(scores).sum()):,} NaN scores; expected numbers")
    return scores


def _top(rankings: Rankings, k: int | None) -> Rankings:
    """Each unit's first ``k`` ranked items (all of them when ``k`` is None)."""
    if k is None:
        return rankings
    lengths = np.minimum(np.diff(rankings.offsets), k)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    rank = np.arange(len(rankings.items), dtype=np.int64) - np.repeat(rankings.offsets[:-1], np.diff(rankings.offsets))
    keep = rank < k
    scores = None if rankings.scores is None else rankings.scores[keep]
    return Rankings(rankings.unit_user, offsets, rankings.items[keep], scores)


def score_units(model: Recommender, unit_user: np.ndarray, offsets: np.ndarray, items: np.ndarray,
                chunk_size: int, dense: bool = False) -> np.ndarray:
    """float32 scores of the listed items of every unit (CSR ``offsets``/``items``) for the unit's
    user, ``chunk_size`` units and at least ``MIN_PAIRS`` pairs per call to ``model.score``, so
    that units of a few items do not pay one call each; ``dense``: gathered from score blocks
    of the distinct users instead (the scores :func:`rank_targets` ranks dense targets by).
    NaN raises."""
    pair_user = np.repeat(unit_user, np.diff(offsets))
    if dense:
        scores = block_scores(model, pair_user, items)
        if np.isnan(scores).any():
            raise _nan_scores(model, "score_block")
        return scores
    scores = np.empty(len(items), dtype=np.float32)
    n_units = len(unit_user)
    start = 0
    while start < n_units:
        stop = min(start + chunk_size, n_units)
        stop = max(stop, min(int(np.searchsorted(offsets, offsets[start] + MIN_PAIRS)), n_units))
        lo, hi = offsets[start], offsets[stop]
        scores[lo:hi] = _checked_scores(model, model.score(pair_user[lo:hi], items[lo:hi]), (hi - lo,), "score")
        start = stop
    if np.isnan(scores).any():
        raise _nan_scores(model, "score")
    return scores


def _dense_targets(model: Recommender, n_pairs: int, unit_user: np.ndarray) -> bool:
    """Whether ``n_pairs`` listed pairs cover at least 1/16 of the items per distinct user, and
    the model has a score block of its own."""
    has_block = type(model).score_block is not Recommender.score_block
    users = len(np.unique(unit_user))
    return has_block and users > 0 and n_pairs / users >= max(model.n_items, 1) / 16


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


def _blocked(candidates: np.ndarray | None, n_items: int) -> np.ndarray:
    """The complement of a candidate mask (None: every item is a candidate), checked."""
    if candidates is None:
        return np.zeros(n_items, dtype=np.bool_)
    candidates = np.asarray(candidates)
    if candidates.dtype != np.bool_ or candidates.shape != (n_items,):
        raise DataError(
            f"candidates must be a bool mask over the {n_items:,} items, got "
            f"{candidates.dtype} of shape {candidates.shape}"
        )
    return ~candidates


def _scan_candidates(
    model: Recommender,
    train: Interactions,
    rows: np.ndarray,
    k: int,
    blocked: np.ndarray,
    place_ptr: np.ndarray,
    placed: np.ndarray,
    chunk_size: int,
    tiles: bool = True,
    placed_scores: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Score every item for ``rows`` (user indices), ``chunk_size`` rows at a time, keeping each
    row's top ``k`` candidates (k = 0: none) and placing its items ``placed[place_ptr[r]:
    place_ptr[r + 1]]`` among its other candidates (counts above, tied, tied before, per placed
    item). ``tiles=False``: a factor model is scored by score blocks, the scores listed targets
    are ranked by, not by its cached tiles (a dot product may differ in the last bit); then
    ``placed_scores``, when given, receives the placed items' scores, read off the same blocks.
    Returns ``(offsets, items, scores, above, tied, before)``."""
    if placed_scores is not None and tiles:
        raise ValueError("placed scores are read off score blocks: call with tiles=False")
    seen = train.csr()
    n_placed = len(placed)
    above = np.zeros(n_placed, dtype=np.int64)
    tied = np.zeros(n_placed, dtype=np.int64)
    before = np.zeros(n_placed, dtype=np.int64)
    placed = np.ascontiguousarray(placed, dtype=np.int32)
    items_out, scores_out = [], []
    lengths = np.zeros(len(rows), dtype=np.int64)
    item_scores = model.item_scores() if callable(getattr(model, "item_scores", None)) else None
    if item_scores is not None:
        chunk_rows = _global_order_chunks(model, item_scores, seen, rows, k, blocked, place_ptr, placed,
                                          above, tied, before, chunk_size, placed_scores)
    else:
        chunk_rows = _score_block_chunks(model, seen, rows, k, blocked, place_ptr, placed, above, tied,
                                         before, chunk_size, tiles, placed_scores)
    for start, item, score, count in chunk_rows:
        keep = np.arange(k)[None, :] < count[:, None]
        items_out.append(item[keep])
        scores_out.append(score[keep])
        lengths[start:start + len(count)] = count
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    items = np.concatenate(items_out) if items_out else np.zeros(0, np.int32)
    scores = np.concatenate(scores_out) if scores_out else np.zeros(0, np.float32)
    return offsets, items, scores, above, tied, before


def _score_block_chunks(model, seen, rows, k, blocked, place_ptr, placed, above, tied, before, chunk_size,
                        tiles=True, placed_scores=None):
    """Per chunk of rows: ``(start, items, scores, counts)`` of the top k, from a score block (or,
    with ``tiles``, a factor model's cached tiles); the placed items' counts are written as a side
    effect."""
    factors = model.factors() if tiles and callable(getattr(model, "factors", None)) else None
    rows_of = getattr(model, "factor_rows", None)  # a duck-typed model's factors hold every user
    if factors is None and not tiles:
        chunk_size = min(chunk_size, max(1, BLOCK_CELLS // max(len(blocked), 1)))
    packed = pack_items(factors[1]) if factors is not None else None  # once, not per chunk
    for start in range(0, len(rows), chunk_size):
        chunk = rows[start:start + chunk_size]
        a, b = place_ptr[start], place_ptr[start + len(chunk)]
        ptr = place_ptr[start:start + len(chunk) + 1] - a
        place = (ptr, placed[a:b], above[a:b], tied[a:b], before[a:b])
        if factors is not None:
            tile = max(1, TILE_CELLS // max(len(blocked), 1))
            item, score, count, nans = top_k_factors(*factors, chunk, seen.indptr, seen.indices, blocked, k,
                                                     tile, *place, factor_rows=rows_of(chunk) if rows_of else None,
                                                     packed=packed)
        else:
            scores = _checked_scores(model, model.score_block(chunk), (len(chunk), len(blocked)), "score_block")
            item, score, count, nans = top_k_rows(scores, chunk, seen.indptr, seen.indices, blocked, k, *place)
            if placed_scores is not None:
                placed_scores[a:b] = scores[np.repeat(np.arange(len(chunk)), np.diff(ptr)), placed[a:b]]
        if nans:
            raise _nan_scores(model, "factors" if factors is not None else "score_block")
        yield start, item, score, count


def _global_order_chunks(model, item_scores, seen, rows, k, blocked, place_ptr, placed, above, tied, before,
                         chunk_size, placed_scores=None):
    """:func:`_score_block_chunks` for a model whose scores do not depend on the user: one order of
    the candidate items by (score desc, item asc), walked per row past its train items."""
    scores = _checked_scores(model, item_scores, (len(blocked),), "item_scores")
    if np.isnan(scores).any():
        raise _nan_scores(model, "item_scores")
    if placed_scores is not None:
        placed_scores[:] = scores[placed]
    pool = np.flatnonzero(~blocked)
    order = pool[np.argsort(-scores[pool], kind="stable")].astype(np.int32)  # ties keep item order
    position = np.full(len(blocked), -1, dtype=np.int64)
    position[order] = np.arange(len(order))
    finite = order[scores[order] > -np.inf]
    bounds = np.linspace(0, len(rows), min(len(rows), 64) + 1).astype(np.int64)
    place_global(-scores[order].astype(np.float64), position, scores, rows, seen.indptr, seen.indices, place_ptr,
                 placed, above, tied, before, bounds)
    for start in range(0, len(rows) if k else 0, chunk_size):
        chunk = rows[start:start + chunk_size]
        chunk_bounds = np.linspace(0, len(chunk), min(len(chunk), 64) + 1).astype(np.int64)
        item, count = top_k_global(finite, chunk, seen.indptr, seen.indices, len(blocked), k, chunk_bounds)
        yield start, item, scores[item], count


def recommend_top_k(
    model: Recommender,
    train: Interactions,
    users: np.ndarray,
    k: int,
    *,
    candidates: np.ndarray | None = None,
    chunk_size: int = 2048,
    targets: Targets | None = None,
) -> Rankings:
    """The top ``k`` items of every user among the candidate items not in its train row.

    One ranking per entry of ``users`` (repeats allowed), in order; ``candidates`` is a bool mask
    over items (None: every item). Scores are computed ``chunk_size`` users at a time, so memory
    is bounded by ``chunk_size`` x n_items scores plus the output (for a model with
    :meth:`Recommender.factors`, by a few cached tiles per thread; for one with
    :meth:`Recommender.item_scores`, by the output: no score block at all).

    With ``targets`` (full-ranking Targets whose units are ``users``), each unit's relevant items
    are placed among all of its N = n_candidates - R non-relevant candidates while the scores are
    at hand, and the Rankings carry the exact AUC of every unit, whatever ``k``:
    sum over relevant r of (N - above_r - tied_r / 2) / (R N), tied pairs counting one half
    (NaN when R = 0 or N = 0).
    """
    if k <= 0:
        raise ConfigError(f"k must be a positive integer, got {k}")
    _check_chunk(chunk_size)
    _check_fitted(model, train.n_items, "train data")
    users = _user_indices(users, train.n_users)
    blocked = _blocked(candidates, train.n_items)
    if targets is None:
        place_ptr, placed = no_places(len(users))[:2]
    else:
        _check_full_ranking_targets(targets, users)
        place_ptr, placed = targets.offsets, targets.items
    offsets, items, scores, above, tied, _ = _scan_candidates(
        model, train, users, k, blocked, place_ptr, placed, chunk_size
    )
    auc = None if targets is None else _exact_auc(targets, above, tied)
    return Rankings(users, offsets, items, scores, auc=auc)


def _check_full_ranking_targets(targets: Targets, users: np.ndarray) -> None:
    if not targets.all_candidates or targets.one_relevant:
        raise ConfigError(
            f"recommend_top_k places the relevant items of full-ranking targets (AR+AN), not of "
            f"{targets!r}"
        )
    if len(users) != targets.n_units or np.any(users != targets.unit_user):
        raise DataError("recommend_top_k: users must be targets.unit_user (one ranking per unit, in order)")


def _exact_auc(targets: Targets, above: np.ndarray, tied: np.ndarray) -> np.ndarray:
    """Per unit, the share of (relevant, non-relevant candidate) pairs ordered right, ties one half."""
    n_rel = np.diff(targets.offsets)
    n_non = np.asarray(targets.n_candidates, dtype=np.int64) - n_rel
    unit = np.repeat(np.arange(targets.n_units), n_rel)
    right = np.bincount(unit, n_non[unit] - above - 0.5 * tied, minlength=targets.n_units)
    defined = (n_rel > 0) & (n_non > 0)
    return np.divide(right, n_rel * n_non, out=np.full(targets.n_units, np.nan), where=defined)


def rank_one_relevant(
    model: Recommender,
    train: Interactions,
    targets: Targets,
    *,
    chunk_size: int = 2048,
) -> RelevantRanks:
    """Where each 1R unit's relevant item falls among its non-relevant targets, without ranking
    any unit: everything its metrics need (:func:`recsys_eval.measure.single.measure_one_relevant`).

    ``targets`` is either 1R Targets as :func:`~recsys_eval.targets.build_targets` lists them
    (every unit holds exactly one relevant item), or their one-relevant form
    (``build_targets(..., one_relevant=True)``): a shared or per-unit sample of non-relevant items
    is scored once and counted against the relevant item of every unit that uses it; "every
    candidate" targets (1R+AN) are counted in one pass over each user's scores of every item, all
    of its relevant items at once. Ties and ``-inf`` scores are as in :func:`rank_targets`: a
    relevant item scored ``-inf`` is not ranked; NaN raises.
    """
    return score_one_relevant(model, train, targets, chunk_size=chunk_size).ranks


class OneRelevantScores(NamedTuple):
    """What :func:`score_one_relevant` computed: the RelevantRanks, each unit's relevant score
    (float32) and, for listed non-relevant targets, the scored groups (``unit_group``,
    ``neg_offsets``, ``negatives``, ``neg_scores``; None for "every candidate" targets, whose
    scores were never held)."""

    ranks: RelevantRanks
    relevant_scores: np.ndarray
    groups: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None


def score_one_relevant(model: Recommender, train: Interactions, targets: Targets, *,
                       chunk_size: int = 2048) -> OneRelevantScores:
    """:func:`rank_one_relevant`, keeping the scores it computed (the lists of
    :mod:`recsys_eval.recommend.one_relevant` are read off them)."""
    _check_chunk(chunk_size)
    _check_fitted(model, targets.n_items, "targets")
    groups = None
    if targets.one_relevant and targets.all_candidates:
        starts = np.flatnonzero(np.r_[True, targets.unit_user[1:] != targets.unit_user[:-1]])
        place_ptr = np.r_[starts, targets.n_units].astype(np.int64)
        rows = targets.unit_user[starts].astype(np.int32)
        if len(np.unique(rows)) != len(rows) or np.any(np.diff(targets.items)[np.diff(targets.unit_user) == 0] <= 0):
            raise DataError("one-relevant targets: a user's units must be contiguous and in item order")
        # scored as the listed targets would be (score blocks), so that every value, pooled-AUC
        # scores included, is the listed path's to the bit; the relevant items' scores are read
        # off the blocks that place them (one pass over every score, not two)
        rel_scores = np.empty(targets.n_units, dtype=np.float32)
        _, _, _, above, tied, before = _scan_candidates(
            model, train, rows, 0, _blocked(targets.candidates, train.n_items), place_ptr, targets.items, chunk_size,
            tiles=False, placed_scores=rel_scores,
        )
        n_non = np.asarray(targets.n_candidates, dtype=np.int64) - 1
        relevant, gain = targets.items, targets.gain
    else:
        if targets.one_relevant:
            unit_group, neg_offsets, negatives = targets.unit_group, targets.negative_offsets, targets.negatives
            group_user = np.zeros(len(neg_offsets) - 1, dtype=np.int32)
            group_user[unit_group] = targets.unit_user
            n_non = np.diff(neg_offsets)[unit_group]
            # one call scores the relevant items (a unit each) and the groups: the scores of the
            # listed 1R targets, each pair once
            offsets = np.concatenate([np.arange(targets.n_units), targets.n_units + neg_offsets]).astype(np.int64)
            scores = score_units(
                model, np.concatenate([targets.unit_user, group_user]), offsets,
                np.concatenate([targets.items, negatives]), chunk_size,
                _dense_targets(model, int((1 + n_non).sum()), targets.unit_user),
            )
            rel_scores, neg_scores = scores[:targets.n_units], scores[targets.n_units:]
            relevant, gain = targets.items, targets.gain
        else:  # listed 1R targets: a unit's own list holds its negatives and, skipped, its relevant item
            if targets.all_candidates or np.any(targets.n_relevant != 1):
                raise ConfigError(f"rank_one_relevant needs 1R targets (one relevant item per unit), not {targets!r}")
            unit_group, neg_offsets, negatives = np.arange(targets.n_units), targets.offsets, targets.items
            n_non = np.diff(neg_offsets) - 1
            neg_scores = score_units(model, targets.unit_user, neg_offsets, negatives, chunk_size,
                                     _dense_targets(model, len(negatives), targets.unit_user))
            rel_pos = np.flatnonzero(targets.gain > 0)
            relevant, gain, rel_scores = targets.items[rel_pos], targets.gain[rel_pos], neg_scores[rel_pos]
        above, tied, before = place_listed(relevant, rel_scores, unit_group, neg_offsets, negatives, neg_scores)
        groups = (unit_group, neg_offsets, negatives, neg_scores)
    ranks = RelevantRanks(
        targets.unit_user.astype(np.int32), above, tied, before, n_non.astype(np.int64), gain.astype(np.float32),
        rel_scores > -np.inf,
    )
    return OneRelevantScores(ranks, rel_scores, groups)
