import numpy as np
import polars as pl
import pytest
from scipy import stats

from recsys_eval.compare import aggregation_audit, auc_aggregation, f_measure_variants
from recsys_eval.errors import DataError


def counts(rows):
    return pl.DataFrame(rows, schema=["system", "protocol", "fold", "k", "tp", "fp", "fn"], orient="row")


# System a per fold (tp, fp, fn): F = 0.75, 0.4, and a fold with no prediction (precision undefined).
A_FOLDS = [("a", "p", "0", 10, 3, 1, 1), ("a", "p", "1", 10, 1, 3, 0), ("a", "p", "2", 10, 0, 0, 2)]
B_FOLDS = [("b", "p", str(f), 10, 2, 2, 2) for f in range(3)]  # P = R = F = 0.5 in every fold


def test_f_measure_variants_worked_by_hand():
    table = f_measure_variants(counts(A_FOLDS + B_FOLDS), over="folds")
    a = table.filter(pl.col("system") == "a").row(0, named=True)
    assert a["F_tp_fp"] == pytest.approx(8 / 15)  # 2*4 / (2*4 + 4 + 3)
    assert a["F_avg"] == pytest.approx((0.75 + 0.4 + 0) / 3)
    assert a["F_avg_skip"] == pytest.approx((0.75 + 0.4) / 2)
    p, r = (0.75 + 0.25 + 0) / 3, (0.75 + 1 + 0) / 3
    assert a["F_pr_re"] == pytest.approx(2 * p * r / (p + r))
    assert a["F_pr_re_skip"] == pytest.approx(2 * 0.5 * 0.875 / 1.375)
    assert (a["n_items"], a["n_undefined"]) == (3, 1)
    b = table.filter(pl.col("system") == "b").row(0, named=True)
    assert [b[v] for v in ("F_tp_fp", "F_avg", "F_avg_skip", "F_pr_re", "F_pr_re_skip")] == pytest.approx([0.5] * 5)


def test_units_level_sums_nothing_and_folds_level_sums_units():
    units = counts([("a", "p", "0", 10, 3, 0, 0), ("a", "p", "0", 10, 0, 1, 1), ("a", "p", "1", 10, 1, 3, 0)])
    per_fold = f_measure_variants(units, over="units").sort("fold")
    assert per_fold["F_avg"].to_list() == pytest.approx([(1 + 0) / 2, 0.4])
    assert per_fold["F_tp_fp"].to_list() == pytest.approx([6 / 8, 0.4])
    across = f_measure_variants(units, over="folds").row(0, named=True)
    assert across["F_avg"] == pytest.approx((6 / 8 + 0.4) / 2)


def test_audit_flags_variants_that_reorder_systems():
    scores = pl.DataFrame(
        {
            "system": ["b"] * 8 + ["c"] * 8,
            "fold": (["0"] * 4 + ["1"] * 4) * 2,
            "score": [0.9, 0.8, 0.7, 0.1, 0.03, 0.02, 0.025, 0.005] + [0.9, 0.6, 0.7, 0.1] * 2,
            "label": [1, 1, 0, 0] * 4,
        }
    )
    audit = aggregation_audit(counts(A_FOLDS + B_FOLDS), scores)
    f_changes = audit.changes.filter(pl.col("table") == "f_measure")
    swapped = {row["variant"]: row["swaps"] for row in f_changes.iter_rows(named=True)}
    assert swapped == {"F_avg": ["a vs b"], "F_avg_skip": [], "F_pr_re": ["a vs b"], "F_pr_re_skip": []}
    auc = audit.auc.sort("system")
    # b: folds 1 and 3/4 -> 0.875; pooled, fold 1's low scores sink below fold 0's negatives: 11/16
    assert auc.rows() == [("b", 0.875, 11 / 16, 2), ("c", 0.75, 0.75, 2)]
    auc_change = audit.changes.filter(pl.col("table") == "auc").row(0, named=True)
    assert (auc_change["variant"], auc_change["swaps"]) == ("auc_merge", ["b vs c"])


def test_auc_with_ties_matches_mann_whitney(rng):
    score = rng.integers(0, 5, 200).astype(float)
    label = (rng.random(200) < 0.3).astype(int)
    table = auc_aggregation(pl.DataFrame({"system": "s", "fold": "0", "score": score, "label": label}))
    u = stats.mannwhitneyu(score[label == 1], score[label == 0]).statistic
    assert table["auc_avg"].item() == pytest.approx(u / (label.sum() * (1 - label).sum()))
    assert table["auc_merge"].item() == pytest.approx(table["auc_avg"].item())


def test_bad_input():
    with pytest.raises(DataError, match="missing columns \\['fn'\\]"):
        f_measure_variants(counts(A_FOLDS).drop("fn"), over="folds")
    with pytest.raises(DataError, match="non-negative"):
        f_measure_variants(counts([("a", "p", "0", 10, -1, 0, 0)]), over="folds")
    with pytest.raises(DataError, match="give per-unit counts"):
        aggregation_audit()
    assert np.isfinite(f_measure_variants(counts(A_FOLDS), over="folds")["F_tp_fp"].item())
