"""make_split: splitters by the names configs use, with checked parameter names."""

import pytest

from recsys_eval.errors import ConfigError
from recsys_eval.split import (
    SPLITTERS,
    all_but_n,
    check_split,
    given_n,
    holdout,
    kfold,
    leave_last_n,
    make_split,
    time_split,
    user_time_split,
)

from .helpers import random_interactions

CASES = [
    ("holdout", holdout, {"fraction": 0.2, "per_user": True, "seed": 1}),
    ("kfold", kfold, {"k": 3, "seed": 1}),
    ("time", time_split, {"at": 0.5}),
    ("user_time", user_time_split, {"n": 2, "seed": 1}),
    ("all_but_n", all_but_n, {"n": 1, "order": "latest", "seed": 1}),
    ("given_n", given_n, {"n": 2, "seed": 1}),
    ("leave_last_n", leave_last_n, {"n": 1, "seed": 1}),
]


@pytest.mark.parametrize(("method", "function", "params"), CASES)
def test_make_split_runs_the_named_splitter(method, function, params):
    data = random_interactions(50)
    made = make_split(data, method, **params)
    direct = function(data, **params)
    made, direct = (made, direct) if isinstance(made, list) else ([made], [direct])
    for a, b in zip(made, direct):
        assert a.test.frame.equals(b.test.frame) and a.info == b.info


def test_every_splitter_takes_a_seed():
    for method, function in SPLITTERS.items():
        assert "seed" in __import__("inspect").signature(function).parameters, method


def test_unknown_parameter_lists_the_allowed_ones():
    with pytest.raises(ConfigError, match=r"no parameter 'fractoin'.*'fraction'.*did you mean 'fraction'"):
        make_split(random_interactions(51), "holdout", fractoin=0.2, seed=1)


def test_unknown_method_and_missing_parameters():
    data = random_interactions(52)
    with pytest.raises(ConfigError, match="unknown split method 'hold_out'.*did you mean 'holdout'"):
        make_split(data, "hold_out", fraction=0.2, seed=1)
    with pytest.raises(ConfigError, match="needs parameter.*'fraction'"):
        make_split(data, "holdout", seed=1)
    with pytest.raises(ConfigError, match="needs parameter.*'seed'"):
        make_split(data, "holdout", fraction=0.2)


def test_check_split_leaves_the_seed_to_the_runner():
    check_split("holdout", {"fraction": 0.2, "per_user": True})
    check_split("official", {"names": ["ua", "ub"]})
    with pytest.raises(ConfigError, match="no parameter 'k'"):
        check_split("time", {"at": 0.8, "k": 3})
