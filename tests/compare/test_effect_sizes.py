"""Effect sizes of the paired comparisons (docs/CONVENTIONS.md#effect-sizes) against scipy: the mean
difference's t-interval (``ttest_rel(...).confidence_interval``), d_z = t / sqrt(n), and the relative
difference's paired percentile bootstrap (``scipy.stats.bootstrap(paired=True)``)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from recsys_eval.compare import paired_tests

from .conftest import user_frame


def _pair(rng, n: int) -> tuple[np.ndarray, np.ndarray]:
    base = np.where(rng.random(n) < 0.3, 0.0, rng.beta(2, 5, n))
    return np.clip(base + rng.normal(0.03, 0.1, n), 0, 1), base


def test_mean_difference_interval_and_dz_equal_scipy(rng):
    a, b = _pair(rng, 300)
    row = paired_tests(user_frame({"A": a, "B": b}), baseline="B", tests=("t",), level=0.9).row(0, named=True)
    t = stats.ttest_rel(a, b)
    interval = t.confidence_interval(confidence_level=0.9)
    assert (row["diff_lower"], row["diff_upper"]) == pytest.approx((interval.low, interval.high))
    assert row["cohens_d"] == pytest.approx(t.statistic / math.sqrt(300))
    d = a - b
    assert row["cohens_d"] == pytest.approx(d.mean() / d.std(ddof=1))


def test_relative_difference_and_its_bootstrap_interval_match_scipy(rng):
    a, b = _pair(rng, 400)
    row = paired_tests(user_frame({"A": a, "B": b}), baseline="B", tests=("t",), n_resamples=20_000,
                       seed=3).row(0, named=True)
    assert row["relative_diff"] == pytest.approx(a.mean() / b.mean() - 1)
    ref = stats.bootstrap((a, b), lambda x, y, axis=-1: x.mean(axis=axis) / y.mean(axis=axis) - 1, paired=True,
                          vectorized=True, n_resamples=20_000, method="percentile", random_state=7)
    width = ref.confidence_interval.high - ref.confidence_interval.low
    # two independent Monte Carlo estimates of the same quantiles: they agree to a few % of the width
    assert row["relative_lower"] == pytest.approx(ref.confidence_interval.low, abs=0.04 * width)
    assert row["relative_upper"] == pytest.approx(ref.confidence_interval.high, abs=0.04 * width)


def test_relative_difference_skips_undefined_users_and_a_zero_baseline(rng):
    a, b = _pair(rng, 50)
    a[:5] = np.nan
    rows = paired_tests(user_frame({"A": a, "B": b, "Z": np.zeros(50)}), baseline="B", tests=("t",))
    first = rows.filter(pl.col("system") == "A").row(0, named=True)
    assert first["relative_diff"] == pytest.approx(a[5:].mean() / b[5:].mean() - 1)
    assert rows.filter(pl.col("system") == "Z").row(0, named=True)["relative_diff"] == -1.0
    against_zero = paired_tests(user_frame({"A": a, "Z": np.zeros(50)}), baseline="Z", tests=("t",)).row(0, named=True)
    assert math.isnan(against_zero["relative_diff"])
    assert math.isnan(against_zero["relative_lower"]) and math.isnan(against_zero["relative_upper"])


def test_the_effect_sizes_leave_the_permutation_draws_alone(rng):
    a, b = _pair(rng, 60)
    frame = user_frame({"A": a, "B": b})
    alone = paired_tests(frame, baseline="B", tests=("permutation",), n_resamples=500, seed=9)
    with_t = paired_tests(frame, baseline="B", tests=("permutation", "t"), n_resamples=500, seed=9)
    assert alone["p_value"][0] == with_t.filter(pl.col("test") == "permutation")["p_value"][0]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(5, 80), shift=st.floats(-0.2, 0.2))
def test_the_interval_holds_the_estimate_and_swapping_inverts_the_ratio(seed, n, shift):
    rng = np.random.default_rng(seed)
    b = rng.uniform(0.1, 1.0, n)
    a = np.clip(b + shift + rng.normal(0, 0.05, n), 0.01, 1.0)
    row = paired_tests(user_frame({"A": a, "B": b}), baseline="B", tests=("t",), n_resamples=200).row(0, named=True)
    assert row["relative_lower"] - 1e-12 <= row["relative_diff"] <= row["relative_upper"] + 1e-12
    back = paired_tests(user_frame({"A": a, "B": b}), baseline="A", tests=("t",), n_resamples=200).row(0, named=True)
    assert (1 + row["relative_diff"]) * (1 + back["relative_diff"]) == pytest.approx(1.0)
    assert np.sign(row["relative_diff"]) == np.sign(row["mean_diff"])


def test_the_fold_level_relative_difference_is_the_users_definition_over_fold_means(rng):
    """fold_paired_tests' relative difference and interval against a slow bootstrap written out:
    the folds are the units, resampled with the draws its generator makes."""
    from recsys_eval.compare import fold_paired_tests
    from recsys_eval.core.rng import derive_seed

    folds = [(rng.uniform(0.2, 0.4, 30), rng.uniform(0.1, 0.3, 30)) for _ in range(6)]
    frame = pl.concat([user_frame({"A": a, "B": b}, fold=str(f)) for f, (a, b) in enumerate(folds)])
    row = fold_paired_tests(frame, baseline="B", n_resamples=400, seed=5, level=0.9).row(0, named=True)
    a = np.array([x.mean() for x, _ in folds])
    b = np.array([y.mean() for _, y in folds])
    assert row["relative_diff"] == pytest.approx(a.mean() / b.mean() - 1)
    seed = derive_seed(5, "relative difference", "AI+AR+AN", "all")
    draws = np.random.default_rng(seed).integers(0, 6, (400, 6), dtype=np.int32)
    ratios = [a[d].mean() / b[d].mean() - 1 for d in draws]
    assert (row["relative_lower"], row["relative_upper"]) == pytest.approx(tuple(np.quantile(ratios, [0.05, 0.95])))
    assert row["relative_lower"] <= row["relative_diff"] <= row["relative_upper"]
