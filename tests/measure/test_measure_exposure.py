"""A run's exposure counts (RunExposure, one numba pass over the lists) equal the appearances of each
item in every unit's top k counted in Python, at every cutoff; added in two chunks of units they
equal the counts of the whole run."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from measure_build import rankings_of

from recsys_eval.measure.beyond import RunExposure

N_ITEMS = 9


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, N_ITEMS - 1), max_size=N_ITEMS, unique=True), min_size=1, max_size=6),
       st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True))
def test_exposure_counts_equal_the_top_k_appearances(lists, cutoffs):
    cutoffs = sorted(cutoffs)
    whole = RunExposure(N_ITEMS, cutoffs, np.ones(N_ITEMS, dtype=bool))
    whole.add(rankings_of(lists))
    want = [[sum(item in top[:k] for top in lists) for item in range(N_ITEMS)] for k in cutoffs]
    assert whole.counts.tolist() == want
    assert whole.ranked.tolist() == [any(item in top for top in lists) for item in range(N_ITEMS)]
    chunked = RunExposure(N_ITEMS, cutoffs, np.ones(N_ITEMS, dtype=bool))
    half = len(lists) // 2
    for part in (lists[:half], lists[half:]):
        if part:
            chunked.add(rankings_of(part))
    assert np.array_equal(chunked.counts, whole.counts) and np.array_equal(chunked.ranked, whole.ranked)
