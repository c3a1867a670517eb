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
