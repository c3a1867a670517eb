"""Interactions (core): validation, duplicate policies, the raw id <-> index round trip, CSR."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.core import Interactions
from recsys_eval.errors import ConfigError, DataError


def _frame(**columns) -> pl.DataFrame:
    return pl.DataFrame(columns, strict=False)


# -- validation ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("frame", "kwargs", "message"),
    [
        (_frame(u=[1], item=[2]), {}, r"missing column 'user' for user; columns are \['u', 'item'\]"),
        (_frame(user=[1], item=[2]), {"rating": "stars"}, r"no column 'stars' for rating"),
        (_frame(user=[1.5], item=[2]), {}, r"column 'user' has type Float64; expected integer or string ids"),
        (_frame(user=[1, None], item=[2, 3]), {}, r"column 'user' has 1 null ids \(first at row 1\)"),
        (
            _frame(user=[1, 2], item=[2, 3], rating=[1.0, float("nan")]),
            {},
            r"column 'rating' has 1 null, NaN or infinite values \(e\.g\. user 2, item 3\)",
        ),
        (
            _frame(user=[1], item=[2], rating=["good"]),
            {},
            r"column 'rating' has type String; expected numbers",
        ),
        (_frame(user=[1], item=[2], timestamp=["monday"]), {}, r"column 'timestamp' has type String"),
    ],
)
def test_validation_names_the_column(frame, kwargs, message):
    with pytest.raises(DataError, match=message):
        Interactions.from_frame(frame, source="t", **kwargs)


def test_columns_are_typed_and_optional():
    data = Interactions.from_frame(_frame(user=["b", "a"], item=[7, 3], rating=[4, 5], timestamp=[1.0, 2.0]))
    assert data.frame.schema == pl.Schema(
        {"user": pl.Int32, "item": pl.Int32, "rating": pl.Float32, "timestamp": pl.Int64}
    )
    assert data.frame.rows() == [(1, 1, 4.0, 1), (0, 0, 5.0, 2)]
    implicit = Interactions.from_frame(_frame(user=[1], item=[2]))
    assert implicit.frame.columns == ["user", "item"] and not implicit.has_rating
    with pytest.raises(ConfigError, match="unknown duplicates policy 'first'"):
        Interactions.from_frame(_frame(user=[1], item=[2]), duplicates="first")


# -- duplicates ---------------------------------------------------------------------------------------
DUPLICATED = _frame(
    user=[1, 1, 2, 1, 2],
    item=[10, 10, 10, 10, 20],
    rating=[2.0, 5.0, 3.0, 4.0, 1.0],
    timestamp=[30, 10, 5, 20, 6],
)


def test_duplicates_error_counts_and_gives_an_example():
    with pytest.raises(
        DataError,
        match=r"t: 1 \(user, item\) pairs occur more than once \(3 rows\), "
        r"e\.g\. user 1, item 10; choose a duplicates policy",
    ):
        Interactions.from_frame(DUPLICATED, source="t")


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        # last = latest timestamp: user 1 item 10 was rated 5 at t=10, 4 at t=20, 2 at t=30
        ("last", {(1, 10): (2.0, 30), (2, 10): (3.0, 5), (2, 20): (1.0, 6)}),
        ("max", {(1, 10): (5.0, 30), (2, 10): (3.0, 5), (2, 20): (1.0, 6)}),
        ("mean", {(1, 10): ((2.0 + 5.0 + 4.0) / 3, 30), (2, 10): (3.0, 5), (2, 20): (1.0, 6)}),
    ],
)
def test_duplicate_policies_by_hand(policy, expected):
    data = Interactions.from_frame(DUPLICATED, duplicates=policy)
    raw = data.to_raw()
    got = {(u, i): (r, t) for u, i, r, t in raw.rows()}
    assert got.keys() == expected.keys() and len(raw) == 3
    for key, (rating, time) in expected.items():
        assert got[key][0] == pytest.approx(rating, rel=1e-6) and got[key][1] == time
    assert raw.select("user", "item").rows() == [(1, 10), (2, 10), (2, 20)]  # first-seen order


def test_last_without_timestamps_is_the_last_row():
    data = Interactions.from_frame(
        _frame(user=[1, 1, 1], item=[2, 2, 3], rating=[1.0, 3.0, 2.0]), duplicates="last"
    )
    assert data.to_raw().rows() == [(1, 2, 3.0), (1, 3, 2.0)]


# -- raw id <-> index ---------------------------------------------------------------------------------
@settings(max_examples=80, deadline=None)
@given(
    pairs=st.one_of(
        st.lists(st.tuples(st.integers(-(2**40), 2**40), st.integers(-5, 5)), min_size=1, max_size=60),
        st.lists(st.tuples(st.text(max_size=5), st.text(max_size=3)), min_size=1, max_size=60),
    )
)
def test_raw_index_raw_round_trip(pairs):
    pairs = list(dict.fromkeys(pairs))  # unique pairs, first-seen order
    frame = pl.DataFrame({"user": [u for u, _ in pairs], "item": [i for _, i in pairs]})
    data = Interactions.from_frame(frame)
    assert data.to_raw().rows() == pairs
    assert data.user_ids.to_list() == sorted({u for u, _ in pairs})
    assert data.item_ids.to_list() == sorted({i for _, i in pairs})
    assert np.array_equal(data.user_index(frame["user"]), data.users)
    assert np.array_equal(data.item_index(frame["item"]), data.items)
    unknown = "zzzzzzzz" if isinstance(pairs[0][0], str) else 2**41
    assert data.user_index([unknown]).tolist() == [-1]


# -- CSR ----------------------------------------------------------------------------------------------
def test_csr_matches_a_dense_reference():
    rng = np.random.default_rng(7)
    users, items = rng.integers(0, 20, 150), rng.integers(0, 30, 150)
    frame = pl.DataFrame({"user": users, "item": items, "rating": rng.integers(1, 6, 150).astype(float)})
    data = Interactions.from_frame(frame, duplicates="last")
    dense_ones = np.zeros((data.n_users, data.n_items), dtype=np.float32)
    dense_rating = np.zeros_like(dense_ones)
    for u, i, r in data.frame.rows():
        dense_ones[u, i] = 1.0
        dense_rating[u, i] = r
    ones, ratings = data.csr(), data.csr("rating")
    assert np.array_equal(ones.toarray(), dense_ones)
    assert np.array_equal(ratings.toarray(), dense_rating)
    assert ones.has_sorted_indices and ones.nnz == len(data)
    assert data.csr() is ones  # cached
    subset = data.with_frame(data.frame.head(10))
    assert subset.csr().shape == ones.shape and subset.csr().nnz == 10  # same index, own cache


def test_items_meta_follows_the_item_index():
    meta = pl.DataFrame({"item": [30, 10, 20, 99], "title": ["c", "a", "b", "unrated"]})
    data = Interactions.from_frame(_frame(user=[1, 1, 2], item=[20, 10, 30]), items_meta=meta)
    assert data.items_meta.rows() == [(0, "a"), (1, "b"), (2, "c")]
    with pytest.raises(DataError, match="t: item metadata lists item 30 more than once"):
        Interactions.from_frame(_frame(user=[1], item=[10]), items_meta=pl.concat([meta, meta]), source="t")
