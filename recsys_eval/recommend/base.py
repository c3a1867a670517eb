"""The recommender interface and the two ways a fitted recommender is ranked.

A recommender is fitted on a train Interactions and then scores (user, item) pairs. Two rankings are
built from scores, both in user chunks so that no users x items matrix exists whole:

- :func:`rank_targets` scores only the listed target items of every unit (sampled protocols cost
  ``n + 1`` scores per unit, not a full ranking) and sorts each unit by score, best first;
- :func:`recommend_top_k` scores every item for a chunk of users, removes each user's training
  items and the items outside the candidate pool, and keeps the top k.

Ties are broken by item index ascending, everywhere. A score of ``-inf`` means "not ranked" (e.g.
an item an external run did not list): such items are left out of rankings, so the metrics treat
them as tied below the last ranked item.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from recsys_eval.core import Interactions, Rankings, Targets
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.recommend.topk import top_k_rows


class Recommender(ABC):
    """Fit on a train Interactions, then score (user, item) pairs; higher is better.

    Subclasses implement :meth:`fit` and :meth:`score_block` (scores of every item for a block of
    users); they may override :meth:`score` when pairs are cheaper to score directly (e.g. factor
    models). Rating predictors set ``predicts_ratings`` and implement :meth:`predict`.
    """

    predicts_ratings: bool = False
    n_items: int = 0

    @abstractmethod
    def fit(self, train: Interactions) -> Recommender:
        """Learn from the training interactions; return self."""

    @abstractmethod
    def score_block(self, users: np.ndarray) -> np.ndarray:
        """Scores of every item for each of ``users``: a float32 array (len(users), n_items)."""

    def score(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Scores of the pairs (users[i], items[i]); by default gathered from user blocks."""
        users = np.asarray(users, dtype=np.int64)
        items = np.asarray(items, dtype=np.int64)
        unique, inverse = np.unique(users, return_inverse=True)
        out = np.empty(len(users), dtype=np.float32)
        block = max(1, _BLOCK_CELLS // max(self.n_items, 1))
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(0, len(unique) + block, block))
        for b in range(len(bounds) - 1):
            rows = order[bounds[b]:bounds[b + 1]]
            if len(rows) == 0:
                continue
            first = b * block
            scores = self.score_block(unique[first:first + block])
            out[rows] = scores[inverse[rows] - first, items[rows]]
        return out

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Predicted ratings of the pairs (rating predictors only)."""
        raise ConfigError(f"{type(self).__name__} does not predict ratings")


# Cells of a users x items score block computed at once by the default pair scorer (~64 MB float32).
_BLOCK_CELLS = 16_000_000


def _unit_of_position(offsets: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))


def score_targets(model: Recommender, targets: Targets, *, chunk_size: int = 100_000) -> np.ndarray:
    """Scores of every listed target item (aligned with ``targets.items``), in chunks of pairs."""
    users = targets.unit_user[_unit_of_position(targets.offsets)]
    out = np.empty(len(targets.items), dtype=np.float64)
    step = max(chunk_size, 1) * 64
    for start in range(0, len(out), step):
        stop = min(start + step, len(out))
        out[start:stop] = model.score(users[start:stop], targets.items[start:stop])
    if np.isnan(out).any():
        raise DataError(f"{type(model).__name__} returned NaN scores")
    return out


def rank_targets(model: Recommender, targets: Targets, *, chunk_size: int = 2048) -> Rankings:
    """Each unit's listed target items sorted by score (descending, ties by item index); items
    scored ``-inf`` (not ranked) are left out."""
    if targets.all_candidates:
        raise ConfigError("full-ranking targets are ranked with recommend_top_k, not rank_targets")
    scores = score_targets(model, targets, chunk_size=chunk_size)
    unit = _unit_of_position(targets.offsets)
    order = np.lexsort((targets.items, -scores.astype(np.float64), unit))
    keep = np.isfinite(scores[order])
    order = order[keep]
    lengths = np.bincount(unit[order], minlength=targets.n_units)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return Rankings(targets.unit_user.astype(np.int32), offsets, targets.items[order], scores[order])


def recommend_top_k(
    model: Recommender,
    train: Interactions,
    users: np.ndarray,
    k: int,
    *,
    candidates: np.ndarray | None = None,
    chunk_size: int = 2048,
) -> Rankings:
    """The top ``k`` items of every user among the candidates it has not seen in train.

    ``users`` may repeat (one ranking per entry, in order); ``candidates`` is a bool mask over
    items (None: all items). Memory is bounded by ``chunk_size`` x n_items scores.
    """
    if k <= 0:
        raise ConfigError(f"k must be a positive integer, got {k}")
    users = np.asarray(users, dtype=np.int32)
    seen = train.csr()
    n_items = train.n_items
    blocked = np.zeros(n_items, dtype=np.bool_) if candidates is None else ~np.asarray(candidates, dtype=bool)
    items_out, scores_out, lengths = [], [], np.zeros(len(users), dtype=np.int64)
    for start in range(0, len(users), chunk_size):
        chunk = users[start:start + chunk_size]
        scores = np.ascontiguousarray(model.score_block(chunk), dtype=np.float32)
        if scores.shape != (len(chunk), n_items):
            raise DataError(
                f"{type(model).__name__}.score_block gave shape {scores.shape}, "
                f"expected ({len(chunk)}, {n_items})"
            )
        if np.isnan(scores).any():
            raise DataError(f"{type(model).__name__} returned NaN scores")
        item, score, count = top_k_rows(scores, chunk, seen.indptr, seen.indices, blocked, k)
        keep = np.arange(k)[None, :] < count[:, None]
        items_out.append(item[keep])
        scores_out.append(score[keep])
        lengths[start:start + len(chunk)] = count
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return Rankings(
        users,
        offsets,
        np.concatenate(items_out).astype(np.int32) if items_out else np.zeros(0, np.int32),
        np.concatenate(scores_out).astype(np.float32) if scores_out else np.zeros(0, np.float32),
    )
