import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

from recsys_eval.compare import fold_paired_tests, paired_tests
from recsys_eval.errors import ConfigError, DataError

from .conftest import user_frame

# Mooney, "Experimental Evaluation": accuracies of systems A and B on five trials.
EXPERIMENT_1 = ([87, 83, 88, 82, 85], [82, 78, 83, 77, 80])  # every difference +5
EXPERIMENT_2 = ([90, 93, 80, 85, 77], [82, 76, 85, 75, 82])  # differences 8, 17, -5, 10, -5


def one(result: pl.DataFrame, test: str) -> dict:
    return result.filter(pl.col("test") == test).row(0, named=True)


def test_paired_t_on_the_lecture_trials_worked_by_hand():
    a, b = EXPERIMENT_2
    result = paired_tests(user_frame({"A": a, "B": b}), baseline="B", tests=("t",))
    row = one(result, "t")
    # mean 5, sum of squared deviations 378: t = 5 / sqrt(378 / (5 * 4)) = 1.1501, df 4
    assert row["statistic"] == pytest.approx(5 / math.sqrt(378 / 20))
    assert row["p_value"] == pytest.approx(stats.ttest_rel(a, b).pvalue)
    assert row["p_value"] == pytest.approx(0.3142, abs=1e-4)
    assert row["mean_diff"] == 5
    assert row["cohens_d"] == pytest.approx(5 / math.sqrt(378 / 4))
    half = stats.t.ppf(0.975, 4) * math.sqrt(378 / 20)
    assert (row["diff_lower"], row["diff_upper"]) == pytest.approx((5 - half, 5 + half))


def test_constant_differences_are_infinitely_significant_for_t_but_not_for_five_permutations():
    a, b = EXPERIMENT_1
    result = paired_tests(user_frame({"A": a, "B": b}), baseline="B", tests=("t", "permutation", "sign"))
    assert one(result, "t")["statistic"] == math.inf and one(result, "t")["p_value"] == 0.0
    # Exact randomization: of 2^5 sign patterns only all-plus and all-minus reach |mean| 5.
    assert one(result, "permutation")["p_value"] == pytest.approx(2 / 32)
    assert one(result, "sign")["p_value"] == pytest.approx(2 / 32)


def test_exact_permutation_on_the_lecture_trials_worked_by_hand():
    a, b = EXPERIMENT_2
    row = one(paired_tests(user_frame({"A": a, "B": b}), baseline="B", tests=("permutation",)), "permutation")
    # |sum| >= 25 iff the flipped magnitudes sum to <= 10 or >= 35: 6 + 6 of the 32 subsets of {8,17,5,10,5}.
    assert row["p_value"] == pytest.approx(12 / 32)
    ref = stats.permutation_test(
        (np.array(a, float), np.array(b, float)), lambda x, y: np.mean(x - y), permutation_type="samples"
    )
    assert row["p_value"] == pytest.approx(ref.pvalue)
    assert row["statistic"] == pytest.approx(ref.statistic)


def test_tests_match_scipy_over_the_users_both_systems_have(rng):
    a, b, c = rng.random(80), rng.random(80) + 0.1, rng.random(80)
    a[:5] = np.nan  # users undefined for a: dropped from a's pairs only
    result = paired_tests(user_frame({"a": a, "b": b, "c": c}), baseline="b", tests=("t", "wilcoxon", "sign"),
                          alternative="less")
    keep = ~np.isnan(a)
    d = a[keep] - b[keep]
    row_t = result.filter((pl.col("system") == "a") & (pl.col("test") == "t")).row(0, named=True)
    ref = stats.ttest_rel(a[keep], b[keep], alternative="less")
    assert (row_t["statistic"], row_t["p_value"]) == pytest.approx((ref.statistic, ref.pvalue))
    assert (row_t["n"], row_t["n_dropped"]) == (75, 5)
    row_w = result.filter((pl.col("system") == "a") & (pl.col("test") == "wilcoxon")).row(0, named=True)
    ref_w = stats.wilcoxon(a[keep], b[keep], alternative="less")
    assert (row_w["statistic"], row_w["p_value"]) == pytest.approx((ref_w.statistic, ref_w.pvalue))
    row_s = result.filter((pl.col("system") == "a") & (pl.col("test") == "sign")).row(0, named=True)
    assert row_s["p_value"] == pytest.approx(stats.binomtest(int((d > 0).sum()), d.size, alternative="less").pvalue)
    assert result.filter(pl.col("system") == "c")["n"].to_list() == [80, 80, 80]


def test_random_permutation_test_agrees_with_scipy(rng):
    a = rng.normal(size=120)
    b = a + rng.normal(0.15, 1.0, size=120)
    row = one(paired_tests(user_frame({"a": a, "b": b}), baseline="b", tests=("permutation",), n_resamples=20000), "permutation")
    ref = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x - y, axis=axis), vectorized=True,
                                 permutation_type="samples", n_resamples=20000, rng=1)
    assert row["p_value"] == pytest.approx(ref.pvalue, abs=0.01)


def test_permutation_p_is_exactly_one_for_identical_systems(rng):
    values = rng.random(500)
    result = paired_tests(user_frame({"a": values, "b": values}), tests=("permutation", "t", "wilcoxon", "sign"))
    assert result["p_value"].to_list() == [1.0, 1.0, 1.0, 1.0]


def test_permutation_p_is_uniform_over_seeds_for_exchangeable_noise():
    rng = np.random.default_rng(2024)
    folds = [
        user_frame({"a": x, "b": x + rng.normal(size=30)}, fold=str(f))
        for f, x in enumerate(rng.random((300, 30)))
    ]
    result = paired_tests(pl.concat(folds), tests=("permutation",), n_resamples=199, correction="none", seed=5)
    p = result["p_value"].to_numpy()
    assert p.size == 300
    assert stats.kstest(p, "uniform").pvalue > 0.001
    assert 0.02 <= np.mean(p <= 0.05) <= 0.09


def test_mcnemar_on_binary_hits_worked_by_hand():
    # 7 users only the system hits, 1 only the baseline hits, 12 concordant.
    system = [1] * 7 + [0] * 1 + [1] * 6 + [0] * 6
    baseline = [0] * 7 + [1] * 1 + [1] * 6 + [0] * 6
    frame = user_frame({"s": system, "base": baseline}, metric="hit")
    exact = one(paired_tests(frame, baseline="base", tests=("mcnemar",)), "mcnemar")
    assert exact["p_value"] == pytest.approx(2 * (1 + 8) / 256)  # Binomial(8, 1/2): P(X <= 1) + P(X >= 7)
    assert exact["statistic"] == 1
    chi2 = one(paired_tests(frame, baseline="base", tests=("mcnemar",), mcnemar="chi2"), "mcnemar")
    assert chi2["statistic"] == pytest.approx(25 / 8)
    assert chi2["p_value"] == pytest.approx(stats.chi2.sf(25 / 8, 1))
    graded = user_frame({"s": [0.5, 1.0], "base": [0.0, 1.0]})
    assert paired_tests(graded, baseline="base", tests=("mcnemar",)).is_empty()


def test_holm_adjusts_within_each_family_of_pairs(rng):
    base = rng.random(60)
    frame = user_frame({"base": base, "x": base + 0.3 + rng.normal(0, 0.2, 60), "y": base + rng.normal(0, 0.2, 60)})
    result = paired_tests(frame, baseline="base", tests=("t",))
    p = result["p_value"].to_numpy()
    order = np.argsort(p)
    expected = np.empty(2)
    expected[order[0]] = min(1, 2 * p[order[0]])
    expected[order[1]] = min(1, max(2 * p[order[0]], p[order[1]]))
    assert result["p_adjusted"].to_numpy() == pytest.approx(expected)
    assert result["significant"].to_list() == list(expected < 0.05)


def test_all_pairs_without_a_baseline(rng):
    frame = user_frame({s: rng.random(20) for s in "abc"})
    result = paired_tests(frame, tests=("t",))
    assert result.select("system", "baseline").rows() == [("a", "b"), ("a", "c"), ("b", "c")]


def test_fold_paired_t_over_fold_means_is_the_lecture_t():
    a, b = EXPERIMENT_2
    frames = []
    for fold, (x, y) in enumerate(zip(a, b, strict=True)):
        # each fold holds three users whose mean is the trial's accuracy
        frames.append(user_frame({"A": [x - 1, x, x + 1], "B": [y, y, y]}, fold=str(fold)))
    row = fold_paired_tests(pl.concat(frames), baseline="B").row(0, named=True)
    assert row["test"] == "t_folds" and row["n"] == 5
    assert row["statistic"] == pytest.approx(stats.ttest_rel(a, b).statistic)
    assert row["p_value"] == pytest.approx(stats.ttest_rel(a, b).pvalue)
    with pytest.raises(ConfigError, match="at least two folds"):
        fold_paired_tests(frames[0])


def test_bad_input_is_named(rng):
    frame = user_frame({"a": rng.random(5), "b": rng.random(5)})
    with pytest.raises(ConfigError, match="baseline 'popularty' is not a system.*did you mean 'popularity'"):
        paired_tests(user_frame({"popularity": [1.0], "knn": [0.0]}), baseline="popularty")
    with pytest.raises(ConfigError, match="unknown test 'wilcoxn'.*did you mean 'wilcoxon'"):
        paired_tests(frame, tests=("wilcoxn",))
    with pytest.raises(ConfigError, match="unknown correction 'holms'.*did you mean 'holm'"):
        paired_tests(frame, correction="holms")
    with pytest.raises(ConfigError, match="at least two systems"):
        paired_tests(user_frame({"a": [1.0]}))
    disjoint = pl.concat([user_frame({"a": [1.0, 0.0]}), user_frame({"b": [1.0, 0.0]}).with_columns(user=pl.col("user") + 10)])
    with pytest.raises(DataError, match="no user was measured for both 'b' and 'a'"):
        paired_tests(disjoint, baseline="a")


@pytest.mark.parametrize("n", [30, 120])
def test_wilcoxon_of_many_systems_equals_scipy_one_system_at_a_time(n):
    """Columns on the same users go to scipy together past 50 users: each still gets its own zeros
    dropped, ties corrected and (below 51 users) scipy's own choice of distribution."""
    rng = np.random.default_rng(n)
    base = np.round(rng.random(n), 1)  # ties, and zero differences where a system equals it
    systems = {"base": base, "same": base.copy(), "tied": np.round(base + rng.normal(0.05, 0.1, n), 1),
               "far": base + rng.random(n)}
    result = paired_tests(user_frame(systems), baseline="base", tests=("wilcoxon",), alternative="greater")
    for system in ("tied", "far"):
        row = result.filter(pl.col("system") == system).row(0, named=True)
        ref = stats.wilcoxon(systems[system], base, alternative="greater")
        assert (row["statistic"], row["p_value"]) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-12)
    same = result.filter(pl.col("system") == "same").row(0, named=True)
    assert (same["statistic"], same["p_value"]) == (0.0, 1.0)
