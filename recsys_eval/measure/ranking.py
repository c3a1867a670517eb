"""Rank scored target sets: each unit's items by score descending, ties by item index ascending."""

from __future__ import annotations

import numpy as np

from recsys_eval.core.units import Rankings, Targets
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.measure.ties import unit_of_position


def rank_targets(targets: Targets, scores: np.ndarray, k: int | None = None) -> Rankings:
    """The Rankings of ``targets`` ordered by ``scores`` (one per listed target item).

    Items with equal scores are ordered by item index ascending; ``k`` keeps each unit's top k.
    """
    if targets.all_candidates:
        raise ConfigError(
            "rank_targets: full-ranking targets list only the relevant items; rank every candidate "
            "with the recommender and pass its top-k Rankings to measure() instead"
        )
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != targets.items.shape:
        raise DataError(
            f"rank_targets: {len(scores):,} scores for {len(targets.items):,} target items; "
            "expected one score per listed target item"
        )
    if not np.isfinite(scores).all():
        raise DataError(f"rank_targets: {int((~np.isfinite(scores)).sum()):,} NaN or infinite scores")
    unit = unit_of_position(targets.offsets)
    order = np.lexsort((targets.items, -scores, unit))
    offsets = targets.offsets
    if k is not None:
        if k <= 0:
            raise ConfigError(f"rank_targets: k must be a positive integer, got {k}")
        rank = np.arange(len(order), dtype=np.int64) - offsets[unit]
        order = order[rank < k]
        offsets = np.concatenate([[0], np.cumsum(np.minimum(np.diff(targets.offsets), k))])
    return Rankings(
        targets.unit_user, offsets.astype(np.int64), targets.items[order], scores[order]
    )
