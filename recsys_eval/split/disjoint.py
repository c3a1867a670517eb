"""Splits that test what training never saw: whole users (with a fold-in part) or whole items.

User-disjoint (docs/CONVENTIONS.md#user-disjoint-split): a seeded share of the users are test
users; each test user's history is cut into a fold-in part, which goes to the train side but is
never fitted on (:attr:`~recsys_eval.core.Split.fold_in`; a model reads it only to score that
user), and a held-out part, the targets. Cold items (docs/CONVENTIONS.md#cold-item-split): a
seeded share of the items have every interaction in test, none in train. Both draw by keys
(:mod:`recsys_eval.split.keyed`, docs/CONVENTIONS.md#global-split-draws): a user (item) is chosen
by its own key and the order statistic of all keys that cuts the share, a fold-in part by the keys
of the user's own rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.split import Split
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.split.common import (
    DropUnknown,
    build_split,
    check_count,
    check_fraction,
    check_order,
    options,
    require_timestamps,
    round_half_up,
)
from recsys_eval.split.keyed import first_ids, split_keys
from recsys_eval.split.order import keyed_rank_within


def user_disjoint(
    data: Interactions,
    fraction: float | None = None,
    *,
    n_users: int | None = None,
    fold_in: float = 0.8,
    order: str = "random",
    seed: int,
    min_user_interactions: int | None = None,
    drop_unknown: DropUnknown = False,
) -> Split:
    """Test users unseen in fitting, each with a fold-in part of its history (strong
    generalisation).

    Test users: the ``round(fraction * m)`` (or ``n_users``) of smallest key (a uniformly random
    choice) among the m users with at least ``min_user_interactions`` interactions (default 2, or 1
    when ``fold_in = 0``); the other users are train users, all their interactions in train. Each
    test user u with n_u interactions gives ``min(round(fold_in * n_u), n_u - 1)`` of them to
    fold-in (in train, marked by ``info["fold_in"]``) and the rest, at least one, to test: random
    ones (``order="random"``: the last in the order of their keys) or its latest
    (``order="latest"``: fold-in is the user's past, ties in time in key order). Halves round up;
    ``fold_in = 0`` holds out whole users (cold users).
    """
    share, wanted_users, keep, order = user_disjoint_params(fraction, n_users, fold_in, order)
    opts = options(data, seed=seed, min_user_interactions=min_user_interactions,
                   drop_unknown=drop_unknown, default_min=2 if keep > 0 else 1)
    times = require_timestamps(data, "user_disjoint with order 'latest'") if order == "latest" else None
    is_test_user = _pick(data.user_ids, opts.seed, opts.eligible, share, wanted_users)
    test = fold_in_test(data.users, data.n_users, split_keys(data, opts.seed), times, is_test_user, keep)
    params = opts.params(fraction=share, n_users=wanted_users, fold_in=keep, order=order)
    extra = {"fold_in": True, "test_users": int(is_test_user.sum()),
             "fold_in_interactions": int(np.count_nonzero(is_test_user[data.users] & ~test))}
    return build_split(data, test, opts, name="user_disjoint", splitter="user_disjoint", params=params,
                       extra=extra)


def cold_items(
    data: Interactions,
    fraction: float | None = None,
    *,
    n_items: int | None = None,
    seed: int,
    drop_unknown: DropUnknown = False,
) -> Split:
    """Every interaction of the ``round(fraction * m)`` (or ``n_items``) of the m items with
    interactions of smallest key (a uniformly random choice) goes to test; the rest to train, so
    that no test item is in train.

    ``drop_unknown`` may drop test rows of users without a train interaction (``"users"``); it
    cannot drop unknown items, which every test row is by design.
    """
    share, wanted_items = cold_items_params(fraction, n_items, drop_unknown)
    opts = options(data, seed=seed, min_user_interactions=1, drop_unknown=drop_unknown)
    seen = data.item_counts() > 0
    is_cold = _pick(data.item_ids, opts.seed, seen, share, wanted_items, what="items")
    test = is_cold[data.items]
    params = {"fraction": share, "n_items": wanted_items, "drop_unknown": opts.drop_unknown}
    return build_split(data, test, opts, name="cold_items", splitter="cold_items", params=params,
                       extra={"cold_items": int(is_cold.sum())})


def user_disjoint_params(fraction: Any, n_users: Any, fold_in: Any, order: Any
                         ) -> tuple[float | None, int | None, float, str]:
    """The user-disjoint split's checked ``fraction`` or ``n_users`` (the other None), ``fold_in``
    and ``order``; a ConfigError naming what is wrong."""
    if (fraction is None) == (n_users is None):
        raise ConfigError("user_disjoint: give exactly one of fraction and n_users")
    share = check_fraction("fraction", fraction) if fraction is not None else None
    wanted_users = check_count("n_users", n_users) if n_users is not None else None
    return share, wanted_users, _check_fold_in(fold_in), check_order(order)


def fold_in_test(groups: np.ndarray, n_groups: int, keys: np.ndarray, times: np.ndarray | None,
                 is_test_user: np.ndarray, keep: float) -> np.ndarray:
    """Whether each row is a held-out (test) row: a test user's (``is_test_user``, one per group
    0..n_groups-1, all of a user's rows present) rows after its first ``min(round(keep * c), c - 1)``
    in the order of their ``keys`` (by ``times`` first, when given)."""
    counts = np.bincount(groups, minlength=n_groups).astype(np.int64)
    n_fold_in = np.where(is_test_user, np.minimum(round_half_up(keep * counts), counts - 1), 0)
    rank = keyed_rank_within(groups, n_groups, keys, times)
    return is_test_user[groups] & (rank >= n_fold_in[groups])


def cold_items_params(fraction: Any, n_items: Any, drop_unknown: Any) -> tuple[float | None, int | None]:
    """The cold-item split's checked ``fraction`` or ``n_items`` (the other None); a ConfigError
    for both or neither, or for a ``drop_unknown`` that would drop every test row."""
    if (fraction is None) == (n_items is None):
        raise ConfigError("cold_items: give exactly one of fraction and n_items")
    if drop_unknown is True or drop_unknown == "items":
        raise ConfigError(
            f"cold_items: drop_unknown = {drop_unknown!r} would drop every test row (each test item is "
            "unknown to train by design); use false or 'users'"
        )
    share = check_fraction("fraction", fraction) if fraction is not None else None
    return share, check_count("n_items", n_items) if n_items is not None else None


def _check_fold_in(value: Any) -> float:
    if value == 0 and not isinstance(value, bool):
        return 0.0
    return check_fraction("fold_in", value)


def _pick(ids, seed: int, in_play: np.ndarray, share: float | None, count: int | None,
          what: str = "users") -> np.ndarray:
    """Bool mask over the sorted ``ids``: the ``round(share * m)`` (or ``count``) of the m in play
    of smallest key (:func:`~recsys_eval.split.keyed.first_ids`), at least one and fewer than m,
    so that both sides keep some."""
    m = int(np.count_nonzero(in_play))
    size = pick_size(m, share, count, what)
    return first_ids(ids, seed, in_play, size)


def pick_size(m: int, share: float | None, count: int | None, what: str = "users") -> int:
    """How many of the m users (items) in play a share or count picks; a DataError when one side
    would be empty."""
    size = int(round_half_up(share * m)) if share is not None else count
    if m < 2 or not 1 <= size < m:
        asked = f"fraction {share:g}" if share is not None else f"{count:,}"
        raise DataError(
            f"{asked} of the {m:,} {what} that can be tested leaves one side empty; "
            f"choose between 1 and {max(m - 1, 0):,} {what}"
        )
    return size
