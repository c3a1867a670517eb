"""The executor side without Spark: chunks of whole users, and a chunk measured as the local
engine measures the same users."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.engine.partitions import user_chunks


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=0, max_size=30), st.integers(1, 8), st.integers(1, 12))
def test_chunks_hold_whole_users_in_order(group_sizes, batch_rows, chunk_rows):
    unit = np.repeat(np.arange(len(group_sizes)), group_sizes)
    frame = pl.DataFrame({"unit": unit, "row": np.arange(len(unit))})
    batches = [frame.slice(i, batch_rows).to_arrow() for i in range(0, frame.height, batch_rows)]
    chunks = list(user_chunks(batches, rows=chunk_rows))
    assert pl.concat(chunks).equals(frame) if chunks else frame.height == 0
    seen = set()
    for chunk in chunks:
        users = set(chunk.get_column("unit").to_list())
        assert not users & seen  # a user is never split over two chunks
        seen |= users
        if chunk.get_column("unit").n_unique() > 1:
            assert chunk.height < chunk_rows + max(group_sizes) + batch_rows


def test_empty_batches_yield_nothing():
    assert list(user_chunks([pl.DataFrame({"unit": []}, schema={"unit": pl.Int64}).to_arrow()])) == []
    with pytest.raises(StopIteration):
        next(user_chunks([]))


def test_a_chunk_of_integer_like_text_ids_keeps_the_text_order_of_the_whole_input():
    """The whole input has text ids (user "x", item "y"), this chunk's ids all look like integers: ties
    are broken by the text order of the items ("10" before "9"), as the local engine breaks them."""
    from recsys_eval.data.runs import load_run
    from recsys_eval.engine.partitions import RUN, TEST, RunMeasure, measure_run_chunk
    from recsys_eval.pipeline.options import MeasureOptions
    from recsys_eval.measure import measure

    test = pl.DataFrame({"user": ["1", "x"], "item": ["9", "y"]})
    run = pl.DataFrame({"user": ["1", "1", "x"], "item": ["9", "10", "y"], "score": [1.0, 1.0, 1.0]})
    local = load_run(test, run)
    expected = measure(local.rankings, local.targets, metrics=["precision", "rr"], k=[1], user_ids=local.user_ids)
    assert local.item_ids.dtype == pl.String
    chunk = pl.DataFrame({  # user "1" alone, as its partition holds it; unit 0 of the sorted TEST users
        "user": ["1", "1", "1"], "unit": [0, 0, 0], "kind": [TEST, RUN, RUN], "item": ["9", "9", "10"],
        "rating": [None, None, None], "score": [None, 1.0, 1.0], "rank": [None, None, None],
    }, schema_overrides={"kind": pl.Int8, "rating": pl.Float64, "rank": pl.Float64})
    spec = RunMeasure(n_items=3, options=MeasureOptions(("precision", "rr"), (), (1,)), system="system",
                      test_name="TEST", run_name="RUN", train_name=None, run_values=("score",), test_rating=False,
                      train_rating=False, text_ids=(True, True), threshold=None)
    got = measure_run_chunk(chunk, spec).frame
    want = expected.filter(pl.col("user") == "1")
    assert got.get_column("value").to_list() == want.get_column("value").to_list() == [0.0, 0.0]  # "9" ranked second
    assert got.get_column("user").to_list() == ["1", "1"]
