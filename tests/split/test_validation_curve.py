"""Validation splits carved from train, and nested learning-curve subsamples."""

import numpy as np
import pytest

from recsys_eval.errors import ConfigError
from recsys_eval.split import holdout, kfold, learning_curve, validation_split

from .helpers import assert_partition, per_user_counts, random_interactions, rows


def test_validation_split_divides_train_and_leaves_test_alone():
    data = random_interactions(30)
    outer = holdout(data, 0.2, seed=1)
    test_before = outer.test.frame.clone()
    inner = validation_split(outer, "holdout", fraction=0.25, per_user=True, seed=2)
    assert_partition(outer.train, inner)
    assert not (rows(inner.train) + rows(inner.test)) & rows(outer.test)
    assert outer.test.frame.equals(test_before)
    assert inner.name == "holdout/holdout" and inner.info["validation_of"] == "holdout"
    direct = holdout(outer.train, 0.25, per_user=True, seed=2)
    assert inner.test.frame.equals(direct.test.frame)


def test_validation_split_with_a_function_and_with_folds():
    data = random_interactions(31)
    outer = kfold(data, 3, seed=0)[1]
    folds = validation_split(outer, kfold, k=4, seed=1)
    assert [f.name for f in folds] == [f"fold2/fold{i}" for i in range(1, 5)]
    assert sum(len(f.test) for f in folds) == len(outer.train)


@pytest.mark.parametrize("per_user", [False, True])
def test_learning_curve_is_nested_with_the_asked_sizes(per_user):
    data = random_interactions(32)
    split = holdout(data, 0.2, seed=0)
    fractions = [0.1, 0.25, 0.5, 0.9, 1.0]
    curve = learning_curve(split, fractions, per_user=per_user, seed=3)
    assert [s.name for s in curve] == [f"holdout@{f:g}" for f in fractions]
    assert curve[-1].name == "holdout@1"
    counts = per_user_counts(split.train, data.n_users)
    previous = None
    for f, sub in zip(fractions, curve):
        assert sub.test is split.test
        assert not rows(sub.train) - rows(split.train)
        if previous is not None:
            assert not rows(previous.train) - rows(sub.train)
        if per_user:
            kept = per_user_counts(sub.train, data.n_users)
            target = np.minimum(np.maximum(np.floor(f * counts + 0.5), 1), counts)
            assert np.array_equal(kept, target)
            assert np.all(np.abs(kept - f * counts) <= 1)
        else:
            assert len(sub.train) == int(np.floor(f * len(split.train) + 0.5))
        previous = sub
    assert curve[-1].train.frame.equals(split.train.frame)


def test_learning_curve_depends_on_the_seed_only():
    split = holdout(random_interactions(33), 0.2, seed=0)
    a = learning_curve(split, [0.3], seed=1)[0]
    b = learning_curve(split, [0.3], seed=1)[0]
    c = learning_curve(split, [0.3], seed=2)[0]
    assert a.train.frame.equals(b.train.frame) and not a.train.frame.equals(c.train.frame)


def test_official_folds_cannot_be_a_validation_splitter():
    split = holdout(random_interactions(34), 0.2, seed=0)
    with pytest.raises(ConfigError, match="official"):
        validation_split(split, "official")
