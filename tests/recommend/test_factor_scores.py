"""A factor model's scores are fixed-order float32 sums (recsys_eval.recommend.factor_scores): each
(user, item) score has the same bits whatever the tile, the user's place in it, the range of users
ranked, the thread count, and whether the pair is scored alone, in a block or in a full ranking.
References: a float32 sum written out in Python scalars (the order itself), a float64 product
(within the rounding bound of a K-term float32 sum) and a full sort by (score desc, item asc)."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from recsys_eval.recommend.factor_scores import R_USERS, W_ITEMS, factor_scores, pack_items, pair_scores
from recsys_eval.recommend.topk import no_places, top_k_factors


def ordered_sum_reference(user: np.ndarray, item: np.ndarray) -> np.float32:
    """s = 0; s = s + u_f * v_f for f in order, every product and sum rounded to float32."""
    total = np.float32(0.0)
    for u, v in zip(user, item):
        total = np.float32(total + np.float32(np.float32(u) * np.float32(v)))
    return total


def factors(seed: int, n_users: int, n_items: int, n_factors: int):
    rng = np.random.default_rng(seed)
    users = rng.standard_normal((n_users, n_factors)).astype(np.float32)
    items = rng.standard_normal((n_items, n_factors)).astype(np.float32)
    return users, items


def all_scores(users, items, rows=None):
    rows = np.arange(len(users)) if rows is None else rows
    return factor_scores(users, pack_items(np.ascontiguousarray(items.T)), rows, len(items))


@pytest.mark.parametrize("n_users,n_items,n_factors", [(13, 37, 5), (R_USERS, W_ITEMS, 1), (20, 50, 64), (3, 1, 0)])
def test_every_score_is_the_ordered_float32_sum(n_users, n_items, n_factors):
    users, items = factors(1, n_users, n_items, n_factors)
    expected = np.array([[ordered_sum_reference(u, v) for v in items] for u in users], dtype=np.float32)
    np.testing.assert_array_equal(all_scores(users, items).view(np.int32), expected.view(np.int32))
    rows, cols = np.repeat(np.arange(n_users), n_items), np.tile(np.arange(n_items), n_users)
    pairs = pair_scores(users, items, rows, cols).reshape(n_users, n_items)
    np.testing.assert_array_equal(pairs.view(np.int32), expected.view(np.int32))


def test_scores_are_the_product_within_the_rounding_of_a_float32_sum():
    users, items = factors(2, 40, 300, 64)
    exact = users.astype(np.float64) @ items.T.astype(np.float64)
    bound = 64 * 2.0**-24 * (np.abs(users).astype(np.float64) @ np.abs(items).T.astype(np.float64))
    error = np.abs(all_scores(users, items) - exact)
    assert np.all(error <= bound)
    assert error.max() > 0  # float32 sums, not float64 ones


def ranked(users, items, rows, k, tile, seen_indptr, seen_indices, blocked, factor_rows=None):
    item, score, count, nans = top_k_factors(users, np.ascontiguousarray(items.T), rows, seen_indptr, seen_indices,
                                             blocked, k, tile, *no_places(len(rows)), factor_rows=factor_rows)
    assert nans == 0
    return item, score, count


def seen_matrix(rng, n_rows, n_items, per_row):
    indices = [np.sort(rng.choice(n_items, per_row, replace=False)) for _ in range(n_rows)]
    indptr = np.arange(n_rows + 1, dtype=np.int64) * per_row
    return indptr, np.concatenate(indices).astype(np.int32)


def test_a_users_top_k_does_not_depend_on_tiles_ranges_places_or_threads():
    users, items = factors(3, 47, 203, 64)
    rng = np.random.default_rng(3)
    indptr, indices = seen_matrix(rng, 47, 203, 5)
    blocked = rng.random(203) < 0.1
    rows = np.arange(47, dtype=np.int64)
    base = ranked(users, items, rows, 20, 47, indptr, indices, blocked)
    for tile in (1, 5, R_USERS, 7, 13):
        for got, want in zip(ranked(users, items, rows, 20, tile, indptr, indices, blocked), base):
            np.testing.assert_array_equal(got, want)
    for split in (1, 3, 25):  # two ranges of users, each ranked alone: each user at another offset
        parts = [ranked(users, items, part, 20, 6, indptr, indices, blocked) for part in (rows[:split], rows[split:])]
        for p, want in enumerate(base):
            np.testing.assert_array_equal(np.concatenate([part[p] for part in parts]), want)
    shifted = np.roll(rows, 4)  # every user at another place in its tile
    for got, want in zip(ranked(users, items, shifted, 20, 6, indptr, indices, blocked), base):
        np.testing.assert_array_equal(got, want[shifted])
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        for got, want in zip(ranked(users, items, rows, 20, 6, indptr, indices, blocked), base):
            np.testing.assert_array_equal(got, want)
    finally:
        numba.set_num_threads(threads)


def test_full_ranking_pairs_and_blocks_give_one_score_per_pair():
    users, items = factors(4, 30, 77, 16)
    rows = np.arange(30, dtype=np.int64)
    empty_ptr, empty = np.zeros(31, np.int64), np.zeros(0, np.int32)
    item, score, _ = ranked(users, items, rows, 77, 8, empty_ptr, empty, np.zeros(77, bool))
    pairs = pair_scores(users, items, np.repeat(rows, 77), item.ravel()).reshape(30, 77)
    np.testing.assert_array_equal(score.view(np.int32), pairs.view(np.int32))
    block = all_scores(users, items)
    np.testing.assert_array_equal(np.take_along_axis(block, item.astype(np.int64), 1), score)
    some = np.array([29, 3, 3, 17])  # any rows, any order, repeated: the same rows of scores
    np.testing.assert_array_equal(all_scores(users, items, some), block[some])


def test_top_k_is_a_sort_by_score_desc_then_item_asc():
    # small integer factors: sums are exact, so many items tie
    rng = np.random.default_rng(5)
    users = rng.integers(-2, 3, size=(25, 3)).astype(np.float32)
    items = rng.integers(-2, 3, size=(90, 3)).astype(np.float32)
    indptr, indices = seen_matrix(rng, 25, 90, 7)
    blocked = rng.random(90) < 0.2
    rows = rng.permutation(25).astype(np.int64)
    factor_rows = rng.permutation(25).astype(np.int64)  # a model holding its users' rows elsewhere
    item, score, count = ranked(users, items, rows, 12, 4, indptr, indices, blocked, factor_rows=factor_rows)
    exact = users.astype(np.int64) @ items.T.astype(np.int64)
    for r, user in enumerate(rows):
        allowed = [j for j in range(90) if not blocked[j] and j not in indices[indptr[user]:indptr[user + 1]]]
        expected = sorted(allowed, key=lambda j: (-exact[factor_rows[r], j], j))[:12]
        assert count[r] == len(expected)
        assert item[r, :count[r]].tolist() == expected
        assert score[r, :count[r]].tolist() == [exact[factor_rows[r], j] for j in expected]


@pytest.mark.parametrize("name,params", [("als", {"factors": 7, "iterations": 2}), ("bpr", {"factors": 9, "iterations": 3})])
def test_a_fitted_models_rankings_and_pairs_do_not_depend_on_the_chunk(name, params):
    # the ranges of users a memory budget (or a Spark partition) gives are recommend_top_k's chunks
    from recommend_data import random_data

    from recsys_eval.recommend import make_recommender, recommend_top_k

    data = random_data(8, n_users=61, n_items=90)
    model = make_recommender(name, params, seed=2, threads=1).fit(data)
    users = np.arange(data.n_users)
    whole = recommend_top_k(model, data, users, 15)
    for chunk in (1, 5, 13):
        part = recommend_top_k(model, data, users, 15, chunk_size=chunk)
        np.testing.assert_array_equal(part.items, whole.items)
        np.testing.assert_array_equal(part.scores.view(np.int32), whole.scores.view(np.int32))
    listed = model.score(np.repeat(users, np.diff(whole.offsets)).astype(np.int32), whole.items)
    np.testing.assert_array_equal(listed.view(np.int32), whole.scores.view(np.int32))
    np.testing.assert_array_equal(model.score_block(users[::-1])[::-1][np.repeat(users, np.diff(whole.offsets)),
                                                                         whole.items], whole.scores)
