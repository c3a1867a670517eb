"""Random holdout: a fraction of all interactions, or of each user's, goes to test, drawn by keys
(:mod:`recsys_eval.split.keyed`)."""

from __future__ import annotations

import numpy as np

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.split.common import (
    DropUnknown,
    build_split,
    check_fraction,
    options,
    round_half_up,
)
from recsys_eval.split.keyed import PerUserRule, first_rows, split_keys


def holdout(
    data: Interactions,
    fraction: float,
    *,
    per_user: bool = False,
    seed: int,
    min_user_interactions: int | None = None,
    drop_unknown: DropUnknown = False,
) -> Split:
    """A uniformly random ``fraction`` of the interactions to test, the rest to train.

    Global: the ``round(fraction * n)`` of the n interactions of the users that are split with the
    smallest keys (:func:`~recsys_eval.split.keyed.first_rows`: each row's key from the seed and
    its raw ids alone; docs/CONVENTIONS.md#global-split-draws). Per user: ``round(fraction * n_u)`` of each user's n_u, at most ``n_u - 1`` so that every user
    split keeps a training interaction, drawn from the seed and the user's own rows alone
    (:mod:`recsys_eval.split.keyed`). Halves round up. ``min_user_interactions`` defaults to 1
    (global) or 2 (per user).
    """
    opts = options(data, seed=seed, min_user_interactions=min_user_interactions,
                   drop_unknown=drop_unknown, default_min=2 if per_user else 1)
    fraction = check_fraction("fraction", fraction)
    users = data.users
    if per_user:
        rule = PerUserRule("holdout", opts.min_user_interactions, fraction=fraction)
        test = rule.test_rows(users, data.n_users, split_keys(data, opts.seed))
    else:
        in_play = opts.eligible[users]
        test = first_rows(data, opts.seed, in_play, int(round_half_up(fraction * np.count_nonzero(in_play))))
    params = opts.params(fraction=fraction, per_user=bool(per_user))
    return build_split(data, test, opts, name="holdout", splitter="holdout", params=params)

