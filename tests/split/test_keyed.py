"""The per-user splits' keyed draws: a user's split depends on the seed and its own rows alone (not
on the other users, the index or the rows' order), and its order is uniformly random."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from recsys_eval.core import Interactions
from recsys_eval.core.rng import id_keys
from recsys_eval.errors import ConfigError
from recsys_eval.split import all_but_n, given_n, holdout, leave_last_n, user_time_split
from recsys_eval.split.keyed import PerUserRule, row_keys
from recsys_eval.split.order import keyed_rank_within

from .helpers import random_interactions

SPLITS = [
    lambda d, s: holdout(d, 0.3, per_user=True, seed=s),
    lambda d, s: all_but_n(d, 2, seed=s),
    lambda d, s: all_but_n(d, 2, order="latest", seed=s),
    lambda d, s: given_n(d, 3, seed=s),
    lambda d, s: leave_last_n(d, 2, seed=s),
    lambda d, s: user_time_split(d, fraction=0.3, seed=s),
    lambda d, s: user_time_split(d, n=2, seed=s),
]


def _test_rows(split) -> set[tuple]:
    return set(split.test.to_raw().select("user", "item").iter_rows())


def _fnv1a(text: str) -> int:
    """64-bit FNV-1a as its authors define it, one byte at a time."""
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) % 2**64
    return h


def test_id_keys_are_the_integer_or_the_fnv1a_of_the_text():
    assert id_keys(pl.Series([5, -1, 2**40])).tolist() == [5, 2**64 - 1, 2**40]
    assert id_keys(pl.Series([7], dtype=pl.Int32)).tolist() == id_keys(pl.Series([7], dtype=pl.Int64)).tolist()
    words = ["", "a", "foobar", "é-ü", "user 42"]
    assert id_keys(pl.Series(words)).tolist() == [_fnv1a(w) for w in words]
    assert _fnv1a("a") == 0xAF63DC4C8601EC8C  # the published test vector of FNV-1a 64
    assert id_keys(pl.Series(words, dtype=pl.Categorical)).tolist() == [_fnv1a(w) for w in words]


@pytest.mark.parametrize("make", SPLITS)
def test_a_users_split_depends_on_its_own_rows_alone(make):
    data = random_interactions(30)
    whole = _test_rows(make(data, 11))
    # a third of the users, their rows shuffled: other users, the index and the order are gone
    raw = data.to_raw()
    kept = raw.filter(pl.col("user") % 3 == 0).sample(fraction=1.0, shuffle=True, seed=4)
    part = Interactions.from_frame(kept)
    assert _test_rows(make(part, 11)) == {row for row in whole if row[0] % 3 == 0}
    assert _test_rows(make(data, 12)) != whole  # the seed does matter


def test_keyed_ranks_order_by_key_within_time_ties():
    groups = np.array([1, 0, 1, 1, 0, 1])
    keys = np.array([30, 5, 10, 20, 1, 40], dtype=np.uint64)
    assert keyed_rank_within(groups, 2, keys).tolist() == [2, 1, 0, 1, 0, 3]
    times = np.array([1, 9, 2, 1, 9, 0])
    # group 1: time 0 (row 5), then time 1 (rows 3, 0 by key), then time 2 (row 2)
    assert keyed_rank_within(groups, 2, keys, times).tolist() == [2, 1, 3, 1, 0, 0]


def test_random_order_is_uniform_over_seeds():
    """One user of 5 rows, 2 to test: each row goes to test with probability 2/5 and each of the 10
    pairs is the test side with probability 1/10 (counts within 5 standard deviations)."""
    user_keys, item_keys = id_keys(pl.Series([7] * 5)), id_keys(pl.Series([10, 11, 12, 13, 14]))
    rule = PerUserRule("all_but_n", 3, n=2)
    trials = 4000
    pairs: dict[tuple, int] = {}
    per_row = np.zeros(5)
    for seed in range(trials):
        test = rule.test_rows(np.zeros(5, np.int32), 1, row_keys(seed, user_keys, item_keys))
        assert test.sum() == 2
        per_row += test
        pairs[tuple(np.flatnonzero(test))] = pairs.get(tuple(np.flatnonzero(test)), 0) + 1
    sd = np.sqrt(trials * 0.4 * 0.6)
    assert np.all(np.abs(per_row - 0.4 * trials) < 5 * sd)
    assert len(pairs) == 10
    sd_pair = np.sqrt(trials * 0.1 * 0.9)
    assert all(abs(c - trials / 10) < 5 * sd_pair for c in pairs.values())


def test_rule_from_a_config_takes_the_splitters_defaults_and_checks():
    assert PerUserRule.of("all_but_n", {}) == PerUserRule("all_but_n", 2, order="random", n=1)
    assert PerUserRule.of("leave_last_n", {"n": 2}) == PerUserRule("leave_last_n", 3, order="latest", n=2)
    assert PerUserRule.of("holdout", {"fraction": 0.2, "per_user": True}).min_user_interactions == 2
    assert PerUserRule.of("given_n", {"n": 2, "min_user_interactions": 5}).min_user_interactions == 5
    with pytest.raises(ConfigError, match="not drawn per user"):
        PerUserRule.of("holdout", {"fraction": 0.2})
    with pytest.raises(ConfigError, match="not drawn per user"):
        PerUserRule.of("kfold", {"k": 5})
    with pytest.raises(ConfigError, match="n must be an integer"):
        PerUserRule.of("given_n", {})
    with pytest.raises(ConfigError, match="order must be one of"):
        PerUserRule.of("all_but_n", {"order": "oldest"})
