"""ILD@k (recsys_eval.measure.listpass, the distances of recsys_eval.measure.diversity) equals its pairwise definition, the mean Jaccard distance
over every pair of a unit's top k, computed here one pair of Python sets at a time; for genre sets
packed in one word with their size (at most 57 genres) and for wider ones (several words)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from measure_build import rankings_of

from recsys_eval.measure.diversity import PACKED_GENRES
from recsys_eval.measure.listpass import list_pass


def jaccard_distance(a: set, b: set) -> float:
    union = a | b
    return 1.0 - len(a & b) / len(union) if union else 0.0


def ild_values(rankings, cutoffs: list[int], genres: np.ndarray) -> np.ndarray:
    """units x cutoffs: ILD of the one list pass, asked for ILD alone."""
    values = np.full((len(cutoffs), rankings.n_units), -1.0)
    list_pass(rankings, cutoffs, values, {"ild": 0}, genres=genres)
    return values.T


def pairwise_ild(top: list[int], genres: list[set]) -> float:
    pairs = [(i, j) for n, i in enumerate(top) for j in top[n + 1:]]
    return sum(jaccard_distance(genres[i], genres[j]) for i, j in pairs) / len(pairs) if pairs else math.nan


@st.composite
def lists_and_genres(draw):
    n_genres = draw(st.sampled_from([1, 3, 20, PACKED_GENRES, PACKED_GENRES + 1, 130]))
    n_items = draw(st.integers(1, 14))
    genres = [set(draw(st.lists(st.integers(0, n_genres - 1), max_size=min(n_genres, 12), unique=True)))
              for _ in range(n_items)]
    units = draw(st.lists(st.lists(st.integers(0, n_items - 1), max_size=n_items, unique=True), min_size=1,
                          max_size=4))
    cutoffs = sorted(set(draw(st.lists(st.integers(1, 16), min_size=1, max_size=4))))
    return units, genres, n_genres, cutoffs


@settings(max_examples=300, deadline=None)
@given(lists_and_genres())
def test_ild_equals_the_mean_pairwise_jaccard_distance(case):
    units, genres, n_genres, cutoffs = case
    matrix = np.zeros((len(genres), n_genres), dtype=bool)
    for i, gs in enumerate(genres):
        matrix[i, list(gs)] = True
    got = ild_values(rankings_of(units), cutoffs, matrix)
    for u, top in enumerate(units):
        for c, k in enumerate(cutoffs):
            want = pairwise_ild(top[:k], genres)
            assert (math.isnan(got[u, c]) and math.isnan(want)) or abs(got[u, c] - want) <= 1e-12, (u, k)


def test_ild_by_hand():
    # {0,1} vs {1}: 1 - 1/2; {0,1} vs {}: 1; {1} vs {}: 1; two items without genres: 0
    genres = np.array([[True, True], [False, True], [False, False], [False, False]])
    got = ild_values(rankings_of([[0, 1, 2], [2, 3], [0]]), [2, 3], genres)
    assert got[0].tolist() == [0.5, (0.5 + 1 + 1) / 3]
    assert got[1].tolist() == [0.0, 0.0]
    assert np.isnan(got[2]).all()
