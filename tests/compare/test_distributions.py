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
from recsys_eval.compare.distributions import QUANTILES, with_fold_means

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


def test_curves_are_the_quantile_function_and_the_lorenz_curve(rng):
    a = _values(rng, 101)
    curves = distribution_curves(user_frame({"A": a}))
    assert curves.height == 101
    np.testing.assert_allclose(curves["quantile"], np.quantile(a, np.linspace(0, 1, 101)))
    np.testing.assert_allclose(curves["lorenz"], lorenz(np.sort(a)))
    assert (curves["lorenz"].diff().drop_nulls() >= -1e-12).all()
    assert (curves["lorenz"] <= curves["p"] + 1e-12).all()  # never above equality


def test_fold_all_is_the_mean_of_the_fold_statistics(rng):
    one, two = user_frame({"A": _values(rng, 50)}, fold="1"), user_frame({"A": _values(rng, 70)}, fold="2")
    rows = with_fold_means(distribution_summary(pl.concat([one, two])))
    by_fold = {r["fold"]: r for r in rows.iter_rows(named=True)}
    assert by_fold["all"]["n"] == 120
    for column in ("mean", "q50", "share_zero", "gini"):
        assert by_fold["all"][column] == pytest.approx((by_fold["1"][column] + by_fold["2"][column]) / 2)
