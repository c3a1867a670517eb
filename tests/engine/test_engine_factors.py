"""A factor model as a Spark task sees it (item factors broadcast, its users' factor rows joined)
scores and ranks its users to the bit as the whole fitted model does, and what is broadcast holds
no user's factors; a bias predictor's user biases travel as rows too."""

from __future__ import annotations

import pickle

import numpy as np
import polars as pl
import pytest

from recsys_eval.core import Interactions, Targets
from recsys_eval.engine.factors import BIAS, FACTORS, MODEL, PartitionFactors, item_side, take_user_factors
from recsys_eval.engine.fold import broadcastable, local_model
from recsys_eval.recommend import make_recommender, rank_targets, recommend_top_k

N_USERS, N_ITEMS = 300, 45


@pytest.fixture(scope="module")
def data() -> Interactions:
    rng = np.random.default_rng(3)
    mask = rng.random((N_USERS, N_ITEMS)) < 0.2
    mask[np.arange(N_USERS), rng.integers(0, N_ITEMS, N_USERS)] = True
    mask[rng.integers(0, N_USERS, N_ITEMS), np.arange(N_ITEMS)] = True
    users, items = np.nonzero(mask)
    return Interactions.from_frame(pl.DataFrame({"user": users, "item": items}))


@pytest.fixture(scope="module", params=[("als", {"factors": 6, "iterations": 3}),
                                        ("bpr", {"factors": 6, "iterations": 5}),
                                        ("lmf", {"factors": 6, "iterations": 3})])
def fitted(request, data):
    name, params = request.param
    return make_recommender(name, params, seed=7, threads=1).fit(data)


def _partition(model, users: np.ndarray) -> PartitionFactors:
    """What a task holding ``users`` builds: the broadcast item side with their factor rows, handed
    over in a shuffled order (a partition's rows come in any order)."""
    shuffled = np.random.default_rng(1).permutation(users)
    return local_model(broadcastable(model), None, (shuffled, model.user_factors[shuffled]))


def test_partition_scores_equal_the_whole_model_to_the_bit(fitted, data):
    users = np.arange(1, N_USERS, 3)  # every third user: the others' rows are not there
    part = _partition(fitted, users)
    rng = np.random.default_rng(0)
    pair_users, pair_items = rng.choice(users, 500), rng.integers(0, N_ITEMS, 500)
    assert np.array_equal(part.score(pair_users, pair_items), fitted.score(pair_users, pair_items))
    assert np.array_equal(part.score_block(users[::-1]), fitted.score_block(users[::-1]))
    # full rankings go through the tiles of factors(): the same items and scores, and AUC places
    whole = recommend_top_k(fitted, data, users, 10)
    mine = recommend_top_k(part, data, users, 10)
    assert np.array_equal(whole.items, mine.items) and np.array_equal(whole.scores, mine.scores)
    assert np.array_equal(whole.offsets, mine.offsets)
    # listed targets: every user's first 20 items
    offsets = np.arange(len(users) + 1, dtype=np.int64) * 20
    targets = Targets(users.astype(np.int32), offsets, np.tile(np.arange(20, dtype=np.int32), len(users)),
                      np.zeros(20 * len(users), np.float32), N_ITEMS, "t")
    a, b = rank_targets(fitted, targets), rank_targets(part, targets)
    assert np.array_equal(a.items, b.items) and np.array_equal(a.scores, b.scores)


def test_a_user_without_a_row_scores_zero(fitted):
    part = _partition(fitted, np.array([4, 9]))
    assert np.array_equal(part.factor_rows(np.array([9, 5, 4, 70])), [1, 2, 0, 2])  # 2: the zero row
    assert not part.score_block(np.array([5, 70])).any()
    manual = fitted.user_factors[9] @ fitted.item_factors[3]
    assert part.score(np.array([9]), np.array([3]))[0] == pytest.approx(manual, rel=1e-6)


def test_the_broadcast_holds_no_user_factors(fitted):
    light = broadcastable(fitted)
    assert isinstance(light, PartitionFactors) and len(light.users) == 0
    assert light.user_factors.shape == (1, fitted.item_factors.shape[1]) and not light.user_factors.any()
    assert np.array_equal(light.item_factors, fitted.item_factors)
    # pickled, it is the item factors (twice: rows and transposed) and a few hundred bytes, not the users'
    size = len(pickle.dumps(light))
    assert size < 2 * fitted.item_factors.nbytes + 2000 < 2 * fitted.item_factors.nbytes + fitted.user_factors.nbytes
    assert item_side(fitted).n_items == N_ITEMS


def test_chunk_factor_rows_are_taken_per_system():
    chunk = pl.DataFrame({
        "user": [0, 0, 0, 2, 2, 3], "item": [1, 5, None, 2, None, None], "test": [False, True, None, False, None, None],
        MODEL: [None, None, 1, None, 0, 1], FACTORS: [None, None, [1.0, 2.0], None, [3.0, 4.0], [5.0, 6.0]],
    }, schema_overrides={FACTORS: pl.List(pl.Float32), MODEL: pl.Int32})
    rows, factors = take_user_factors(chunk, ("als", "bpr"))
    assert rows.columns == ["user", "item", "test"] and rows.get_column("item").to_list() == [1, 5, 2]
    assert set(factors) == {"als", "bpr"}
    users, matrix = factors["bpr"]
    assert users.tolist() == [0, 3] and matrix.dtype == np.float32
    assert matrix.tolist() == [[1.0, 2.0], [5.0, 6.0]]
    assert factors["als"][0].tolist() == [2] and factors["als"][1].tolist() == [[3.0, 4.0]]
    plain = chunk.select("user", "item", "test")
    same, none = take_user_factors(plain, ())
    assert same is plain and none == {}


def test_a_bias_predictor_travels_as_its_item_side_and_its_users_bias_rows(data):
    rated = data.with_frame(data.frame.with_columns(
        rating=pl.Series(np.random.default_rng(5).integers(1, 6, len(data)).astype(np.float32))))
    fitted = make_recommender("bias", {"iterations": 2}).fit(rated)
    light = broadcastable(fitted)
    assert light.user_bias is None and fitted.user_bias is not None and light.item_bias is fitted.item_bias
    assert len(pickle.dumps(light)) < fitted.item_bias.nbytes + 2000  # no array over the users
    # a chunk's rows: interactions of users 4 and 9, and the bias rows of the model's every user
    biases = pl.DataFrame({"user": np.arange(N_USERS), MODEL: 0, BIAS: fitted.user_bias},
                          schema_overrides={MODEL: pl.Int32})
    chunk = pl.concat([pl.DataFrame({"user": [4, 9], "item": [1, 2]}), biases.filter(pl.col("user").is_in([4, 9]))],
                      how="diagonal_relaxed")
    rows, taken = take_user_factors(chunk, ("bias",))
    assert rows.columns == ["user", "item"] and taken["bias"][1].dtype == np.float64
    ready = local_model(light, None, taken["bias"])
    users, items = np.array([9, 4, 9]), np.array([0, 44, 7])
    assert np.array_equal(ready.predict(users, items), fitted.predict(users, items))  # the same float64 sums
    assert np.array_equal(ready.score_block(np.array([4, 9])), fitted.score_block(np.array([4, 9])))
