"""What a fold's target sets read of all its users, item by item (docs/CONVENTIONS.md#protocols).

Everything else a user's targets need is the user's own rows (its train items, its judged test
items). Two item-side facts are not: whether an item has a test interaction of any user (the TI
candidate pool) and an item's train interactions over every user (the weights of popularity
sampling, the percentile design's bins). :class:`ItemTotals` holds both: two arrays over items,
whatever the number of users, so that an engine which holds only some users' rows (a Spark
partition) computes them once over the whole fold and builds its users' targets with them, the
same targets the whole fold gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recsys_eval.core.split import Split


@dataclass(frozen=True)
class ItemTotals:
    """Per item index of a fold: ``in_test`` (bool) whether some user has it in test, and
    ``train_counts`` (int64) its train interactions over every user."""

    in_test: np.ndarray
    train_counts: np.ndarray

    @classmethod
    def of(cls, split: Split) -> ItemTotals:
        """The totals of the whole ``split`` (from its sides' item counts alone, which an engine
        may count where the rows are)."""
        return cls(split.test.item_counts() > 0, split.train.item_counts().astype(np.int64))
