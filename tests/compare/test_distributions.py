"""Per-user distributions (docs/CONVENTIONS.md#distributions) against independent computations:
numpy's quantiles, the Gini as the mean absolute difference over twice the mean (every pair of
users), and the Lorenz polygon's area (G = 1 - 2 * area under L)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.compare import distribution_curves, distribution_summary, lorenz
from recsys_eval.compare.distributions import QUANTILES, CurveMeans, SortedValues, with_fold_means

from .conftest import user_frame


def gini_by_pairs(x: np.ndarray) -> float:
    """Gini's mean difference over twice the mean: sum_i sum_j |x_i - x_j| / (2 n^2 mean)."""
    return float(np.abs(x[:, None] - x[None, :]).sum() / (2 * x.size**2 * x.mean()))


def _values(rng, n):
    return np.where(rng.random(n) < 0.3, 0.0, rng.beta(2, 5, n))


def test_quantiles_zero_share_and_gini_equal_the_references(rng):
    a, b = _values(rng, 200), _values(rng, 200)
    b[:10] = np.nan  # undefined for 10 users: left out
    rows = {r["system"]: r for r in distribution_summary(user_frame({"A": a, "B": b})).iter_rows(named=True)}
    for system, values in (("A", a), ("B", b[10:])):
        row = rows[system]
        assert row["n"] == values.size and row["mean"] == pytest.approx(values.mean())
        for q in QUANTILES:
            assert row[f"q{round(100 * q)}"] == pytest.approx(np.quantile(values, q))
        assert row["share_zero"] == pytest.approx(np.mean(values == 0))
        assert row["gini"] == pytest.approx(gini_by_pairs(values))


def test_the_gini_of_equal_values_is_zero_and_of_one_winner_is_n_minus_one_over_n():
    rows = distribution_summary(user_frame({"A": [0.3] * 8, "B": [0, 0, 0, 1.0], "Z": [0.0] * 4, "N": [-1.0, 1.0]}))
    gini = dict(zip(rows["system"], rows["gini"], strict=True))
    assert gini["A"] == pytest.approx(0) and gini["B"] == pytest.approx(3 / 4)
    assert np.isnan(gini["Z"]) and np.isnan(gini["N"])


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.floats(0, 1), min_size=2, max_size=60).filter(lambda v: sum(v) > 1e-6),
       scale=st.floats(0.1, 10))
def test_gini_properties_and_the_lorenz_area(values, scale):
    x = np.asarray(values)
    gini = distribution_summary(user_frame({"A": x})).item(0, "gini")
    assert gini == pytest.approx(gini_by_pairs(x), abs=1e-9)
    assert -1e-12 <= gini <= (x.size - 1) / x.size + 1e-12
    assert distribution_summary(user_frame({"A": x * scale})).item(0, "gini") == pytest.approx(gini, abs=1e-9)
    exact = np.arange(x.size + 1) / x.size
    curve = lorenz(np.sort(x), exact)
    assert curve[0] == 0 and curve[-1] == pytest.approx(1)
    area = np.sum((curve[1:] + curve[:-1]) / 2) / x.size
    assert 1 - 2 * area == pytest.approx(gini, abs=1e-9)


def lorenz_by_interp(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The Lorenz polygon through (i/n, S_i / S_n), read on ``grid`` by np.interp."""
    x = np.sort(x)
    return np.interp(grid, np.arange(x.size + 1) / x.size, np.concatenate([[0.0], np.cumsum(x)]) / x.sum())


@pytest.mark.parametrize("n", [1, 2, 3, 7, 101, 1000])
def test_curves_are_the_quantile_function_and_the_lorenz_curve(rng, n):
    a = _values(rng, n)
    a[0] = 0.5  # a positive sum at every n
    grid = np.linspace(0, 1, 101)
    curves = distribution_curves(user_frame({"A": a}))
    assert curves.height == 101 and curves["p"].to_list() == grid.tolist()
    np.testing.assert_array_equal(curves["quantile"], np.quantile(a, grid))  # numpy's rule, the same bits
    np.testing.assert_allclose(curves["lorenz"], lorenz_by_interp(a, grid), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(lorenz(np.sort(a), grid), lorenz_by_interp(a, grid), rtol=1e-12, atol=1e-15)
    assert (curves["lorenz"].diff().drop_nulls() >= -1e-12).all()
    assert (curves["lorenz"] <= curves["p"] + 1e-12).all()  # never above equality


def test_groups_of_every_size_are_read_from_one_sort_like_each_on_its_own(rng):
    """Many groups of one frame (sizes 1 to 60, NaN users left out) give each group's own
    statistics: the flat index arithmetic never reads a neighbour's values."""
    values = {f"s{i}": np.where(rng.random(n) < 0.2, np.nan, _values(rng, n)) for i, n in enumerate(range(1, 61))}
    values = {s: v for s, v in values.items() if (~np.isnan(v)).any()}
    rows = {r["system"]: r for r in distribution_summary(user_frame(values)).iter_rows(named=True)}
    curves = distribution_curves(user_frame(values))
    for system, v in values.items():
        x = v[~np.isnan(v)]
        row = rows[system]
        assert row["n"] == x.size and row["mean"] == pytest.approx(x.mean())
        assert [row[f"q{round(100 * q)}"] for q in QUANTILES] == pytest.approx(np.quantile(x, QUANTILES))
        assert row["share_zero"] == pytest.approx(np.mean(x == 0))
        if x.sum() > 0:
            assert row["gini"] == pytest.approx(gini_by_pairs(x), abs=1e-12)
            own = curves.filter(pl.col("system") == system)
            np.testing.assert_allclose(own["lorenz"], lorenz_by_interp(x, own["p"].to_numpy()), atol=1e-12)
        else:
            assert np.isnan(row["gini"])


def test_the_curves_over_folds_are_the_point_by_point_means_of_each_folds_curves(rng):
    """CurveMeans, fed part by part as the analysis does, against np.quantile and the Lorenz
    polygon of each fold averaged by hand; a group missing from a fold averages the folds it has."""
    grid = np.linspace(0, 1, 101)
    one, two = {"A": _values(rng, 40), "B": _values(rng, 30)}, {"A": _values(rng, 55)}
    means = CurveMeans(["1", "2"])
    for fold, values in (("1", one), ("2", two)):
        means.add(SortedValues.of(user_frame(values, fold=fold)))
    table = means.table()
    assert set(table["fold"]) == {"all"} and table.height == 2 * grid.size
    a = table.filter(pl.col("system") == "A")
    np.testing.assert_allclose(a["quantile"], (np.quantile(one["A"], grid) + np.quantile(two["A"], grid)) / 2)
    np.testing.assert_allclose(a["lorenz"], (lorenz_by_interp(one["A"], grid) + lorenz_by_interp(two["A"], grid)) / 2,
                               atol=1e-12)
    np.testing.assert_allclose(table.filter(pl.col("system") == "B")["quantile"], np.quantile(one["B"], grid))
    single = CurveMeans(["0"])
    single.add(SortedValues.of(user_frame(one, fold="0")))
    assert set(single.table()["fold"]) == {"0"}


def test_fold_all_is_the_mean_of_the_fold_statistics(rng):
    one, two = user_frame({"A": _values(rng, 50)}, fold="1"), user_frame({"A": _values(rng, 70)}, fold="2")
    rows = with_fold_means(distribution_summary(pl.concat([one, two])))
    by_fold = {r["fold"]: r for r in rows.iter_rows(named=True)}
    assert by_fold["all"]["n"] == 120
    for column in ("mean", "q50", "share_zero", "gini"):
        assert by_fold["all"][column] == pytest.approx((by_fold["1"][column] + by_fold["2"][column]) / 2)
