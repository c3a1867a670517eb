"""Random holdout: a fraction of all interactions, or of each user's, goes to test."""

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
from recsys_eval.split.keyed import PerUserRule, split_keys


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

    Global: ``round(fraction * n)`` of the n interactions of the users that are split.
    Per user: ``round(fraction * n_u)`` of each user's n_u, at most ``n_u - 1`` so that every user
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
        test = _uniform_subset(opts.eligible[users], fraction, opts.rng)
    params = opts.params(fraction=fraction, per_user=bool(per_user))
    return build_split(data, test, opts, name="holdout", splitter="holdout", params=params)


def _uniform_subset(in_play: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random ``round(fraction * n)`` of the n rows in play (numpy's sampling without
    replacement, drawing the smaller of the two sides)."""
    rows = np.flatnonzero(in_play)
    n_test = int(round_half_up(fraction * len(rows)))
    if n_test <= len(rows) - n_test:
        test = np.zeros(len(in_play), dtype=bool)
        test[rows[rng.choice(len(rows), n_test, replace=False)]] = True
    else:
        test = in_play.copy()
        test[rows[rng.choice(len(rows), len(rows) - n_test, replace=False)]] = False
    return test
