"""k-fold cross-validation: every interaction of a split user is tested in exactly one fold."""

from __future__ import annotations

import numpy as np

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.rng import id_keys
from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError
from recsys_eval.split.common import DropUnknown, build_split, check_count, options
from recsys_eval.split.keyed import global_rank, id_draws, split_keys
from recsys_eval.split.order import keyed_rank_within


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

    Global: the interactions of the users split are dealt to the folds in the order of their keys
    (:func:`~recsys_eval.split.keyed.global_rank`; fold sizes differ by at most one). Per user (the
    recommender form of stratified cross-validation): each user's interactions are dealt in the
    order of their keys starting at a fold drawn from the user's key (:func:`user_folds`), so
    each user's fold sizes differ by at most one and a user with at least k interactions is tested
    in every fold. Either way a row's fold depends on the seed and raw ids alone, never on the
    rows' order (global: its key's place among the keys of the rows split; per user: its user's
    rows; docs/CONVENTIONS.md#global-split-draws). ``min_user_interactions``
    defaults to 1 (global) or 2 (per user).
    """
    opts = options(data, seed=seed, min_user_interactions=min_user_interactions,
                   drop_unknown=drop_unknown, default_min=2 if per_user else 1)
    k = check_count("k", k, minimum=2)
    users = data.users
    if per_user:
        check_user_folds(k, int(opts.counts[opts.eligible].max(initial=0)), opts.min_user_interactions)
        user_draws = id_draws(opts.seed, id_keys(data.user_ids))
        fold = user_folds(users, data.n_users, split_keys(data, opts.seed), user_draws, k)
        fold[~opts.eligible[users]] = -1
    else:
        in_play = opts.eligible[users]
        check_folds(k, int(in_play.sum()))
        fold = np.where(in_play, global_rank(data, opts.seed, in_play) % k, -1)
    params = opts.params(k=k, per_user=bool(per_user))
    return [
        build_split(data, fold == i, opts, name=f"fold{i + 1}", splitter="kfold", params=params,
                    extra={"fold": i + 1})
        for i in range(k)
    ]


def user_folds(groups: np.ndarray, n_groups: int, keys: np.ndarray, user_draws: np.ndarray, k: int) -> np.ndarray:
    """The 0-based fold of every row under per-user k-fold: ``(rank + d mod k) mod k``, with
    ``rank`` the row's place among its user's rows in the order of their ``keys``
    (:func:`~recsys_eval.split.keyed.row_keys`) and ``d`` its user's key (``user_draws``, one per
    group 0..n_groups-1: :func:`~recsys_eval.split.keyed.id_draws`)."""
    start = (np.asarray(user_draws, np.uint64) % np.uint64(k)).astype(np.int64)
    return (keyed_rank_within(groups, n_groups, keys) + start[groups]) % k


def check_user_folds(k: int, largest: int, min_user_interactions: int) -> None:
    """A ConfigError when per-user k-fold has more folds than the ``largest`` profile split."""
    if k > largest:
        raise ConfigError(
            f"k = {k} folds per user, but the largest user profile has {largest} interactions "
            f"(of users with at least {min_user_interactions}); choose k <= {largest}"
        )


def check_folds(k: int, n_play: int) -> None:
    """A ConfigError when global k-fold has more folds than the ``n_play`` interactions split."""
    if k > n_play:
        raise ConfigError(f"k = {k} folds, but only {n_play} interactions are to be split")
