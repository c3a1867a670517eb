"""k-fold cross-validation: every interaction of a split user is tested in exactly one fold."""

from __future__ import annotations

import numpy as np

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError
from recsys_eval.split.common import DropUnknown, build_split, check_count, options
from recsys_eval.split.order import rank_within


def kfold(
    data: Interactions,
    k: int = 5,
    *,
    per_user: bool = False,
    seed: int,
    min_user_interactions: int | None = None,
    drop_unknown: DropUnknown = False,
) -> list[Split]:
    """k Splits named ``fold1``..``foldk``; fold i tests the interactions assigned to it.

    Global: the interactions of the users split are dealt to the folds in a random order
    (fold sizes differ by at most one). Per user (the recommender form of stratified
    cross-validation): each user's interactions are dealt in a random order starting at a random
    fold, so each user's fold sizes differ by at most one and a user with at least k interactions
    is tested in every fold. ``min_user_interactions`` defaults to 1 (global) or 2 (per user).
    """
    opts = options(data, seed=seed, min_user_interactions=min_user_interactions,
                   drop_unknown=drop_unknown, default_min=2 if per_user else 1)
    k = check_count("k", k, minimum=2)
    users, rng = data.users, opts.rng
    if per_user:
        largest = int(opts.counts[opts.eligible].max(initial=0))
        if k > largest:
            raise ConfigError(
                f"k = {k} folds per user, but the largest user profile has {largest} interactions "
                f"(of users with at least {opts.min_user_interactions}); choose k <= {largest}"
            )
        shift = rng.integers(0, k, size=data.n_users)
        fold = (rank_within(users, data.n_users, rng) + shift[users]) % k
        fold[~opts.eligible[users]] = -1
    else:
        in_play = opts.eligible[users]
        n_play = int(in_play.sum())
        if k > n_play:
            raise ConfigError(f"k = {k} folds, but only {n_play} interactions are to be split")
        fold = np.where(in_play, rank_within(~in_play, 2, rng) % k, -1)
    params = opts.params(k=k, per_user=bool(per_user))
    return [
        build_split(data, fold == i, opts, name=f"fold{i + 1}", splitter="kfold", params=params,
                    extra={"fold": i + 1})
        for i in range(k)
    ]
