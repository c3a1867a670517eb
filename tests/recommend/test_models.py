"""Each recommender's scores against an independent computation: implicit's own recommend, slow
loops, closed forms and hand-worked cases; determinism under a seed."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recommend_data import ALL_MODELS, all_scores, per_unit, random_data

from recsys_eval.core import Interactions
from recsys_eval.errors import DataError
from recsys_eval.recommend import make_recommender, recommend_top_k
from recsys_eval.recommend.user_knn import cosine_index, row_normalised, similarity_row


def test_popular_ranks_by_train_counts_with_index_ties():
    data = Interactions.from_frame(pl.DataFrame({"user": [0, 1, 2, 0, 1, 3, 3], "item": [5, 5, 5, 6, 7, 7, 8]}))
    model = make_recommender("popular", {}).fit(data)
    # user 2 saw item 5; items 7 (2 users), then 6 and 8 (1 user each: by index)
    assert per_unit(recommend_top_k(model, data, np.array([2]), 3)) == [[2, 1, 3]]


def test_random_scores_are_uniform_and_independent_of_the_pairs_scored_with_them():
    data = random_data(0, n_users=200, n_items=500)
    model = make_recommender("random", {}, seed=7).fit(data)
    block = model.score_block(np.arange(200))
    assert 0.0 <= block.min() and block.max() < 1.0
    assert abs(block.mean() - 0.5) < 0.01 and abs(block.var() - 1 / 12) < 0.005
    assert np.array_equal(model.score_block(np.array([150, 3]))[1], block[3])
    assert np.array_equal(model.score(np.array([3, 3]), np.array([499, 0])), block[3, [499, 0]])


@pytest.mark.parametrize("name,params", [
    ("als", {"factors": 8, "iterations": 4}), ("bpr", {"factors": 8, "iterations": 10}),
    ("lmf", {"factors": 8, "iterations": 4}), ("item_knn", {"similarity": "cosine", "k": 10}),
    ("item_knn", {"similarity": "bm25", "k": 10}), ("item_knn", {"similarity": "tfidf", "k": 10}),
])
def test_implicit_models_rank_like_implicits_own_recommend(name, params):
    data = random_data(8, n_users=60, n_items=80)
    model = make_recommender(name, params, seed=4, threads=1).fit(data)
    users = np.arange(data.n_users)
    k = 10
    ours = recommend_top_k(model, data, users, k)
    ids, scores = model.model.recommend(users, data.csr()[users], N=k, filter_already_liked_items=True)
    for u in users:
        mine = ours.scores[ours.offsets[u]:ours.offsets[u + 1]]
        theirs = scores[u][ids[u] >= 0]
        n = len(theirs)  # implicit's kNN lists only items of non-zero score
        np.testing.assert_allclose(mine[:n], theirs, rtol=1e-4, atol=1e-5)
        assert (mine[n:] == 0).all()
        # same items wherever the score is not tied with the k-th one
        above = mine[:n] > mine[n - 1] + 1e-5
        items = ours.items[ours.offsets[u]:ours.offsets[u + 1]]
        assert set(items[:n][above]) == set(ids[u][:n][theirs > theirs[-1] + 1e-5])


def test_user_knn_equals_a_slow_reference():
    data = random_data(5, n_users=15, n_items=12, density=0.35)
    k = 4
    model = make_recommender("user_knn", {"k": k}).fit(data)
    dense = data.csr().toarray()
    norms = np.linalg.norm(dense, axis=1)
    cos = dense @ dense.T / np.outer(norms, norms)
    expected = np.zeros_like(dense)
    for u in range(data.n_users):
        others = [v for v in range(data.n_users) if v != u and cos[u, v] > 0]
        for v in sorted(others, key=lambda v: (-cos[u, v], v))[:k]:
            expected[u] += cos[u, v] * dense[v]
    np.testing.assert_allclose(all_scores(model, data.n_users), expected, rtol=1e-5, atol=1e-6)


def slow_user_knn_rating(data: Interactions, k: int) -> np.ndarray:
    """Resnick's prediction for every (user, item), neighbours chosen per item, by loops."""
    rated = data.csr().toarray() > 0
    ratings = data.csr("rating").toarray()
    means = np.array([ratings[u, rated[u]].mean() for u in range(data.n_users)])
    centred = np.where(rated, ratings - means[:, None], 0.0)
    norms = np.linalg.norm(centred, axis=1)
    out = np.zeros(rated.shape)
    for u in range(data.n_users):
        for i in range(data.n_items):
            sims = {v: centred[u] @ centred[v] / (norms[u] * norms[v])
                    for v in range(data.n_users) if v != u and rated[v, i] and norms[u] * norms[v] > 0}
            nearest = sorted((v for v in sims if sims[v] > 0), key=lambda v: (-sims[v], v))[:k]
            weight = sum(sims[v] for v in nearest)
            out[u, i] = means[u] + (sum(sims[v] * centred[v, i] for v in nearest) / weight if nearest else 0.0)
    return out


@pytest.mark.parametrize("k", [1, 3, 50])
def test_user_knn_rating_equals_a_slow_reference(k):
    data = random_data(6, n_users=14, n_items=10, density=0.45)
    model = make_recommender("user_knn_rating", {"k": k}).fit(data)
    expected = slow_user_knn_rating(data, k)
    np.testing.assert_allclose(model.score_block(np.arange(data.n_users)), expected, rtol=1e-5, atol=1e-5)
    users, items = np.nonzero(np.ones_like(expected))
    np.testing.assert_allclose(model.predict(users, items), expected[users, items], rtol=1e-5, atol=1e-5)


def test_user_knn_keeps_each_users_neighbours_whatever_the_order_of_the_calls():
    # neighbours are found the first time a user is scored and kept: scoring some users first,
    # in another order and in pairs, gives the bits of scoring everyone at once on a fresh model
    data = random_data(13, n_users=50, n_items=20, density=0.3)
    whole = make_recommender("user_knn", {"k": 4}).fit(data).score_block(np.arange(data.n_users))
    model = make_recommender("user_knn", {"k": 4}).fit(data)
    some = np.array([31, 2, 31, 17], dtype=np.int32)
    np.testing.assert_array_equal(model.score_block(some), whole[some])
    users, items = np.nonzero(np.ones_like(whole))
    np.testing.assert_array_equal(model.score(users[::-1], items[::-1]), whole[users[::-1], items[::-1]])
    np.testing.assert_array_equal(model.score_block(np.arange(data.n_users)), whole)


def test_user_knn_rating_block_and_pairs_agree_to_the_bit():
    # integer ratings give tied similarities and ties at the k-th neighbour: the score block (one
    # sweep over each user's neighbours) and the pairs (a heap over each item's raters) must pick
    # the same neighbours and sum them in the same order, so that 1R lists read off blocks equal
    # ranking the listed targets
    base = random_data(12, n_users=40, n_items=25, density=0.5).frame
    copies = base.filter(pl.col("user") < 20).with_columns(pl.col("user") + 40)  # twins: equal similarities
    data = Interactions.from_frame(pl.concat([base, copies]))
    for k in (1, 2, 7, 60):
        model = make_recommender("user_knn_rating", {"k": k}).fit(data)
        block = model.score_block(np.arange(data.n_users))
        users, items = np.nonzero(np.ones_like(block))
        np.testing.assert_array_equal(model.predict(users, items), block[users, items])
    np.testing.assert_allclose(block, slow_user_knn_rating(data, 60), rtol=1e-5, atol=1e-5)


def full_sweep(data: Interactions, means: np.ndarray, k: int) -> np.ndarray:
    """UserKNNRating's score block by the plain full sweep, in Python: each user's similarities
    summed item by item (ascending) in float32, then all its positive neighbours walked best first
    (similarity desc, user asc), each adding w * c (a float32 product) and w to the float64 sums
    of the items that have fewer than k neighbours so far. ``means``: the model's user means."""
    centred = data.csr("rating").astype(np.float64)
    centred.data -= np.repeat(means.astype(np.float64), np.diff(centred.indptr))
    unit = row_normalised(centred)
    by_item = unit.tocsc()
    by_item.sort_indices()
    c32 = centred.data.astype(np.float32)
    out = np.empty((data.n_users, data.n_items), dtype=np.float32)
    for u in range(data.n_users):
        sims = np.zeros(data.n_users, dtype=np.float32)
        for p in range(unit.indptr[u], unit.indptr[u + 1]):
            i = unit.indices[p]
            raters = slice(by_item.indptr[i], by_item.indptr[i + 1])
            sims[by_item.indices[raters]] += unit.data[p] * by_item.data[raters]
        neighbours = sorted((v for v in range(data.n_users) if v != u and sims[v] > 0), key=lambda v: (-sims[v], v))
        count = np.zeros(data.n_items, dtype=np.int64)
        numerator = np.zeros(data.n_items)
        denominator = np.zeros(data.n_items)
        for v in neighbours:
            for p in range(centred.indptr[v], centred.indptr[v + 1]):
                i = centred.indices[p]
                if count[i] < k:
                    count[i] += 1
                    numerator[i] += float(sims[v] * c32[p])
                    denominator[i] += float(sims[v])
        for i in range(data.n_items):
            out[u, i] = means[u] + np.float32(numerator[i] / denominator[i] if denominator[i] > 0 else 0.0)
    return out


@st.composite
def rating_data(draw) -> Interactions:
    """Ratings where the sweep's frontier moves at different points: dense or sparse, with or
    without an item everyone rated and rare items, integer ratings (tied similarities) or half
    stars, and twin users (equal similarities to everyone else)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_users, n_items = draw(st.integers(2, 45)), draw(st.integers(1, 20))
    mask = rng.random((n_users, n_items)) < draw(st.floats(0.05, 0.9))
    mask[np.arange(n_users), rng.integers(0, n_items, n_users)] = True
    if draw(st.booleans()):
        mask[:, 0] = True  # one item everybody rated
    if draw(st.booleans()):
        mask[2:, -1] = False  # a rare item
    if draw(st.booleans()):
        ratings = rng.integers(2, 11, (n_users, n_items)) / 2
    else:
        ratings = rng.integers(1, 6, (n_users, n_items)).astype(np.float64)
    twins = draw(st.integers(0, n_users // 2))
    mask[n_users - twins:], ratings[n_users - twins:] = mask[:twins], ratings[:twins]
    users, items = np.nonzero(mask)
    return Interactions.from_frame(pl.DataFrame({"user": users, "item": items, "rating": ratings[users, items]}))


@settings(max_examples=60, deadline=None)
@given(data=rating_data(), k=st.sampled_from([1, 2, 3, 5, 8, 60]))
def test_user_knn_rating_sweep_equals_the_full_sweep_to_the_bit(data, k):
    # the sweep skips the items below its frontier (full ones) and stops when every item is full;
    # it must give the bits of walking every positive neighbour, and the pairs the bits of both
    model = make_recommender("user_knn_rating", {"k": k}).fit(data)
    block = model.score_block(np.arange(data.n_users))
    np.testing.assert_array_equal(block, full_sweep(data, model.means, k))
    users, items = np.nonzero(np.ones_like(block))
    np.testing.assert_array_equal(model.predict(users, items), block[users, items])


@pytest.mark.parametrize("k", [1, 4, 30])
def test_user_knn_rating_sweep_equals_the_full_sweep_on_popular_items(k):
    # many users and skewed popularity: the frontier passes the popular items early and, for small
    # k, reaches the last item before the neighbours run out
    from recsys_eval.data.synthetic import synthetic_interactions

    data = synthetic_interactions(150, 60, 3600, seed=3)
    model = make_recommender("user_knn_rating", {"k": k}).fit(data)
    users = np.arange(data.n_users)
    np.testing.assert_array_equal(model.score_block(users), full_sweep(data, model.means, k))


@pytest.mark.parametrize("values", ["ones", "rating"])
def test_similarity_rows_equal_the_sparse_product(values):
    data = random_data(21, n_users=50, n_items=30, density=0.3)
    matrix = data.csr(values).astype(np.float64)
    if values == "rating":
        matrix.data -= np.repeat(np.asarray(matrix.sum(axis=1)).ravel() / np.diff(matrix.indptr), np.diff(matrix.indptr))
    vectors = row_normalised(matrix)
    users = np.array([0, 7, 49, 7, 23])
    expected = (vectors[users] @ vectors.T).toarray()
    expected[np.arange(len(users)), users] = -np.inf
    cosines = cosine_index(vectors)
    row = np.empty(data.n_users, dtype=np.float32)
    for r, u in enumerate(users):
        similarity_row(u, *cosines, row)
        np.testing.assert_allclose(row, expected[r], rtol=1e-6, atol=1e-7)


def test_user_knn_rating_by_hand():
    # users 0 and 1 agree, user 2 is their reverse; item 2 is unrated by user 0
    frame = pl.DataFrame({
        "user": [0, 0, 1, 1, 1, 2, 2, 2], "item": [0, 1, 0, 1, 2, 0, 1, 2],
        "rating": [5.0, 1.0, 4.0, 2.0, 5.0, 1.0, 5.0, 2.0],
    })
    model = make_recommender("user_knn_rating", {"k": 2}).fit(Interactions.from_frame(frame))
    c0, c1 = np.array([2.0, -2.0, 0.0]), np.array([4.0, 2.0, 5.0]) - 11 / 3
    w01 = c0 @ c1 / np.linalg.norm(c0) / np.linalg.norm(c1)
    # user 2 is dissimilar to user 0 (negative cosine) and is not a neighbour: only user 1 counts
    assert model.predict(np.array([0]), np.array([2]))[0] == pytest.approx(3.0 + w01 * c1[2] / w01, rel=1e-5)


def test_bias_predictor_one_pass_equals_a_loop():
    data = random_data(7)
    model = make_recommender("bias", {"reg_item": 3.0, "reg_user": 2.0}).fit(data)
    rows = data.frame.to_dicts()
    mu = sum(r["rating"] for r in rows) / len(rows)
    b_i = {i: sum(r["rating"] - mu for r in rows if r["item"] == i) / (3.0 + sum(r["item"] == i for r in rows))
           for i in range(data.n_items)}
    for u in range(data.n_users):
        residuals = [r["rating"] - mu - b_i[r["item"]] for r in rows if r["user"] == u]
        b_u = sum(residuals) / (2.0 + len(residuals))
        assert model.predict(np.array([u]), np.array([4]))[0] == pytest.approx(mu + b_u + b_i[4], rel=1e-5)


def test_bias_predictor_converges_to_the_regularised_least_squares_solution():
    data = random_data(9, n_users=8, n_items=6, density=0.5)
    reg_user, reg_item = 2.0, 3.0
    model = make_recommender("bias", {"reg_item": reg_item, "reg_user": reg_user, "iterations": 300}).fit(data)
    mu = data.ratings.mean()
    n_u, n_i = data.n_users, data.n_items
    design = np.zeros((len(data), n_u + n_i))
    design[np.arange(len(data)), data.users] = 1
    design[np.arange(len(data)), n_u + data.items] = 1
    penalty = np.diag(np.r_[np.full(n_u, np.sqrt(reg_user)), np.full(n_i, np.sqrt(reg_item))])
    solution = np.linalg.lstsq(np.vstack([design, penalty]), np.r_[data.ratings - mu, np.zeros(n_u + n_i)],
                               rcond=None)[0]
    np.testing.assert_allclose(model.user_bias, solution[:n_u], atol=1e-6)
    np.testing.assert_allclose(model.item_bias, solution[n_u:], atol=1e-6)


def test_bias_predictor_recovers_exact_additive_ratings():
    user_effect, item_effect = np.array([-1.0, 0.0, 1.0]), np.array([0.5, -0.5, 1.0, -1.0])
    users, items = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    frame = pl.DataFrame({"user": users.ravel(), "item": items.ravel(),
                          "rating": (3.0 + user_effect[users] + item_effect[items]).ravel()})
    model = make_recommender("bias", {"reg_item": 0.0, "reg_user": 0.0}).fit(Interactions.from_frame(frame))
    np.testing.assert_allclose(model.user_bias, user_effect, atol=1e-12)
    np.testing.assert_allclose(model.item_bias, item_effect, atol=1e-12)
    assert model.predict(np.array([2]), np.array([2]))[0] == pytest.approx(5.0)


@pytest.mark.parametrize("name", ["bias", "user_knn_rating"])
def test_rating_predictors_need_ratings(name):
    data = Interactions.from_frame(pl.DataFrame({"user": [0, 1], "item": [0, 1]}))
    with pytest.raises(DataError, match="needs ratings"):
        make_recommender(name, {}).fit(data)


@pytest.mark.parametrize("name,params", ALL_MODELS)
def test_same_seed_gives_the_same_scores(name, params):
    data = random_data(3)

    def scores(seed):
        return make_recommender(name, params, seed=seed, threads=2).fit(data).score_block(np.arange(data.n_users))

    np.testing.assert_array_equal(scores(11), scores(11))
    if name in ("random", "als", "bpr", "lmf"):
        assert not np.array_equal(scores(11), scores(12))


@pytest.mark.parametrize("name,params", ALL_MODELS)
def test_a_shared_block_scores_what_the_model_scores(name, params):
    # what the runner's rankings of a range of users read: the model's own block rows, and, once
    # the block exists, its pairs where the model says they match (else the model's own pairs);
    # users outside the range go to the model
    from recsys_eval.recommend.base import SharedBlock

    data = random_data(21, n_users=40, n_items=25, density=0.3)
    model = make_recommender(name, params, seed=3).fit(data)
    if name in ("als", "bpr", "lmf", "popular"):  # ranked by tiles or one global order, no block
        assert not SharedBlock.shares(model)
        return
    assert SharedBlock.shares(model)
    shared = SharedBlock(model, 10, 30)
    inside, outside = np.array([29, 10, 17, 17], dtype=np.int32), np.array([3, 35], dtype=np.int32)
    users, items = np.repeat(inside, 25), np.tile(np.arange(25), len(inside))
    np.testing.assert_array_equal(shared.score(users, items), model.score(users, items))  # no block yet
    np.testing.assert_array_equal(shared.score_block(inside), model.score_block(inside))
    np.testing.assert_array_equal(shared.score(users, items), model.score(users, items))  # off the block
    np.testing.assert_array_equal(shared.score_block(outside), model.score_block(outside))
    assert shared.pairs_match_blocks is False and shared.n_items == model.n_items
