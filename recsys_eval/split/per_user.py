"""Per-user counts: all-but-n (n to test), given-n (n kept in train), leave-last-n.

Each user's interactions are ordered at random or by time (ties in time in seeded random order),
a user's order drawn from the seed and its own rows alone (:mod:`recsys_eval.split.keyed`).
With ``order="latest"`` the test side always holds a user's latest interactions: all-but-n tests
the latest n, given-n keeps the earliest n in train. Users with at most n interactions have nothing
to split under the default ``min_user_interactions = n + 1`` and stay wholly in train (counted).
"""

from __future__ import annotations

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.split.common import (
    DropUnknown,
    build_split,
    check_count,
    check_order,
    options,
    require_timestamps,
)
from recsys_eval.split.keyed import PerUserRule, split_keys


def all_but_n(
    data: Interactions,
    n: int = 1,
    *,
    order: str = "random",
    seed: int,
    min_user_interactions: int | None = None,
    drop_unknown: DropUnknown = False,
) -> Split:
    """Hold out ``n`` interactions of every user (random ones, or the latest), the rest to train."""
    return _per_user_n(
        data, n, order=order, seed=seed, min_user_interactions=min_user_interactions,
        drop_unknown=drop_unknown, splitter="all_but_n",
    )


def given_n(
    data: Interactions,
    n: int,
    *,
    order: str = "random",
    seed: int,
    min_user_interactions: int | None = None,
    drop_unknown: DropUnknown = False,
) -> Split:
    """Keep ``n`` interactions of every user in train (random ones, or the earliest), the rest to
    test."""
    return _per_user_n(
        data, n, order=order, seed=seed, min_user_interactions=min_user_interactions,
        drop_unknown=drop_unknown, splitter="given_n",
    )


def leave_last_n(
    data: Interactions,
    n: int = 1,
    *,
    seed: int,
    min_user_interactions: int | None = None,
    drop_unknown: DropUnknown = False,
) -> Split:
    """Every user's latest ``n`` interactions to test (leave-one-out for n = 1)."""
    return _per_user_n(
        data, n, order="latest", seed=seed, min_user_interactions=min_user_interactions,
        drop_unknown=drop_unknown, splitter="leave_last_n",
    )


def _per_user_n(
    data: Interactions,
    n: int,
    *,
    order: str,
    seed: int,
    min_user_interactions: int | None,
    drop_unknown: DropUnknown,
    splitter: str,
) -> Split:
    n = check_count("n", n)
    order = check_order(order)
    opts = options(data, seed=seed, min_user_interactions=min_user_interactions,
                   drop_unknown=drop_unknown, default_min=n + 1)
    what = splitter if splitter == "leave_last_n" else f"{splitter} with order 'latest'"
    times = require_timestamps(data, what) if order == "latest" else None
    rule = PerUserRule(splitter, opts.min_user_interactions, order=order, n=n)
    test = rule.test_rows(data.users, data.n_users, split_keys(data, opts.seed), times)
    params = opts.params(n=n) if splitter == "leave_last_n" else opts.params(n=n, order=order)
    return build_split(data, test, opts, name=splitter, splitter=splitter, params=params)
