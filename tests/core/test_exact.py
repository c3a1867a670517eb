"""Exact sums against Python's exact rationals, and their independence of order and chunking."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.core.exact import SQUARE_SCALE, VALUE_SCALE, group_sums, mean_and_sd, ratio

finite = st.floats(allow_nan=False, allow_infinity=False)
values_and_nans = st.lists(st.one_of(finite, st.just(math.nan)), max_size=40)


def _exact(values) -> tuple[Fraction, Fraction]:
    defined = [Fraction(v) for v in values if not math.isnan(v)]
    return sum(defined, Fraction(0)), sum((v * v for v in defined), Fraction(0))


@settings(max_examples=300, deadline=None)
@given(st.lists(values_and_nans, min_size=1, max_size=5))
def test_sums_and_squares_are_exact(groups):
    values = np.array([v for g in groups for v in g], dtype=np.float64)
    starts = np.cumsum([0, *[len(g) for g in groups[:-1]]])
    totals, squares = group_sums(values, starts, squares=True)
    for group, total, square in zip(groups, totals, squares, strict=True):
        expected, expected_squares = _exact(group)
        assert Fraction(total, 1 << VALUE_SCALE) == expected
        assert Fraction(square, 1 << SQUARE_SCALE) == expected_squares


@settings(max_examples=100, deadline=None)
@given(st.lists(finite, min_size=1, max_size=60), st.randoms(use_true_random=False))
def test_order_and_chunking_change_no_bit(values, random):
    shuffled = list(values)
    random.shuffle(shuffled)
    cut = random.randrange(len(values) + 1)
    whole = group_sums(np.array(values), np.array([0]), squares=True)
    first = group_sums(np.array(shuffled[:cut]), np.array([0]), squares=True)
    second = group_sums(np.array(shuffled[cut:]), np.array([0]), squares=True)
    assert whole[0][0] == first[0][0] + second[0][0]
    assert whole[1][0] == first[1][0] + second[1][0]


def test_mean_is_the_correctly_rounded_mean():
    values = [0.1] * 10 + [1e16, -1e16]  # a float sum in this order loses every 0.1
    (total,), (square,) = group_sums(np.array(values), np.array([0]), squares=True)
    mean, sd = mean_and_sd(len(values), total, square)
    exact_mean = sum(map(Fraction, values)) / len(values)
    variance = sum((Fraction(v) - exact_mean) ** 2 for v in values) / (len(values) - 1)
    assert mean == float(exact_mean)
    assert sd == math.sqrt(float(variance))


def test_edge_values():
    tiny, huge = 5e-324, 1.7976931348623157e308
    (total,), (square,) = group_sums(np.array([tiny, -tiny, tiny, huge, -0.0]), np.array([0]), squares=True)
    assert Fraction(total, 1 << VALUE_SCALE) == Fraction(tiny) + Fraction(huge)
    assert Fraction(square, 1 << SQUARE_SCALE) == 3 * Fraction(tiny) ** 2 + Fraction(huge) ** 2
    assert math.isnan(mean_and_sd(1, total, square)[1])  # no standard deviation below two values
    assert math.isnan(ratio(0, VALUE_SCALE, 0))


def test_infinite_values_are_refused():
    with pytest.raises(ValueError, match="infinite"):
        group_sums(np.array([1.0, math.inf]), np.array([0]))
