"""Fold-in under a user-disjoint split: models never fit on the test users, and score them from
their fold-in history as written out here from the models' definitions (dense numpy references)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from recommend_data import random_data
from spark_support import spark_missing

from recsys_eval.errors import ConfigError
from recsys_eval.recommend import REGISTRY, fit_for_split, make_recommender
from recsys_eval.recommend.fold_in import FOLDING_IN, check_name_folds_in
from recsys_eval.split import user_disjoint


@pytest.fixture(scope="module")
def split():
    return user_disjoint(random_data(3), 0.3, fold_in=0.6, seed=5)


def train_users_only(split):
    """The train side rebuilt from the raw rows of users with no test row (not through fit_side)."""
    tested = set(split.test.frame.get_column("user").to_list())
    kept = split.train.frame.filter(~pl.col("user").is_in(list(tested)))
    return split.train.with_frame(kept)


def dense(side):
    return side.csr().toarray().astype(np.float64)


def test_every_registry_name_says_whether_it_folds_in():
    for name in REGISTRY:
        if name == "spark_als" and spark_missing():
            continue
        model = make_recommender(name, {}, threads=1)
        assert bool(getattr(model, "folds_in", False)) == (name in FOLDING_IN), name


def test_item_knn_scores_fold_in_users_from_their_history(split):
    model = fit_for_split(make_recommender("item_knn", {"k": 20}, threads=1), split.train, split)
    alone = make_recommender("item_knn", {"k": 20}, threads=1).fit(train_users_only(split))
    # similarities learnt from the train users only; a user's scores are its full history row times them
    assert (model.similarity != alone.similarity).nnz == 0
    users = np.flatnonzero(split.test_users())
    expected = dense(split.train)[users] @ alone.similarity.toarray()
    assert np.allclose(model.score_block(users), expected, atol=1e-5)
    assert np.abs(expected).sum() > 0


def test_als_solves_fold_in_factors_in_closed_form(split):
    params = {"factors": 8, "iterations": 3, "regularization": 0.1, "alpha": 2.0}
    model = fit_for_split(make_recommender("als", params, seed=1, threads=1), split.train, split)
    alone = make_recommender("als", params, seed=1, threads=1).fit(train_users_only(split))
    assert np.array_equal(model.item_factors, alone.item_factors)  # the test users did not move them
    y = model.item_factors.astype(np.float64)
    history = dense(split.train)
    for u in np.flatnonzero(split.test_users()):
        # Hu, Koren & Volinsky (2008), confidence alpha on observed items, preference 1:
        # x_u = (Y'Y + Y'(C_u - I)Y + lambda I)^-1 Y' C_u p_u
        seen = history[u] > 0
        c = np.where(seen, params["alpha"], 0.0)
        a = y.T @ y + (y[seen].T * (c[seen] - 1)) @ y[seen] + params["regularization"] * np.eye(y.shape[1])
        x = np.linalg.solve(a, y.T @ (c * seen))
        assert np.allclose(model.user_factors[u], x, atol=1e-3)


def test_user_knn_finds_neighbours_among_train_users_only(split):
    k = 5
    model = fit_for_split(make_recommender("user_knn", {"k": k}, threads=1), split.train, split)
    history = dense(split.train)
    train_user = ~split.test_users()
    norms = np.linalg.norm(history, axis=1, keepdims=True)
    unit = np.divide(history, norms, out=np.zeros_like(history), where=norms > 0)
    users = np.flatnonzero(split.test_users())
    scores = model.score_block(users)
    for row, u in enumerate(users):
        sims = np.where(train_user, unit @ unit[u], 0.0)
        sims[u] = 0.0
        order = np.lexsort((np.arange(len(sims)), -sims))  # similarity descending, user ascending
        best = [v for v in order[:k] if sims[v] > 0]
        expected = sum(sims[v] * history[v] for v in best)
        assert np.allclose(scores[row], expected, atol=1e-5)


@pytest.mark.parametrize("name", ["bpr", "lmf", "bias", "user_knn_rating"])
def test_models_without_fold_in_are_refused(split, name):
    with pytest.raises(ConfigError, match="cannot score users it was not fitted on"):
        fit_for_split(make_recommender(name, {}, threads=1), split.train, split)
    with pytest.raises(ConfigError, match=repr(name)):
        check_name_folds_in(name)


def test_popularity_counts_train_users_only(split):
    model = fit_for_split(make_recommender("popular", {}), split.train, split)
    assert np.array_equal(model.counts, train_users_only(split).item_counts().astype(np.float32))
