"""Top-k over all candidates and ranking of listed targets, against per-user brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recommend_data import (
    ALL_MODELS,
    all_scores,
    brute_top_k,
    per_unit,
    random_data,
    random_targets,
)

from recsys_eval.core import Targets
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.recommend import (
    Recommender,
    base,
    make_recommender,
    rank_targets,
    recommend_top_k,
)


@pytest.mark.parametrize("name,params", ALL_MODELS)
def test_top_k_and_target_ranking_of_every_model_match_brute_force(name, params):
    data = random_data(1)
    model = make_recommender(name, params, seed=3, threads=1).fit(data)
    scores = all_scores(model, data.n_users)
    # the block scorer and the pair scorer agree
    np.testing.assert_allclose(model.score_block(np.arange(data.n_users)), scores, rtol=1e-5, atol=1e-5)
    users = np.arange(data.n_users)
    rankings = recommend_top_k(model, data, users, 7, chunk_size=6)
    seen = data.csr().toarray() > 0
    got = per_unit(rankings)
    for u, items in zip(users, got, strict=True):
        assert not seen[u, items].any()
        assert len(set(items)) == len(items) == 7
    assert got == brute_top_k(scores, data, users, 7)
    np.testing.assert_allclose(rankings.scores, scores[np.repeat(users, 7), rankings.items], rtol=1e-5, atol=1e-5)
    targets = random_targets(np.random.default_rng(0), data, 20)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "MIN_PAIRS", 1)
        ranked = rank_targets(model, targets, chunk_size=3)
    for i in range(targets.n_units):
        listed = targets.items[targets.offsets[i]:targets.offsets[i + 1]]
        u = targets.unit_user[i]
        assert per_unit(ranked)[i] == sorted(listed.tolist(), key=lambda j: (-scores[u, j], j))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 1000), chunk=st.integers(1, 40), k=st.integers(1, 25),
       name=st.sampled_from(["popular", "random", "als", "user_knn"]))
def test_chunked_top_k_equals_unchunked_brute_force(seed, chunk, k, name):
    data = random_data(seed, n_users=25, n_items=20)
    model = make_recommender(name, {"factors": 4, "iterations": 2} if name == "als" else {},
                             seed=seed, threads=1).fit(data)  # popular: many ties, the hard case
    rng = np.random.default_rng(seed)
    candidates = rng.random(data.n_items) < 0.6
    users = rng.integers(0, data.n_users, 30)  # repeated users are allowed
    chunked = recommend_top_k(model, data, users, k, candidates=candidates, chunk_size=chunk)
    whole = recommend_top_k(model, data, users, k, candidates=candidates, chunk_size=len(users))
    expected = brute_top_k(all_scores(model, data.n_users), data, users, k, candidates)
    assert per_unit(chunked) == per_unit(whole) == expected
    assert candidates[chunked.items].all()
    assert chunked.unit_user.tolist() == users.tolist()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 1000), chunk=st.integers(1, 30))
def test_rank_targets_equals_a_per_unit_sort_whatever_the_chunk(seed, chunk):
    data = random_data(seed, n_users=20, n_items=15)
    model = make_recommender("popular", {}).fit(data)  # ties everywhere
    rng = np.random.default_rng(seed)
    targets = random_targets(rng, data, int(rng.integers(0, 25)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "MIN_PAIRS", 1)  # chunks of exactly `chunk` units
        ranked = rank_targets(model, targets, chunk_size=chunk)
    counts = data.item_counts()
    expected = [sorted(targets.items[targets.offsets[i]:targets.offsets[i + 1]].tolist(),
                       key=lambda j: (-counts[j], j)) for i in range(targets.n_units)]
    assert per_unit(ranked) == expected
    assert ranked.unit_user.tolist() == targets.unit_user.tolist()


class PairsOnly(Recommender):
    """Implements only the pair scorer: prefers items whose index is close to the user's."""

    def fit(self, train):
        self.n_items = train.n_items
        return self

    def score(self, users, items):
        return -np.abs(np.asarray(items, np.float32) - np.asarray(users, np.float32))


class BlockOnly(PairsOnly):
    """The same scores from the block scorer only."""

    score = Recommender.score

    def score_block(self, users):
        return -np.abs(np.arange(self.n_items, dtype=np.float32)[None, :] - np.asarray(users, np.float32)[:, None])


def test_either_scorer_is_enough_and_both_give_the_same_rankings():
    data = random_data(2)
    rng = np.random.default_rng(1)
    targets = random_targets(rng, data, 15)
    users = rng.integers(0, data.n_users, 12)
    pairs, block = PairsOnly().fit(data), BlockOnly().fit(data)
    assert per_unit(rank_targets(pairs, targets)) == per_unit(rank_targets(block, targets))
    assert per_unit(recommend_top_k(pairs, data, users, 5, chunk_size=4)) == \
        per_unit(recommend_top_k(block, data, users, 5, chunk_size=4))


class Neither(Recommender):
    def fit(self, train):
        self.n_items = train.n_items
        return self


def test_a_recommender_with_no_scorer_says_so():
    data = random_data(2)
    with pytest.raises(NotImplementedError, match="score"):
        recommend_top_k(Neither().fit(data), data, np.array([0]), 3)


@pytest.mark.parametrize("name,params", ALL_MODELS)
def test_scoring_listed_targets_never_scores_a_dense_block(name, params):
    data = random_data(3)
    model = make_recommender(name, params, seed=1, threads=1).fit(data)

    def refuse(users):
        raise AssertionError("rank_targets scored a dense users x items block")

    model.score_block = refuse
    # sampled-protocol sized target sets: far fewer listed items per user than the catalogue (dense
    # target sets, e.g. 1R+AN, are scored by blocks on purpose; the brute-force tests cover them)
    sparse = random_targets(np.random.default_rng(2), data, 10, max_size=2)
    assert len(sparse.items) / len(np.unique(sparse.unit_user)) < data.n_items / 16
    ranked = rank_targets(model, sparse)
    assert ranked.n_units == 10


def test_items_scored_minus_infinity_are_left_out():
    data = random_data(4)
    block = BlockOnly().fit(data)
    block.score_block = lambda users: np.where(np.arange(data.n_items) % 2 == 0, 1.0, -np.inf)[None, :].repeat(len(users), 0)
    block.score = lambda users, items: np.where(np.asarray(items) % 2 == 0, 1.0, -np.inf)
    top = recommend_top_k(block, data, np.arange(data.n_users), data.n_items)
    assert (top.items % 2 == 0).all()
    targets = random_targets(np.random.default_rng(5), data, 8)
    ranked = rank_targets(block, targets)
    for i in range(targets.n_units):
        listed = targets.items[targets.offsets[i]:targets.offsets[i + 1]]
        assert per_unit(ranked)[i] == [j for j in listed.tolist() if j % 2 == 0]


def test_bad_arguments_and_bad_scores_are_clear_errors():
    data = random_data(4)
    model = make_recommender("popular", {}).fit(data)
    users = np.arange(3)
    with pytest.raises(ConfigError, match="k must be"):
        recommend_top_k(model, data, users, 0)
    with pytest.raises(ConfigError, match="chunk_size"):
        recommend_top_k(model, data, users, 3, chunk_size=0)
    with pytest.raises(DataError, match="bool mask"):
        recommend_top_k(model, data, users, 3, candidates=np.ones(data.n_items + 1, bool))
    full = Targets(np.zeros(1, np.int32), np.array([0, 0]), np.zeros(0, np.int32), np.zeros(0, np.float32),
                   data.n_items, "AI+AR+AN", all_candidates=True, n_candidates=np.array([5]))
    with pytest.raises(ConfigError, match="recommend_top_k"):
        rank_targets(model, full)
    nan = PairsOnly().fit(data)
    nan.score = lambda users, items: np.full(len(users), np.nan, np.float32)
    with pytest.raises(DataError, match="NaN"):
        rank_targets(nan, random_targets(np.random.default_rng(0), data, 5))
    short = BlockOnly().fit(data)
    short.score_block = lambda users: np.zeros((len(users), 3), np.float32)
    with pytest.raises(DataError, match="shape"):
        recommend_top_k(short, data, users, 3)


def test_rank_targets_breaks_ties_by_item_index_in_long_units():
    data = random_data(6, n_users=30, n_items=400, density=0.02)
    model = make_recommender("popular", {}).fit(data)  # a handful of distinct counts over 400 items
    rng = np.random.default_rng(6)
    targets = random_targets(rng, data, 6, max_size=400)
    counts = data.item_counts()
    expected = [sorted(targets.items[targets.offsets[i]:targets.offsets[i + 1]].tolist(),
                       key=lambda j: (-counts[j], j)) for i in range(targets.n_units)]
    assert per_unit(rank_targets(model, targets)) == expected


def test_a_factor_model_ranks_the_same_through_its_factors_and_its_blocks():
    data = random_data(7, n_users=50, n_items=60)
    model = make_recommender("als", {"factors": 5, "iterations": 2}, seed=0, threads=1).fit(data)
    users = np.arange(data.n_users)
    fused = recommend_top_k(model, data, users, 9, chunk_size=7)
    model.factors = lambda: None  # the generic path: score blocks, then scan
    blocks = recommend_top_k(model, data, users, 9, chunk_size=7)
    assert per_unit(fused) == per_unit(blocks)
    np.testing.assert_array_equal(fused.scores, blocks.scores)  # one fixed-order sum per score
    del model.factors
    model.user_factors[3, 0] = np.nan
    with pytest.raises(DataError, match="NaN"):
        recommend_top_k(model, data, users, 9)


class TiedBlocks(Recommender):
    """Scores with many ties, some items not ranked (-inf), one user's row NaN where asked."""

    def __init__(self, scores: np.ndarray):
        self.table, self.n_items = scores, scores.shape[1]

    def fit(self, train):
        return self

    def score_block(self, users):
        return self.table[np.asarray(users)]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), block_cells=st.sampled_from([1, 7, 64, 8_000_000]))
def test_dense_target_sets_are_ranked_like_a_full_sort(seed, block_cells):
    rng = np.random.default_rng(seed)
    n_users, n_items = 6, 25
    table = rng.integers(0, 4, (n_users, n_items)).astype(np.float32)
    table[rng.random((n_users, n_items)) < 0.1] = -np.inf
    # units of repeated users in any order, each listing most items (the 1R+AN shape)
    n_units = 15
    unit_user = rng.integers(0, n_users, n_units).astype(np.int32)
    lists = [np.sort(rng.choice(n_items, rng.integers(n_items // 2, n_items + 1), replace=False)) for _ in range(n_units)]
    sizes = [len(x) for x in lists]
    targets = Targets(unit_user, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
                      np.concatenate(lists).astype(np.int32), np.zeros(sum(sizes), np.float32), n_items, "t")
    model = TiedBlocks(table)
    assert base._dense_targets(model, len(targets.items), targets.unit_user)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(base, "BLOCK_CELLS", block_cells)
        ranked = rank_targets(model, targets)
    for i, listed in enumerate(lists):
        u = unit_user[i]
        expected = sorted((j for j in listed.tolist() if table[u, j] > -np.inf), key=lambda j: (-table[u, j], j))
        assert per_unit(ranked)[i] == expected
        lo, hi = ranked.offsets[i], ranked.offsets[i + 1]
        assert ranked.scores[lo:hi].tolist() == [table[u, j] for j in expected]
    table[unit_user[0], lists[0][0]] = np.nan
    with pytest.raises(DataError, match="NaN"):
        rank_targets(model, targets)
