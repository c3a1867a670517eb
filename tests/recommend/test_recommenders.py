"""Recommenders: top-k and target ranking against brute-force references, each model's scores
against a slow obvious computation, external runs and plugins."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.core import Interactions, Targets
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.recommend import (
    ExternalRun,
    Recommender,
    make_recommender,
    rank_targets,
    recommend_top_k,
)
from recsys_eval.recommend.user_knn import UserKNN


def random_data(seed: int, n_users: int = 40, n_items: int = 30, density: float = 0.2) -> Interactions:
    rng = np.random.default_rng(seed)
    mask = rng.random((n_users, n_items)) < density
    mask[np.arange(n_users), rng.integers(0, n_items, n_users)] = True  # every user has one
    mask[rng.integers(0, n_users, n_items), np.arange(n_items)] = True  # every item has one
    users, items = np.nonzero(mask)
    return Interactions.from_frame(pl.DataFrame({
        "user": users, "item": items,
        "rating": rng.integers(1, 6, len(users)).astype(np.float64),
    }))


ALL = [
    ("random", {}), ("popular", {}), ("als", {"factors": 8, "iterations": 3}),
    ("bpr", {"factors": 8, "iterations": 5}), ("lmf", {"factors": 8, "iterations": 3}),
    ("item_knn", {"similarity": "cosine", "k": 10}), ("item_knn", {"similarity": "bm25"}),
    ("item_knn", {"similarity": "tfidf"}), ("user_knn", {"k": 5}), ("bias", {}),
    ("user_knn_rating", {"k": 5}),
]


def brute_top_k(model: Recommender, data: Interactions, users, k, candidates=None):
    """One user at a time: every score, train items and non-candidates removed, sorted by
    (score desc, item asc)."""
    seen = data.csr().toarray() > 0
    out = []
    for u in users:
        scores = model.score_block(np.array([u]))[0].astype(np.float64)
        allowed = ~seen[u] & np.isfinite(scores)
        if candidates is not None:
            allowed &= candidates
        items = np.flatnonzero(allowed)
        order = sorted(items, key=lambda i: (-scores[i], i))
        out.append(order[:k])
    return out


def split_rankings(r):
    return [r.items[r.offsets[i]:r.offsets[i + 1]].tolist() for i in range(r.n_units)]


@pytest.mark.parametrize("name,params", ALL)
def test_top_k_excludes_train_and_matches_brute_force(name, params):
    data = random_data(1)
    model = make_recommender(name, params, seed=3, threads=1).fit(data)
    users = np.arange(data.n_users)
    rankings = recommend_top_k(model, data, users, 7, chunk_size=6)
    seen = data.csr().toarray() > 0
    got = split_rankings(rankings)
    for u, items in zip(users, got, strict=True):
        assert not seen[u, items].any()
        assert len(set(items)) == len(items)
    assert got == brute_top_k(model, data, users, 7)
    # pair scores agree with the block scores
    pairs_u = np.repeat(users[:5], 3)
    pairs_i = np.tile([0, 7, 29], 5)
    block = model.score_block(users[:5])
    np.testing.assert_allclose(model.score(pairs_u, pairs_i), block[pairs_u, pairs_i], rtol=1e-5, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 1000), chunk=st.integers(1, 50), k=st.integers(1, 40))
def test_top_k_independent_of_chunking_and_respects_candidates(seed, chunk, k):
    data = random_data(seed, n_users=25, n_items=20)
    model = make_recommender("popular", {}).fit(data)  # many ties: the hard case for top-k
    rng = np.random.default_rng(seed)
    candidates = rng.random(data.n_items) < 0.6
    users = rng.integers(0, data.n_users, 30)  # repeated users are allowed
    whole = recommend_top_k(model, data, users, k, candidates=candidates, chunk_size=1000)
    chunked = recommend_top_k(model, data, users, k, candidates=candidates, chunk_size=chunk)
    assert split_rankings(whole) == split_rankings(chunked)
    assert split_rankings(whole) == brute_top_k(model, data, users, k, candidates)
    assert candidates[whole.items].all()


def test_rank_targets_sorts_each_unit_like_a_reference():
    data = random_data(2)
    model = make_recommender("als", {"factors": 6, "iterations": 2}, seed=1, threads=1).fit(data)
    rng = np.random.default_rng(0)
    sizes = rng.integers(0, 12, 15)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    units = rng.integers(0, data.n_users, 15).astype(np.int32)
    items = np.concatenate([np.sort(rng.choice(data.n_items, s, replace=False)) for s in sizes]).astype(np.int32)
    targets = Targets(units, offsets, items, np.zeros(len(items), np.float32), data.n_items, "t")
    rankings = rank_targets(model, targets, chunk_size=4)
    scores = model.score_block(np.arange(data.n_users))
    for i in range(15):
        listed = items[offsets[i]:offsets[i + 1]]
        expected = sorted(listed, key=lambda j: (-scores[units[i], j], j))
        assert rankings.items[rankings.offsets[i]:rankings.offsets[i + 1]].tolist() == list(expected)


def test_popular_ranks_by_train_counts_with_index_ties():
    data = Interactions.from_frame(pl.DataFrame({"user": [0, 1, 2, 0, 1, 3], "item": [5, 5, 5, 6, 7, 7]}))
    model = make_recommender("popular", {}).fit(data)
    got = split_rankings(recommend_top_k(model, data, np.array([3]), 3))
    assert got == [[0, 1]]  # item 5 (3 users), then item 6 (1 user); item 7 is user 3's own


def test_user_knn_equals_a_slow_reference():
    data = random_data(5, n_users=15, n_items=12, density=0.35)
    k = 4
    model = UserKNN(k=k).fit(data)
    dense = data.csr().toarray()
    norms = np.linalg.norm(dense, axis=1)
    cos = dense @ dense.T / np.outer(norms, norms)
    for u in range(data.n_users):
        others = [v for v in range(data.n_users) if v != u]
        nearest = sorted(others, key=lambda v: (-cos[u, v], v))[:k]
        expected = sum(cos[u, v] * dense[v] for v in nearest if cos[u, v] > 0)
        np.testing.assert_allclose(model.score_block(np.array([u]))[0], expected, rtol=1e-5, atol=1e-6)


def test_user_knn_rating_prediction_by_hand():
    # users 0 and 1 agree; user 2 is the reverse. Item 2 is unrated by user 0.
    frame = pl.DataFrame({
        "user": [0, 0, 1, 1, 1, 2, 2, 2], "item": [0, 1, 0, 1, 2, 0, 1, 2],
        "rating": [5.0, 1.0, 4.0, 2.0, 5.0, 1.0, 5.0, 2.0],
    })
    data = Interactions.from_frame(frame)
    model = make_recommender("user_knn_rating", {"k": 2}).fit(data)
    means = np.array([3.0, 11 / 3, 8 / 3])
    centred = {(0, 0): 2.0, (0, 1): -2.0, (1, 0): 4 - 11 / 3, (1, 1): 2 - 11 / 3, (1, 2): 5 - 11 / 3,
               (2, 0): 1 - 8 / 3, (2, 1): 5 - 8 / 3, (2, 2): 2 - 8 / 3}
    vec = np.zeros((3, 3))
    for (u, i), v in centred.items():
        vec[u, i] = v
    w = [vec[0] @ vec[v] / (np.linalg.norm(vec[0]) * np.linalg.norm(vec[v])) for v in (1, 2)]
    assert w[0] > 0 > w[1]  # user 2 is dissimilar: not a neighbour (positive similarities only)
    expected = means[0] + (w[0] * centred[1, 2]) / abs(w[0])
    assert model.predict(np.array([0]), np.array([2]))[0] == pytest.approx(expected, rel=1e-5)
    # user 1 on item 0 (rated by 0 and 2, but only 0 is similar to 1)
    w10 = vec[1] @ vec[0] / (np.linalg.norm(vec[1]) * np.linalg.norm(vec[0]))
    assert model.predict(np.array([1]), np.array([0]))[0] == pytest.approx(
        means[1] + w10 * centred[0, 0] / abs(w10), rel=1e-5)


def test_bias_predictor_equals_a_loop():
    data = random_data(7)
    model = make_recommender("bias", {"reg_item": 3.0, "reg_user": 2.0}).fit(data)
    rows = data.frame.to_dicts()
    mu = sum(r["rating"] for r in rows) / len(rows)
    b_i = {}
    for i in range(data.n_items):
        res = [r["rating"] - mu for r in rows if r["item"] == i]
        b_i[i] = sum(res) / (3.0 + len(res))
    for u in range(data.n_users):
        res = [r["rating"] - mu - b_i[r["item"]] for r in rows if r["user"] == u]
        b_u = sum(res) / (2.0 + len(res))
        assert model.predict(np.array([u]), np.array([4]))[0] == pytest.approx(mu + b_u + b_i[4], rel=1e-5)


@pytest.mark.parametrize("name,params", [("random", {}), ("als", {"factors": 8, "iterations": 3}),
                                         ("bpr", {"factors": 8, "iterations": 5}),
                                         ("lmf", {"factors": 8, "iterations": 3})])
def test_same_seed_same_scores_other_seed_other_scores(name, params):
    data = random_data(3)
    def scores(seed):
        return make_recommender(name, params, seed=seed, threads=1).fit(data).score_block(np.arange(5))
    np.testing.assert_array_equal(scores(11), scores(11))
    assert not np.array_equal(scores(11), scores(12))


def test_external_run_round_trip_gives_the_internal_rankings(tmp_path):
    data = random_data(4)
    model = make_recommender("als", {"factors": 6, "iterations": 2}, seed=2, threads=1).fit(data)
    users = np.arange(data.n_users)
    internal = recommend_top_k(model, data, users, 10)
    frame = data.to_raw(internal.to_frame().select("user", "item", "score"))
    path = tmp_path / "run.parquet"
    frame.write_parquet(path)
    external = ExternalRun.from_file(path, data)
    again = recommend_top_k(external, data, users, 10)
    assert split_rankings(again) == split_rankings(internal)
    assert external.unknown["rows"] == 0
    ranked = frame.with_columns(pl.col("score").rank("ordinal", descending=True).over("user").alias("rank")).drop("score")
    ranked.write_csv(tmp_path / "run.csv")
    by_rank = recommend_top_k(ExternalRun.from_file(tmp_path / "run.csv", data), data, users, 10)
    assert split_rankings(by_rank) == split_rankings(internal)


def test_external_run_unranked_items_are_left_out_and_unknown_ids_reported():
    data = random_data(4)
    frame = pl.DataFrame({"user": [0, 0, 0, 999], "item": [3, 4, 777, 3], "score": [1.0, 2.0, 3.0, 4.0]})
    run = ExternalRun(frame, data)
    assert run.unknown == {"rows": 2, "users": [999], "items": [777]}
    targets = Targets(np.array([0], np.int32), np.array([0, 3], np.int64), np.array([3, 4, 5], np.int32),
                      np.zeros(3, np.float32), data.n_items, "t")
    assert rank_targets(run, targets).items.tolist() == [4, 3]  # item 5 not ranked by the run


@pytest.mark.parametrize("frame,message", [
    (pl.DataFrame({"user": [0], "score": [1.0]}), "missing column"),
    (pl.DataFrame({"user": [0], "item": [1]}), "score or rank"),
    (pl.DataFrame({"user": [0, 0], "item": [1, 1], "score": [1.0, 2.0]}), "repeat a \\(user, item\\)"),
    (pl.DataFrame({"user": [0], "item": [1], "score": [float("nan")]}), "NaN"),
    (pl.DataFrame({"user": [500], "item": [1], "score": [1.0]}), "no \\(user, item\\)"),
])
def test_external_run_bad_input(frame, message):
    with pytest.raises(DataError, match=message):
        ExternalRun(frame, random_data(4))


class ConstantPlugin(Recommender):
    """A user's own recommender: prefers high item indices."""

    def __init__(self, scale: float = 1.0, seed: int = 0) -> None:
        self.scale = scale
        self.seed = seed

    def fit(self, train):
        self.n_items = train.n_items
        return self

    def score_block(self, users):
        return np.tile(np.arange(self.n_items, dtype=np.float32) * self.scale, (len(users), 1))


class NotARecommender:
    pass


def test_plugin_by_import_path():
    data = random_data(1)
    model = make_recommender(f"{__name__}:ConstantPlugin", {"scale": 2.0}, seed=9).fit(data)
    assert model.seed == 9
    top = split_rankings(recommend_top_k(model, data, np.array([0]), 3))[0]
    seen = set(data.frame.filter(pl.col("user") == 0)["item"].to_list())
    assert top == [i for i in range(data.n_items - 1, -1, -1) if i not in seen][:3]


@pytest.mark.parametrize("name,params,message", [
    (f"{__name__}:NotARecommender", {}, "does not implement"),
    ("no_such_module_xyz:Thing", {}, "cannot import"),
    (f"{__name__}:Missing", {}, "has no"),
    ("alss", {}, "did you mean 'als'"),
    ("als", {"factor": 3}, "did you mean 'factors'"),
    ("popular", {"k": 3}, "takes no parameters"),
    ("item_knn", {"similarity": "cosin"}, "did you mean 'cosine'"),
])
def test_bad_recommender_names_and_params(name, params, message):
    with pytest.raises(ConfigError, match=message):
        make_recommender(name, params)
