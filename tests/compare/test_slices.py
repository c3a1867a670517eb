"""Per-slice means and tests equal the per-user means and paired tests filtered by hand."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from scipy import stats

from recsys_eval.compare import paired_tests, slice_means, slice_tests
from recsys_eval.compare.slices import slice_fold_means, slice_test_options

from .conftest import user_frame


def _slices(n: int, fold: str = "0") -> pl.DataFrame:
    users = np.arange(n)
    return pl.DataFrame({"fold": fold, "user": users, "slice": "cold:5",
                         "group": np.where(users % 3 == 0, "cold", "warm"),
                         "order": pl.Series(np.where(users % 3 == 0, 0, 1), dtype=pl.Int32)})


def test_slice_means_equal_the_per_user_means_filtered_by_hand(rng):
    a, b = rng.random(60), rng.random(60)
    a[4] = np.nan
    frame = user_frame({"A": a, "B": b})
    means = slice_means(frame, _slices(60))
    for system, values in (("A", a), ("B", b)):
        for group, mask in (("cold", np.arange(60) % 3 == 0), ("warm", np.arange(60) % 3 != 0)):
            row = means.filter((pl.col("system") == system) & (pl.col("group") == group)).row(0, named=True)
            chosen = values[mask][~np.isnan(values[mask])]
            assert row["n"] == chosen.size and row["mean"] == pytest.approx(chosen.mean())
            half = stats.t.ppf(0.975, chosen.size - 1) * chosen.std(ddof=1) / np.sqrt(chosen.size)
            assert (row["lower"], row["upper"]) == pytest.approx((chosen.mean() - half, chosen.mean() + half))


def test_slice_tests_equal_the_paired_tests_on_the_groups_users(rng):
    a, b = rng.random(60), rng.random(60)
    frame = user_frame({"A": a, "B": b})
    tests = slice_tests(frame, _slices(60), baseline="B", tests=["t", "wilcoxon"])
    warm = frame.filter(pl.col("user") % 3 != 0)
    expected = paired_tests(warm, baseline="B", tests=["t", "wilcoxon"])
    assert_frame_equal(tests.filter(pl.col("group") == "warm").drop("slice", "group", "order"), expected)
    row = tests.filter((pl.col("group") == "cold") & (pl.col("test") == "t")).row(0, named=True)
    mask = np.arange(60) % 3 == 0
    assert row["p_value"] == pytest.approx(stats.ttest_rel(a[mask], b[mask]).pvalue)


def test_fold_all_is_the_mean_of_the_fold_means(rng):
    one = slice_means(user_frame({"A": rng.random(30)}, fold="1"), _slices(30, "1"))
    two = slice_means(user_frame({"A": rng.random(30)}, fold="2"), _slices(30, "2"))
    rows = slice_fold_means(pl.concat([one, two]))
    cold = rows.filter(pl.col("group") == "cold")
    by_fold = dict(zip(cold["fold"], cold["mean"], strict=True))
    assert by_fold["all"] == pytest.approx((by_fold["1"] + by_fold["2"]) / 2)
    assert cold.filter(pl.col("fold") == "all")["lower"][0] is None


def test_slice_tests_equal_paired_tests_on_each_groups_rows_with_gaps_and_two_protocols(rng):
    """Two slices over two protocols, a system undefined for some users and absent for others:
    every group's rows equal paired_tests of the per-user rows of its users, filtered by hand."""
    n = 90
    frames = []
    for protocol in ("AI+AR+AN", "AI+1R+NN100"):
        values = {"A": rng.random(n), "B": rng.random(n), "C": rng.random(n)}
        values["A"][:7] = np.nan
        frame = user_frame(values, protocol=protocol)
        frames.append(frame.filter(~((pl.col("system") == "C") & (pl.col("user") > 80))))
    frame = pl.concat(frames)
    users = np.arange(n)
    slices = pl.concat([_slices(n), pl.DataFrame({
        "fold": "0", "user": users, "slice": "activity:3", "group": [f"Q{u % 3 + 1}" for u in users],
        "order": pl.Series(users % 3, dtype=pl.Int32)})])
    options = dict(baseline="B", tests=["t", "wilcoxon", "permutation"], n_resamples=300, seed=4)
    tests = slice_tests(frame, slices, **options)
    assert tests.select("slice", "group").unique(maintain_order=True).rows() == [
        ("cold:5", "cold"), ("cold:5", "warm"), ("activity:3", "Q1"), ("activity:3", "Q2"), ("activity:3", "Q3")]
    for (name, group), members in slices.group_by("slice", "group"):
        expected = paired_tests(frame.filter(pl.col("user").is_in(members["user"].implode())), **options)
        got = tests.filter((pl.col("slice") == name) & (pl.col("group") == group)).drop("slice", "group", "order")
        assert_frame_equal(got, expected, check_exact=False, rel_tol=1e-12)


def test_the_slice_groups_get_one_test_and_no_resampled_interval(rng):
    """The analysis tests each group with Wilcoxon's signed-rank test when the run has it (else the
    run's first test), and gives the relative difference without its bootstrap interval: the rows
    equal paired_tests of that test on the group's users, but for the interval's bounds."""
    run = dict(baseline="B", tests=["t", "wilcoxon", "permutation"], n_resamples=200, seed=3)
    assert slice_test_options(run)["tests"] == ["wilcoxon"]
    assert slice_test_options({**run, "tests": ["permutation", "t"]})["tests"] == ["permutation"]
    a, b = rng.random(60), rng.random(60)
    frame = user_frame({"A": a, "B": b})
    tests = slice_tests(frame, _slices(60), **slice_test_options(run))
    warm = tests.filter(pl.col("group") == "warm").drop("slice", "group", "order")
    expected = paired_tests(frame.filter(pl.col("user") % 3 != 0), **{**run, "tests": ["wilcoxon"]})
    bounds = ["relative_lower", "relative_upper"]
    assert_frame_equal(warm.drop(bounds), expected.drop(bounds))
    assert warm.select(pl.col(bounds).is_nan().all()).row(0) == (True, True)
    assert expected.select(pl.col(bounds).is_nan().any()).row(0) == (False, False)


def _two_protocol_frame(rng, n: int) -> pl.DataFrame:
    """Three systems, two metrics (one without a cutoff), two protocols; a system undefined for
    some users, and absent for every third user (all of the cold group and of Q1)."""
    frames = []
    for protocol in ("AI+AR+AN", "AI+1R+NN100"):
        for metric, k in (("ndcg", 10), ("ndcg", 20), ("auc", None)):
            values = {"A": rng.random(n), "B": rng.random(n), "C": np.round(rng.random(n), 1)}
            values["A"][:7] = np.nan
            frame = user_frame(values, protocol=protocol, metric=metric, k=k)
            frames.append(frame.filter(~((pl.col("system") == "C") & (pl.col("user") % 3 == 0))))
    return pl.concat(frames)


def _two_slices(n: int) -> pl.DataFrame:
    users = np.arange(n)
    return pl.concat([_slices(n), pl.DataFrame({
        "fold": "0", "user": users, "slice": "activity:3", "group": [f"Q{u % 3 + 1}" for u in users],
        "order": pl.Series(users % 3, dtype=pl.Int32)})])


def test_slice_means_are_the_t_intervals_of_each_groups_rows_filtered_by_hand_bit_for_bit(rng):
    """Every row of slice_means is the t-interval (exact sums, as the summary) of the per-user rows
    of its group's users, filtered by hand: the same bits, rows sorted by their keys."""
    from recsys_eval.compare.intervals import t_interval_rows

    n = 90
    frame, slices = _two_protocol_frame(rng, n), _two_slices(n)
    keys = ["system", "protocol", "fold", "metric", "k"]
    expected = pl.concat([
        t_interval_rows(frame.filter(pl.col("user").is_in(members["user"].implode())), keys)
        .with_columns(slice=pl.lit(name), group=pl.lit(group), order=pl.lit(order, pl.Int32))
        for (name, group, order), members in slices.group_by("slice", "group", "order")])
    expected = expected.sort([*keys, "slice", "group", "order"], nulls_last=True).select(
        *keys, "slice", "group", "order", "mean", "lower", "upper", "n", "n_undefined")
    assert_frame_equal(slice_means(frame, slices), expected, check_exact=True)


@pytest.mark.parametrize("test", ["wilcoxon", "permutation"])
def test_slice_tables_equal_a_call_per_metric_and_per_comparable_part(rng, test):
    """The analysis computes a (fold, protocol)'s slice means and tests from its matrix as read:
    its means equal slice_means called metric by metric, end to end, and the tests of each group
    of columns slice_tests of the per-user rows of those columns alone (the same draws), bit for bit."""
    from recsys_eval.compare.frames import partitions
    from recsys_eval.compare.slices import slice_tables

    n = 60
    frame = _two_protocol_frame(rng, n).filter(pl.col("protocol") == "AI+AR+AN")
    slices = _two_slices(n)
    matrix = partitions(frame)[0]
    without_c = np.flatnonzero(matrix.columns.get_column("system") != "C")
    comparable = [np.arange(matrix.columns.height), without_c]
    options = dict(baseline="B", tests=[test], relative_resamples=0, n_resamples=50, seed=2)
    means, tests = slice_tables(matrix, ["ndcg", "auc"], slices, comparable, **options)
    per_metric = pl.concat([slice_means(part, slices) for part in frame.partition_by("metric", maintain_order=True)])
    assert_frame_equal(means, per_metric, check_exact=True)
    assert len(tests) == 2
    for got, part in zip(tests, [frame, frame.filter(pl.col("system") != "C")], strict=True):
        assert_frame_equal(got, slice_tests(part, slices, **options), check_exact=True)
    assert tests[1].filter(pl.col("system") == "C").is_empty() and not tests[0].filter(pl.col("system") == "C").is_empty()
