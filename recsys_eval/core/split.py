"""Split: a train and a test side over one shared index (docs/CONVENTIONS.md#notation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from recsys_eval.core.interactions import Interactions
from recsys_eval.errors import DataError


@dataclass(frozen=True, eq=False)
class Split:
    """Train and test Interactions over the same user and item index.

    Attributes:
        train, test: the two sides; both keep the index of the Interactions that was split.
        name: a short label, e.g. ``"fold1"`` or ``"u1"``, used as the ``fold`` in results.
        info: what produced the split and what it dropped or kept, and why: the splitter's name,
            its parameters and seed, and counts such as ``users_kept_in_train`` or
            ``test_dropped_unknown_items``. Saved beside the split as JSON. ``info["part"]``
            marks a part of a fold's users (:attr:`part`).
    """

    train: Interactions
    test: Interactions
    name: str = "split"
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        same_users = self.train.user_ids is self.test.user_ids or self.train.user_ids.equals(
            self.test.user_ids
        )
        same_items = self.train.item_ids is self.test.item_ids or self.train.item_ids.equals(
            self.test.item_ids
        )
        if not (same_users and same_items):
            raise DataError(f"split {self.name!r}: train and test must share one user and item index")

    @property
    def fold_in(self) -> bool:
        """True when the test users are unseen in fitting (a user-disjoint split): their rows in
        ``train`` are fold-in history, read to score them, never fitted on
        (docs/CONVENTIONS.md#user-disjoint-split)."""
        return bool(self.info.get("fold_in"))

    @property
    def part(self) -> bool:
        """True for a part of a fold's users (a Spark task's chunk): what holds of the whole fold
        (some rating reaches the relevance threshold) was checked on the fold, and a part need
        not hold it (its users may all rate below the threshold)."""
        return bool(self.info.get("part"))

    def test_users(self) -> np.ndarray:
        """Bool per user index: the user has a test interaction."""
        return np.bincount(self.test.users, minlength=self.n_users) > 0

    def n_test_users(self) -> int:
        """The number of users with a test interaction."""
        return int(np.count_nonzero(self.test_users()))

    def fit_side(self, train: Interactions | None = None) -> Interactions:
        """What a model is fitted on: ``train`` (default: this split's) less the rows of the test
        users when :attr:`fold_in`, else ``train`` itself."""
        train = self.train if train is None else train
        if not self.fold_in:
            return train
        return train.with_frame(train.frame.filter(pl.Series(~self.test_users()[train.users])))

    @property
    def n_users(self) -> int:
        return self.train.n_users

    @property
    def n_items(self) -> int:
        return self.train.n_items

    def __repr__(self) -> str:
        return (
            f"Split({self.name!r}: train {len(self.train):,} rows, test {len(self.test):,} rows, "
            f"{self.n_users:,} users x {self.n_items:,} items)"
        )
