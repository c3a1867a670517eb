"""Averaging rules: macro and micro means, undefined values, folds, F-measure and AUC variants."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats
from measure_build import rankings_of, targets_of

from recsys_eval.errors import ConfigError, DataError
from recsys_eval.measure import auc_variants, f_counts, f_measure_variants, measure, pooled_auc, summarize
from recsys_eval.measure.auc import scored_targets, weighted_auc


def _rows(values_by_user: dict, metric: str = "ap", fold: str = "0", k: int | None = 10) -> pl.DataFrame:
    rows, unit = [], 0
    for user, values in values_by_user.items():
        for v in values:
            rows.append({"system": "s", "protocol": "p", "fold": fold, "user": user, "unit": unit,
                         "metric": metric, "k": k, "value": v})
            unit += 1
    return pl.DataFrame(rows, schema={"system": pl.String, "protocol": pl.String, "fold": pl.String,
                                      "user": pl.Int64, "unit": pl.Int64, "metric": pl.String,
                                      "k": pl.Int32, "value": pl.Float64})


def test_1r_user_means_then_macro_mean_with_micro_beside():
    # user 1 has three rankings (1R), user 2 one: macro (1/3 + 1)/2, micro 2/4
    s = summarize(_rows({1: [1.0, 0.0, 0.0], 2: [1.0]}))
    row = s.row(0, named=True)
    assert row["name"] == "ap@10"
    assert row["mean"] == pytest.approx(2 / 3)
    assert row["micro_mean"] == pytest.approx(0.5)
    assert (row["users_counted"], row["users_left_out"], row["undefined"]) == (2, 0, "skip")


def test_undefined_values_are_skipped_and_counted_or_zero():
    frame = _rows({1: [0.5], 2: [float("nan")], 3: [1.0]})
    skip = summarize(frame).row(0, named=True)
    assert skip["mean"] == pytest.approx(0.75)
    assert (skip["users_counted"], skip["users_left_out"]) == (2, 1)
    zero = summarize(frame, undefined="zero").row(0, named=True)
    assert zero["mean"] == pytest.approx(0.5)
    assert (zero["users_counted"], zero["users_left_out"], zero["undefined"]) == (3, 0, "zero")


def test_fold_means_are_averaged_in_an_all_row():
    frame = pl.concat([_rows({1: [1.0], 2: [0.0]}, fold="1"), _rows({1: [1.0], 2: [1.0], 3: [1.0], 4: [1.0]}, fold="2")])
    s = summarize(frame)
    assert s.get_column("fold").to_list() == ["1", "2", "all"]
    assert s.filter(pl.col("fold") == "all")["mean"][0] == pytest.approx((0.5 + 1.0) / 2)  # not 5/6
    assert s.filter(pl.col("fold") == "all")["users_counted"][0] == 6


def test_run_level_rows_are_reported_as_they_are():
    run = pl.DataFrame({"system": ["s"], "protocol": ["p"], "fold": ["0"], "user": [None], "unit": [None],
                        "metric": ["catalog_coverage"], "k": [10], "value": [0.25]},
                       schema=_rows({}).schema)
    micro = run.with_columns(metric=pl.lit("mae"), k=pl.lit(None, pl.Int32), value=pl.lit(0.9))
    s = summarize(pl.concat([_rows({1: [1.0], 2: [0.5]}, metric="mae", k=None), run, micro]))
    coverage = s.filter(pl.col("metric") == "catalog_coverage").row(0, named=True)
    assert coverage["mean"] == 0.25 and coverage["users_counted"] is None
    mae = s.filter(pl.col("metric") == "mae").row(0, named=True)
    assert mae["mean"] == pytest.approx(0.75) and mae["micro_mean"] == pytest.approx(0.9)


# A hand-built two-fold cross-validation at k = 2 where the F-measure variants differ.
# fold 1: user 0 (R=2) hits 2 -> TP 2, FP 0, FN 0;  user 1 (R=1) hits 0 -> TP 0, FP 2, FN 1
# fold 2: user 0 (R=0)        -> TP 0, FP 2, FN 0 (recall undefined);
#         user 1 (R=4) hits 1 -> TP 1, FP 1, FN 3
def _cross_validation() -> pl.DataFrame:
    fold1 = measure(rankings_of([[0, 1], [5, 6]]), targets_of([{0: 1.0, 1: 1.0}, {2: 1.0}], 10),
                    metrics=["f1"], k=2, fold="1")
    fold2 = measure(rankings_of([[0, 1], [2, 5]]), targets_of([{3: 0.0}, {2: 1.0, 3: 1.0, 4: 1.0, 7: 1.0}], 10),
                    metrics=["f1"], k=2, fold="2")
    return pl.concat([fold1, fold2])


def _f(p, r):
    return 2 * p * r / (p + r)


def test_f_measure_variants_across_users():
    v = f_measure_variants(f_counts(_cross_validation()), over="users")
    one, two = v.row(0, named=True), v.row(1, named=True)
    assert one["F_avg"] == pytest.approx(0.5) and one["F_pr_re"] == pytest.approx(0.5)
    assert one["F_tp_fp"] == pytest.approx(4 / 7)
    assert two["F_avg"] == pytest.approx(1 / 6)  # (0 + 1/3) / 2, the undefined user as 0
    assert two["F_avg_skip"] == pytest.approx(1 / 3)
    assert two["F_pr_re"] == pytest.approx(_f(0.25, 0.125))
    assert two["F_pr_re_skip"] == pytest.approx(_f(0.5, 0.25))
    assert two["F_tp_fp"] == pytest.approx(2 / 8)
    assert (two["n_items"], two["n_undefined"]) == (2, 1)


def test_f_measure_variants_across_folds_differ():
    v = f_measure_variants(f_counts(_cross_validation()), over="folds").row(0, named=True)
    f1, f2 = _f(0.5, 2 / 3), _f(0.25, 0.25)
    assert v["F_avg"] == pytest.approx((f1 + f2) / 2)
    assert v["F_pr_re"] == pytest.approx(_f((0.5 + 0.25) / 2, (2 / 3 + 0.25) / 2))
    assert v["F_tp_fp"] == pytest.approx(2 * 3 / (2 * 3 + 5 + 4))
    assert len({round(v[c], 6) for c in ("F_avg", "F_pr_re", "F_tp_fp")}) == 3


def test_summary_shows_f1_as_user_mean_and_pooled_f_tp_fp_separately():
    s = summarize(_cross_validation())
    pooled = s.filter(pl.col("metric") == "f1_pooled")
    assert pooled.get_column("mean").to_list() == pytest.approx([4 / 7, 2 / 8, 6 / 15])
    assert set(pooled.get_column("rule")) == {"pooled"}
    assert pooled.get_column("users_counted").to_list() == [2, 2, 4]  # every user with a unit counts
    mean = s.filter(pl.col("metric") == "f1")
    # fold 2's user 0 has no relevant item: F1 undefined, left out and counted as left out
    assert mean.get_column("mean").to_list() == pytest.approx([0.5, 1 / 3, (0.5 + 1 / 3) / 2])
    assert mean.get_column("users_left_out").to_list() == [0, 1, 1]
    assert set(mean.get_column("rule")) == {"user mean"}
    assert "n_relevant" not in set(s.get_column("metric"))


def test_f_measure_needs_relevant_counts():
    frame = _cross_validation().filter(pl.col("metric") == "f1")
    with pytest.raises(DataError, match="n_relevant"):
        f_counts(frame)


def test_averaged_and_pooled_auc_differ_for_uncalibrated_folds():
    targets = targets_of([{0: 1.0, 1: 0.0}], 3)
    high = rankings_of([[0, 1]], [[10.0, 9.0]])
    low = rankings_of([[0, 1]], [[2.0, 1.0]])
    v = dict(auc_variants([(high, targets), (low, targets)]).iter_rows())
    assert v["auc"] == 1.0  # per user, each fold ranks its one pair right
    assert v["auc_avg"] == 1.0  # pooled within each fold: still one pair per fold
    assert v["auc_merge"] == pytest.approx(3 / 4)  # 2 beats 1 only: 10>9, 10>1, 2<9, 2>1


def test_per_user_and_fold_pooled_auc_differ_when_users_are_not_on_one_scale():
    # one fold, two users: each ranks its relevant item first (per-user AUC 1), but user 1's scores
    # all sit below user 0's, so pooling the fold's pairs loses 1 of the 4 cross pairs
    targets = targets_of([{0: 1.0, 1: 0.0}, {0: 1.0, 1: 0.0}], 3)
    rankings = rankings_of([[0, 1], [0, 1]], [[10.0, 9.0], [2.0, 1.0]])
    v = dict(auc_variants([(rankings, targets)]).iter_rows())
    assert v["auc"] == 1.0
    assert v["auc_avg"] == v["auc_merge"] == pytest.approx(3 / 4)


def test_summary_options_are_checked():
    with pytest.raises(ConfigError, match="did you mean 'skip'"):
        summarize(_rows({1: [1.0]}), undefined="skp")
    assert math.isnan(summarize(_rows({1: [float("nan")]})).row(0, named=True)["mean"] or float("nan"))


def test_no_metric_gives_an_empty_table():
    assert measure(rankings_of([[0]]), targets_of([{0: 1.0}], 2), metrics=[], k=1).height == 0


def test_weighted_auc_equals_the_replicated_rows():
    rng = np.random.default_rng(3)
    score = rng.integers(0, 6, 60).astype(float)
    label = (rng.random(60) < 0.4).astype(np.int8)
    weight = rng.integers(1, 4, 60)
    frame = pl.DataFrame({"score": score, "label": label, "weight": weight.astype(float)})
    rel, non = np.repeat(score[label == 1], weight[label == 1]), np.repeat(score[label == 0], weight[label == 0])
    u = stats.mannwhitneyu(rel, non).statistic
    assert weighted_auc(frame) == pytest.approx(u / (len(rel) * len(non)))
    assert math.isnan(weighted_auc(frame.filter(pl.col("label") == 1)))


def test_scored_targets_keep_left_out_items_and_sample_without_bias():
    targets = targets_of([{0: 1.0, 1: 0.0, 2: 0.0, 3: 0.0}], 10)
    truncated = rankings_of([[1, 0]], [[5.0, 4.0]])  # items 2 and 3 left out: tied below
    rows = scored_targets(truncated, targets)
    assert rows.filter(pl.col("score") == -np.inf).rows() == [(-np.inf, 0, 2.0)]
    assert weighted_auc(rows) == pytest.approx(2 / 3)
    assert weighted_auc(rows) == pytest.approx(pooled_auc([(truncated, targets)]))

    rng = np.random.default_rng(0)
    n = 3000
    relevant = [{int(i): 1.0 for i in rng.choice(200, 5, replace=False)} for _ in range(n // 10)]
    scores = rng.random((n // 10, 200))
    order = np.argsort(-scores, axis=1)
    big_targets = targets_of(relevant, 200, n_candidates=[200] * (n // 10))
    big = rankings_of(order.tolist(), np.take_along_axis(scores, order, axis=1).tolist())
    exact = weighted_auc(scored_targets(big, big_targets))
    estimates = [weighted_auc(scored_targets(big, big_targets, sample=2000, seed=s)) for s in range(20)]
    assert len(scored_targets(big, big_targets, sample=2000)) == 1500 + 2000  # every relevant, sampled rest
    assert np.mean(estimates) == pytest.approx(exact, abs=0.01)
    assert np.std(estimates) > 0
