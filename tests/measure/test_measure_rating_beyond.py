"""Rating-prediction metrics against scipy and by hand; beyond-accuracy metrics and curves by hand."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
import scipy.stats as stats
from hypothesis import given, settings
from hypothesis import strategies as st
from measure_build import rankings_of, targets_of, values

from recsys_eval.core import Interactions
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.measure import (
    average_pr,
    average_roc,
    beyond_accuracy,
    measure,
    pr_points,
    rating_metrics,
    roc_points,
)
from recsys_eval.measure.beyond import entropy, gini


def _predictions(truth, pred, users=None):
    users = users or [1] * len(truth)
    return pl.DataFrame({"user": users, "item": list(range(len(truth))), "rating": truth,
                         "prediction": pred})


def test_error_metrics_by_hand_user_averaged_and_micro():
    frame = _predictions([4.0, 2.0, 5.0], [3.0, 2.0, 2.0], users=[1, 1, 2])
    out = rating_metrics(frame, metrics=["mae", "rmse"])
    per_user = out.filter(pl.col("user").is_not_null())
    assert values(per_user, "mae") == pytest.approx([0.5, 3.0])
    assert values(per_user, "rmse") == pytest.approx([math.sqrt(0.5), 3.0])
    micro = out.filter(pl.col("user").is_null())
    assert micro.filter(pl.col("metric") == "mae")["value"][0] == pytest.approx(4 / 3)
    assert micro.filter(pl.col("metric") == "rmse")["value"][0] == pytest.approx(math.sqrt(10 / 3))


def test_ndpm_by_hand():
    # truth orders a > b > c; prediction: a > c, b tied with a -> pairs (a,b) tied (compatible),
    # (a,c) right, (b,c) right: NDPM = (2*0 + 1) / (2*3)
    out = rating_metrics(_predictions([3.0, 2.0, 1.0], [2.0, 2.0, 1.0]), metrics=["ndpm"])
    assert values(out, "ndpm") == pytest.approx([1 / 6])
    reverse = rating_metrics(_predictions([3.0, 2.0, 1.0], [1.0, 2.0, 3.0]), metrics=["ndpm"])
    assert values(reverse, "ndpm") == pytest.approx([1.0])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1.0, 2.0, 3.0, 4.0, 5.0]),
                          st.sampled_from([1.0, 1.5, 2.0, 3.0, 4.5])), min_size=2, max_size=12))
def test_rank_correlations_match_scipy(pairs):
    truth, pred = [p[0] for p in pairs], [p[1] for p in pairs]
    out = rating_metrics(_predictions(truth, pred), metrics=["kendall", "spearman"])
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tau = stats.kendalltau(truth, pred).statistic
            rho = stats.spearmanr(truth, pred).statistic
    for got, expected in ((values(out, "kendall")[0], tau), (values(out, "spearman")[0], rho)):
        assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected, abs=1e-9)


def test_bad_predictions_raise():
    with pytest.raises(DataError, match="missing columns"):
        rating_metrics(pl.DataFrame({"user": [1], "item": [1], "rating": [1.0]}))
    with pytest.raises(DataError, match="NaN"):
        rating_metrics(_predictions([1.0], [float("nan")]))
    with pytest.raises(DataError, match="more than once"):
        rating_metrics(pl.DataFrame({"user": [1, 1], "item": [2, 2], "rating": [1.0, 2.0], "prediction": [1.0, 1.0]}))


def _run_rows(frame, metric, k=None):
    rows = frame.filter((pl.col("metric") == metric) & pl.col("user").is_null())
    rows = rows.filter(pl.col("k").is_null() if k is None else pl.col("k") == k)
    return rows.get_column("value").to_list()


def test_beyond_accuracy_by_hand():
    # three users, items 0..5; train: users 10, 11 have item 0, user 11 item 1 (catalogue {0, 1})
    rankings = rankings_of([[0, 1, 2], [0, 3], []])
    train = pl.DataFrame({"user": [10, 11, 11], "item": [0, 0, 1]})
    genres = np.zeros((6, 3), dtype=bool)
    genres[0, [0, 1]] = True  # item 0: {a, b}; item 1: {b}; item 2: {c}; item 3: {}
    genres[1, 1] = True
    genres[2, 2] = True
    f = beyond_accuracy(rankings, k=[2], n_items=6, train=train, genres=genres)
    assert values(f.filter(pl.col("user").is_not_null()), "user_coverage") == [1.0, 1.0, 0.0]
    # p(0) = 2/2, p(1) = 1/2, unseen items take the smallest non-zero p = 1/2
    novelty = values(f.filter(pl.col("user").is_not_null()), "novelty", 2)
    assert novelty[:2] == pytest.approx([(0 + 1) / 2, (0 + 1) / 2]) and math.isnan(novelty[2])
    ild = values(f.filter(pl.col("user").is_not_null()), "ild", 2)
    assert ild[:2] == pytest.approx([1 - 1 / 2, 1.0]) and math.isnan(ild[2])
    assert _run_rows(f, "catalog_coverage", 2) == [1.0]  # both train items listed in a top 2
    assert _run_rows(f, "prediction_coverage") == [4 / 6]
    # exposure over the catalogue {0, 1}: counts 2, 1
    assert _run_rows(f, "gini", 2) == pytest.approx([gini(np.array([2, 1]))])
    assert gini(np.array([2, 1])) == pytest.approx((-1 * 1 + 1 * 2) / (2 * 3))
    assert _run_rows(f, "entropy", 2) == pytest.approx([-(2 / 3 * math.log2(2 / 3) + 1 / 3 * math.log2(1 / 3))])


def test_novelty_from_interactions_equals_the_deduplicated_frame():
    # Interactions count each item's holders by a bincount (their pairs are unique); a frame with
    # repeated pairs and a user without train items in the rankings goes through the unique path
    rng = np.random.default_rng(3)
    users, items = rng.integers(0, 30, 400), rng.integers(0, 25, 400)
    frame = pl.DataFrame({"user": users, "item": items})
    interactions = Interactions.from_frame(frame.unique(), duplicates="error")
    n_items = interactions.n_items
    rankings = rankings_of([list(rng.permutation(n_items)[:6]) for _ in range(8)])
    as_frame = pl.DataFrame({"user": interactions.users, "item": interactions.items})
    repeated = pl.concat([as_frame, as_frame.head(50)])

    def novelty(train):
        f = beyond_accuracy(rankings, k=[3, 6], n_items=n_items, metrics=["novelty"], train=train)
        return f.get_column("value").to_numpy()

    np.testing.assert_array_equal(novelty(interactions), novelty(repeated))
    holders = np.array([len({u for u, i in zip(users, items) if i == j}) for j in range(n_items)])
    assert novelty(interactions)[0] == pytest.approx(
        np.mean(-np.log2(holders[rankings.items[:3]] / len(set(users)))))


def test_gini_and_entropy_extremes():
    assert gini(np.array([5, 5, 5])) == 0.0
    assert gini(np.array([0, 0, 9])) == pytest.approx(2 / 3)
    assert entropy(np.array([1, 1, 1, 1])) == pytest.approx(2.0)


def test_beyond_needs_its_inputs():
    with pytest.raises(ConfigError, match="novelty needs train"):
        beyond_accuracy(rankings_of([[0]]), k=1, n_items=2, metrics=["novelty"])
    with pytest.raises(ConfigError, match="ild needs item genres"):
        beyond_accuracy(rankings_of([[0]]), k=1, n_items=2, metrics=["ild"])


def test_measure_routes_beyond_metrics_with_raw_user_ids():
    targets = targets_of([{0: 1.0}, {1: 1.0}], 4)
    f = measure(rankings_of([[0, 1], [2]]), targets, metrics=["hit", "catalog_coverage"], k=1,
                user_ids=["a", "b"])
    assert f.filter(pl.col("metric") == "catalog_coverage")["value"].to_list() == [0.5]
    assert f.filter(pl.col("metric") == "hit")["user"].to_list() == ["a", "b"]


def test_roc_and_pr_curves():
    targets = targets_of([{1: 1.0, 2: 0.0, 3: 0.0, 4: 1.0, 5: 0.0}], 6)
    rankings = rankings_of([[1, 2, 4]], [[3.0, 2.0, 2.0]])  # 2 and 4 tied
    roc = roc_points(rankings, targets)
    assert roc.get_column("fpr").to_list() == pytest.approx([0, 0, 1 / 3, 1])
    assert roc.get_column("tpr").to_list() == pytest.approx([0, 0.5, 1, 1])
    auc = values(measure(rankings, targets, metrics=["auc"], k=1), "auc")[0]
    x, y = roc.get_column("fpr").to_numpy(), roc.get_column("tpr").to_numpy()
    assert float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2)) == pytest.approx(auc)
    avg = average_roc(rankings, targets, n_points=4)
    assert avg.get_column("tpr").to_list() == pytest.approx([0.5, 1.0, 1.0, 1.0])
    pr = pr_points(rankings, targets)
    assert pr.get_column("recall").to_list() == pytest.approx([0.5, 0.5, 1.0])
    assert pr.get_column("precision").to_list() == pytest.approx([1.0, 0.5, 2 / 3])
    interp = average_pr(rankings, targets, n_points=3)
    assert interp.get_column("precision").to_list() == pytest.approx([1.0, 1.0, 2 / 3])
