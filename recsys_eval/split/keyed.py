"""The splits' draws: every row keyed on (seed, raw user id, raw item id), every user or item on
(seed, raw id), so that a user's split depends on the seed and the user's own rows alone, and a
global split on each key and its place among all the keys (docs/CONVENTIONS.md#per-user-split-draws,
docs/CONVENTIONS.md#global-split-draws).

A per-user splitter (per-user holdout, all-but-n, given-n, leave-last-n, the user time split)
sends to test the last ``n_test(c)`` of a user's ``c`` rows in one order of them: by a random key
(``order = "random"``), or by time with rows of equal time ordered by that key (``"latest"``). The key of a row is a
splitmix64 hash of the split's seed and the :func:`~recsys_eval.core.rng.id_keys` of its raw user
and item ids; i.i.d. uniform keys sort a user's rows into a uniformly random order. Nothing in it
depends on the index, on other users, on the order the rows come in, or on which process computes
it, so the local splitters and the Spark engine (:mod:`recsys_eval.engine.split`), which call the
same :meth:`PerUserRule.test_rows` on whole users, give the same split.

The global splits (holdout, k-fold, the user-disjoint split's test users, the cold items) order
every row, user or item by its key (:func:`global_rank`, :func:`~recsys_eval.split.order.keyed_rank`)
and cut that order at exact sizes: on Spark, one sort (:func:`recsys_eval.core.spark.global_ranks`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
import polars as pl

from recsys_eval.core.interactions import Interactions
from recsys_eval.core.rng import id_keys, splitmix64
from recsys_eval.errors import ConfigError
from recsys_eval.split.common import check_count, check_fraction, check_order, round_half_up
from recsys_eval.split.order import keyed_first, keyed_rank, keyed_rank_within

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
#: The per-user splitters drawn by :class:`PerUserRule` (holdout with ``per_user = true``).
PER_USER_SPLITTERS = ("holdout", "all_but_n", "given_n", "leave_last_n", "user_time")


@numba.njit(cache=True)
def _row_keys(seed, user_keys, item_keys):  # pragma: no cover - compiled
    """splitmix64(splitmix64(splitmix64(seed + golden) ^ user key) ^ item key) of every row."""
    base = splitmix64(np.uint64(seed) + _GOLDEN)
    out = np.empty(len(user_keys), np.uint64)
    for r in range(len(user_keys)):
        out[r] = splitmix64(splitmix64(base ^ user_keys[r]) ^ item_keys[r])
    return out


@numba.njit(cache=True)
def _id_draws(seed, keys):  # pragma: no cover - compiled
    """splitmix64(splitmix64(seed + golden) ^ id key) of every id."""
    base = splitmix64(np.uint64(seed) + _GOLDEN)
    out = np.empty(len(keys), np.uint64)
    for r in range(len(keys)):
        out[r] = splitmix64(base ^ keys[r])
    return out


def id_draws(seed: int, keys: np.ndarray) -> np.ndarray:
    """The uint64 key of every raw id given its :func:`~recsys_eval.core.rng.id_keys`: a user's
    (the user-disjoint split's test users, per-user k-fold's first fold) or an item's (cold items).
    A row's key (:func:`row_keys`) is this of its user, hashed with its item's id key."""
    return _id_draws(np.uint64(seed), np.ascontiguousarray(keys, np.uint64))


def sortable(keys: np.ndarray) -> np.ndarray:
    """uint64 keys as int64 in the same order (the top bit flipped), for engines without unsigned
    integers (Spark's ``long``)."""
    return (np.ascontiguousarray(keys, np.uint64) ^ np.uint64(1 << 63)).view(np.int64)


def row_keys(seed: int, user_keys: np.ndarray, item_keys: np.ndarray) -> np.ndarray:
    """The uint64 key of every row, given the :func:`~recsys_eval.core.rng.id_keys` of its raw
    user and item ids (one of each per row)."""
    return _row_keys(np.uint64(seed), np.ascontiguousarray(user_keys, np.uint64),
                     np.ascontiguousarray(item_keys, np.uint64))


def split_keys(data: Interactions, seed: int) -> np.ndarray:
    """The key of every row of ``data`` (its ids' keys computed once per user and item index)."""
    return row_keys(seed, id_keys(data.user_ids)[data.users], id_keys(data.item_ids)[data.items])


def global_rank(data: Interactions, seed: int, in_play: np.ndarray) -> np.ndarray:
    """0-based place of every row in play (bool per row) in the order of its key (equal keys in
    the order of the raw user id, then the raw item id), -1 for the other rows: global k-fold deals
    places to folds (a global holdout tests the places below its size: :func:`first_rows`)."""
    rows = np.flatnonzero(in_play)
    rank = np.full(len(in_play), -1, np.int64)
    rank[rows] = keyed_rank(split_keys(data, seed)[rows], data.users[rows], data.items[rows])
    return rank


def first_rows(data: Interactions, seed: int, in_play: np.ndarray, size: int) -> np.ndarray:
    """Bool per row: the ``size`` first rows in play (bool per row) in :func:`global_rank`'s order
    (a global holdout's test rows), without the full sort."""
    rows = np.flatnonzero(in_play)
    chosen = np.zeros(len(in_play), dtype=bool)
    chosen[rows[keyed_first(split_keys(data, seed)[rows], size, data.users[rows], data.items[rows])]] = True
    return chosen


def first_ids(ids: pl.Series, seed: int, in_play: np.ndarray, size: int) -> np.ndarray:
    """Bool per id of the sorted index ``ids``: the ``size`` ids in play (bool per id) of smallest
    :func:`id_draws` key (equal keys in the order of the raw ids)."""
    candidates = np.flatnonzero(in_play)
    picked = np.zeros(len(in_play), dtype=bool)
    picked[candidates[keyed_first(id_draws(seed, id_keys(ids))[candidates], size, candidates)]] = True
    return picked


@dataclass(frozen=True)
class PerUserRule:
    """How many of a user's ``c`` rows go to test, and which: ``splitter`` one of
    :data:`PER_USER_SPLITTERS` with its checked ``n`` or ``fraction``, ``order`` ("random" or
    "latest") and ``min_user_interactions`` (users with fewer rows stay wholly in train).

    - with a ``fraction`` (holdout, user_time): ``min(round_half_up(fraction * c), c - 1)`` (every
      split user keeps a train row);
    - all_but_n, leave_last_n and user_time with ``n``: ``min(n, c)``; given_n: ``max(c - n, 0)``."""

    splitter: str
    min_user_interactions: int
    order: str = "random"
    n: int | None = None
    fraction: float | None = None

    @classmethod
    def of(cls, method: str, params: dict[str, Any]) -> PerUserRule:
        """The rule of splitter ``method`` with a config's ``params`` (its defaults and checks:
        the local splitter's); a ConfigError for a splitter that is not per user."""
        from recsys_eval.split.make import split_parameters  # make imports the splitters, which import this

        if method not in PER_USER_SPLITTERS or (method == "holdout" and not params.get("per_user")):
            raise ConfigError(f"split {method!r}{' (global)' if method == 'holdout' else ''} is not drawn per user; "
                              f"per-user splits are {', '.join(PER_USER_SPLITTERS)} (holdout with per_user = true)")
        given = {name: p.default for name, p in split_parameters(method).items()
                 if p.default is not inspect.Parameter.empty} | dict(params)
        if method == "holdout":
            return cls(method, _min_interactions(given, 2), fraction=check_fraction("fraction", given["fraction"]))
        if method == "user_time":
            return cls.user_time(given.get("fraction"), given.get("n"), given.get("min_user_interactions"))
        n = check_count("n", given.get("n"))
        order = "latest" if method == "leave_last_n" else check_order(given["order"])
        return cls(method, _min_interactions(given, n + 1), order=order, n=n)

    @classmethod
    def user_time(cls, fraction: Any, n: Any, min_user_interactions: Any) -> PerUserRule:
        """The user time split's rule: each user's latest ``fraction`` or latest ``n`` rows (exactly
        one given; ``min_user_interactions`` by default 2, or ``n + 1``)."""
        if (fraction is None) == (n is None):
            raise ConfigError("user_time_split: give exactly one of fraction and n")
        if fraction is not None:
            fraction = check_fraction("fraction", fraction)
        else:
            n = check_count("n", n)
        least = _min_interactions({"min_user_interactions": min_user_interactions}, 2 if n is None else n + 1)
        return cls("user_time", least, order="latest", n=n, fraction=fraction)

    def n_test(self, counts: np.ndarray) -> np.ndarray:
        """Test rows of every user with ``counts`` rows."""
        if self.fraction is not None:
            wanted = np.minimum(round_half_up(self.fraction * counts), counts - 1)
        elif self.splitter == "given_n":
            wanted = np.maximum(counts - self.n, 0)
        else:
            wanted = np.minimum(self.n, counts)
        return np.where(counts >= self.min_user_interactions, wanted, 0)

    def test_rows(self, groups: np.ndarray, n_groups: int, keys: np.ndarray,
                  times: np.ndarray | None = None) -> np.ndarray:
        """Whether each row goes to test: ``groups`` numbers every row's user (0..n_groups-1, all
        of a user's rows present), ``keys`` are :func:`row_keys`, ``times`` the timestamps (with
        ``order = "latest"``)."""
        counts = np.bincount(groups, minlength=n_groups).astype(np.int64)
        rank = keyed_rank_within(groups, n_groups, keys, times if self.order == "latest" else None)
        return rank >= (counts - self.n_test(counts))[groups]


def _min_interactions(params: dict[str, Any], default: int) -> int:
    value = params.get("min_user_interactions")
    return check_count("min_user_interactions", default if value is None else value)
