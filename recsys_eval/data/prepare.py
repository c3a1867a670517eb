"""Preparation steps: relevance threshold, minimum counts, iterative k-core (docs/CONVENTIONS.md#preparation-and-splitting).

Each step returns the prepared Interactions, over the original index (``with_frame``), and a
:class:`Removed` record of what it took out. All steps are vectorised: counts by ``np.bincount``, and
the k-core loop runs once per peeling round, never once per user or item.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from recsys_eval.core.interactions import Interactions
from recsys_eval.errors import ConfigError, DataError


@dataclass(frozen=True)
class Removed:
    """What a preparation step removed: interactions, and users and items left with none."""

    step: str
    users: int
    items: int
    interactions: int

    def __str__(self) -> str:
        return (
            f"{self.step}: removed {self.interactions:,} interactions, {self.users:,} users, "
            f"{self.items:,} items"
        )


def _present(index: np.ndarray, size: int) -> int:
    return int(np.count_nonzero(np.bincount(index, minlength=size)))


def _keep(
    data: Interactions, mask: np.ndarray, step: str, frame: pl.DataFrame | None = None
) -> tuple[Interactions, Removed]:
    """The rows of ``data`` (or of ``frame``, its rewritten copy) where ``mask`` holds."""
    kept = (data.frame if frame is None else frame).filter(pl.Series(mask))
    users, items = kept.get_column("user").to_numpy(), kept.get_column("item").to_numpy()
    removed = Removed(
        step,
        users=_present(data.users, data.n_users) - _present(users, data.n_users),
        items=_present(data.items, data.n_items) - _present(items, data.n_items),
        interactions=len(data) - kept.height,
    )
    return data.with_frame(kept), removed


def _check_count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def apply_threshold(
    data: Interactions, threshold: float, binarize: bool = False
) -> tuple[Interactions, Removed]:
    """Keep the interactions rated at least ``threshold``; with ``binarize`` their rating becomes 1."""
    if not data.has_rating:
        raise DataError(f"{data.source}: no rating column to apply a threshold to")
    try:
        threshold = float(threshold)
    except (TypeError, ValueError):
        raise ConfigError(f"threshold must be a number, got {threshold!r}") from None
    if not np.isfinite(threshold):
        raise ConfigError(f"threshold must be a finite number, got {threshold!r}")
    frame = data.frame.with_columns(rating=pl.lit(1.0, dtype=pl.Float32)) if binarize else None
    step = f"threshold rating >= {threshold:g}" + (", binarised" if binarize else "")
    return _keep(data, data.ratings >= threshold, step, frame)


def min_counts(data: Interactions, min_user: int = 1, min_item: int = 1) -> tuple[Interactions, Removed]:
    """Drop users with fewer than ``min_user`` and items with fewer than ``min_item`` interactions.

    One pass, both counted on the input (removing users may leave items below ``min_item``:
    :func:`k_core` repeats until nothing changes).
    """
    min_user, min_item = _check_count("min_user", min_user), _check_count("min_item", min_item)
    users, items = data.users, data.items
    mask = (data.user_counts()[users] >= min_user) & (data.item_counts()[items] >= min_item)
    return _keep(data, mask, f"min counts: users >= {min_user}, items >= {min_item}")


def k_core(data: Interactions, k: int) -> tuple[Interactions, Removed]:
    """The k-core: the largest subset where every user and every item has at least k interactions.

    Iterative peeling to a fixed point: remove the rows of users or items below k, recount, repeat.
    Each round only removes rows that belong to no k-core, so the fixed point is the largest one.
    """
    k = _check_count("k", k)
    users, items = data.users, data.items
    rows = np.arange(len(data))
    while rows.size:
        u, i = users[rows], items[rows]
        ok = (np.bincount(u, minlength=data.n_users)[u] >= k) & (
            np.bincount(i, minlength=data.n_items)[i] >= k
        )
        if ok.all():
            break
        rows = rows[ok]
    mask = np.zeros(len(data), dtype=bool)
    mask[rows] = True
    return _keep(data, mask, f"{k}-core")
