"""The kernels' own sort and search against numpy's: same order (stable, NaN last), same positions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.core.sorting import (
    equal_range,
    insertion_sort,
    sort_items,
    stable_argsort,
)

DTYPES = [np.float32, np.float64, np.int32, np.int64]


def keys(dtype) -> st.SearchStrategy[np.ndarray]:
    """Arrays with many ties (few distinct values), and NaN among floats."""
    values = st.integers(-3, 3).map(float)
    if np.dtype(dtype).kind == "f":
        values = values | st.just(float("nan"))
    return st.lists(values, max_size=80).map(lambda v: np.array(v, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_stable_argsort_is_numpys_stable_argsort(dtype, data):
    a = data.draw(keys(dtype))
    assert np.array_equal(stable_argsort(a), np.argsort(a, kind="stable"))


@pytest.mark.parametrize("n", [0, 1, 16, 17, 31, 32, 33, 1000, 4099])
def test_stable_argsort_at_run_and_merge_boundaries(n):
    a = np.random.default_rng(n).integers(0, max(n // 4, 1), n).astype(np.float64)
    a[::7] = np.nan
    assert np.array_equal(stable_argsort(a), np.argsort(a, kind="stable"))


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_equal_range_is_searchsorted_left_and_right(dtype, data):
    ordered = np.sort(data.draw(keys(dtype)))
    probe = data.draw(keys(dtype).filter(len))[0]
    assert equal_range(ordered, probe) == (np.searchsorted(ordered, probe, side="left"),
                                           np.searchsorted(ordered, probe, side="right"))


@given(st.lists(st.integers(0, 2**20 - 1), max_size=300))
@settings(max_examples=100, deadline=None)
def test_sort_items_and_insertion_sort_sort(values):
    a = np.array(values, dtype=np.int64)
    by_radix, by_insertion = a.copy(), a.copy()
    sort_items(by_radix, len(a), 20, np.empty(len(a) + 1, np.int64), np.zeros(257, np.int64))
    insertion_sort(by_insertion, len(a))
    assert np.array_equal(by_radix, np.sort(a)) and np.array_equal(by_insertion, np.sort(a))
