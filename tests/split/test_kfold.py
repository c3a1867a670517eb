"""k-fold cross-validation, global and per user."""

import numpy as np
import pytest

from recsys_eval.errors import ConfigError
from recsys_eval.split import kfold

from .helpers import (
    assert_partition,
    in_test,
    ml100k,
    per_user_counts,
    random_interactions,
)


@pytest.mark.parametrize("per_user", [False, True])
def test_each_interaction_is_tested_in_exactly_one_fold(per_user):
    data = random_interactions(5)
    folds = kfold(data, 4, per_user=per_user, seed=1, min_user_interactions=1)
    assert [f.name for f in folds] == ["fold1", "fold2", "fold3", "fold4"]
    times_tested = sum(in_test(data, f).astype(int) for f in folds)
    assert np.all(times_tested == 1)
    for fold in folds:
        assert_partition(data, fold)
    sizes = [len(f.test) for f in folds]
    if not per_user:
        assert max(sizes) - min(sizes) <= 1


def test_per_user_folds_spread_each_user_evenly():
    data = ml100k()
    k = 5
    folds = kfold(data, k, per_user=True, seed=3)
    counts = per_user_counts(data, data.n_users)
    per_fold = np.stack([per_user_counts(f.test, data.n_users) for f in folds])
    assert np.array_equal(per_fold.sum(axis=0), counts)
    assert np.all(per_fold.max(axis=0) - per_fold.min(axis=0) <= 1)
    assert np.all(per_fold[:, counts >= k] > 0)  # every user with >= k interactions in every fold
    assert [f.info["fold"] for f in folds] == [1, 2, 3, 4, 5]


def test_small_users_stay_in_train_in_every_fold():
    data = random_interactions(6, n_users=600)
    counts = per_user_counts(data, data.n_users)
    folds = kfold(data, 3, per_user=True, seed=0)  # default minimum: 2 interactions
    single = np.flatnonzero(counts == 1)
    assert len(single) and all(f.info["users_kept_in_train"] == len(single) for f in folds)
    for f in folds:
        assert not np.isin(f.test.users, single).any()


def test_kfold_is_deterministic_and_seed_sensitive():
    data = random_interactions(7)
    a = kfold(data, 3, seed=4)
    b = kfold(data, 3, seed=4)
    c = kfold(data, 3, seed=5)
    assert all(x.test.frame.equals(y.test.frame) for x, y in zip(a, b))
    assert not a[0].test.frame.equals(c[0].test.frame)


def test_k_above_the_largest_profile_is_refused():
    data = random_interactions(8)
    largest = per_user_counts(data, data.n_users).max()
    kfold(data, int(largest), per_user=True, seed=0)
    with pytest.raises(ConfigError, match=f"largest user profile has {largest}"):
        kfold(data, int(largest) + 1, per_user=True, seed=0)
