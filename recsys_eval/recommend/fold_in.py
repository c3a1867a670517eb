"""Fitting a recommender for a split: on the train side, or, when the split holds test users out of
fitting (a user-disjoint split), on the train users only, then folding the test users in
(docs/CONVENTIONS.md#user-disjoint-split)."""

from __future__ import annotations

import numpy as np

from recsys_eval.core import Interactions, Split
from recsys_eval.errors import ConfigError
from recsys_eval.recommend.base import Recommender

#: The registry's recommenders that score fold-in users (the rest raise on a user-disjoint split).
FOLDING_IN = ("random", "popular", "als", "item_knn", "user_knn")


def fit_for_split(model: Recommender, train: Interactions, split: Split) -> Recommender:
    """``model`` fitted for ``split`` on ``train`` (the split's train side, or a subsample of it):
    on ``train`` itself, or under fold-in on ``split.fit_side(train)`` and then
    :meth:`~recsys_eval.recommend.Recommender.fold_in` of the test users from ``train``."""
    if not split.fold_in:
        return model.fit(train)
    check_folds_in(model)
    model.fit(split.fit_side(train))
    return model.fold_in(train, np.flatnonzero(split.test_users()))


def check_folds_in(model: Recommender) -> None:
    """A ConfigError unless ``model`` can score users it was not fitted on."""
    if not getattr(model, "folds_in", False):
        raise ConfigError(fold_in_message(type(model).__name__))


def check_name_folds_in(name: str) -> None:
    """A ConfigError unless the registry recommender ``name`` can fold users in (plugins are
    checked when built, by their ``folds_in`` attribute)."""
    if ":" not in name and name not in FOLDING_IN:
        raise ConfigError(fold_in_message(repr(name)))


def fold_in_message(what: str) -> str:
    return (
        f"recommender {what} cannot score users it was not fitted on, which a user-disjoint split "
        f"(fold-in) needs; the ones that can: {', '.join(FOLDING_IN)} (and runs read from files)"
    )
