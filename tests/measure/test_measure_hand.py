"""Hand-worked examples: every ranking metric on rankings whose values are worked out here."""

from __future__ import annotations

import math

import numpy as np
import pytest
from measure_build import rankings_of, targets_of, values

from recsys_eval.errors import ConfigError, DataError
from recsys_eval.measure import measure
from recsys_eval.recommend import rank_targets

L3, L5 = math.log2(3), math.log2(5)
ALL = ["precision", "recall", "f1", "ap", "ndcg", "rr", "hit", "half_life", "auc"]

# Unit A: relevant items 1 (gain 3), 4 (gain 1), 7 (gain 2); item 2 is a non-relevant target;
# ranked 2, 1, 5, 7 (item 5 is not a target: it takes a slot and is not relevant).
A_TARGETS = {1: 3.0, 2: 0.0, 4: 1.0, 7: 2.0}
A_RANKING = [2, 1, 5, 7]


def run_a(**options):
    return measure(rankings_of([A_RANKING]), targets_of([A_TARGETS], 10), metrics=ALL,
                   k=[1, 2, 3, 5], **options)


def test_precision_recall_f1_hit_rr():
    f = run_a()
    assert values(f, "precision", 1) == [0.0]
    assert values(f, "precision", 3) == pytest.approx([1 / 3])
    assert values(f, "precision", 5) == pytest.approx([2 / 5])  # k fixed: 5 slots, 4 ranked
    assert values(f, "recall", 3) == pytest.approx([1 / 3])
    assert values(f, "recall", 5) == pytest.approx([2 / 3])
    assert values(f, "f1", 1) == [0.0]
    assert values(f, "f1", 3) == pytest.approx([1 / 3])
    assert values(f, "f1", 5) == pytest.approx([2 * 0.4 * (2 / 3) / (0.4 + 2 / 3)])
    assert values(f, "hit", 1) == [0.0]
    assert values(f, "hit", 2) == [1.0]
    assert values(f, "rr", 1) == [0.0]
    assert values(f, "rr", 5) == pytest.approx([0.5])


def test_average_precision_and_its_denominators():
    f = run_a()
    assert values(f, "ap", 2) == pytest.approx([(1 / 2) / 3])
    assert values(f, "ap", 5) == pytest.approx([(1 / 2 + 2 / 4) / 3])
    g = run_a(ap_denominator="min_rk")
    assert values(g, "ap", 2) == pytest.approx([(1 / 2) / 2])
    assert values(g, "ap", 5) == pytest.approx([(1 / 2 + 2 / 4) / 3])


@pytest.mark.parametrize(
    "gain, dcg, idcg",
    [
        ("graded", 3 / L3 + 2 / L5, 3 + 2 / L3 + 1 / 2),
        ("binary", 1 / L3 + 1 / L5, 1 + 1 / L3 + 1 / 2),
        ("exp", 7 / L3 + 3 / L5, 7 + 3 / L3 + 1 / 2),
    ],
)
def test_ndcg_gains(gain, dcg, idcg):
    assert values(run_a(gain=gain), "ndcg", 5) == pytest.approx([dcg / idcg])


def test_ndcg_ideal_is_cut_at_k():
    assert values(run_a(), "ndcg", 2) == pytest.approx([(3 / L3) / (3 + 2 / L3)])


def test_half_life_utility():
    utility = 3 / 2 ** (1 / 4) + 2 / 2 ** (3 / 4)
    best = 3 + 2 / 2 ** (1 / 4) + 1 / 2 ** (2 / 4)
    assert values(run_a(), "half_life", 5) == pytest.approx([utility / best])
    # neutral d = 1.5: gains max(g - d, 0) = 1.5, 0.5, 0 for items 1, 7, 4
    utility = 1.5 / 2 ** (1 / 4) + 0.5 / 2 ** (3 / 4)
    best = 1.5 + 0.5 / 2 ** (1 / 4)
    assert values(run_a(neutral=1.5), "half_life", 5) == pytest.approx([utility / best])
    # h = 2: weights 1, 1/2, 1/4, 1/8
    utility = 3 / 2 + 2 / 8
    best = 3 + 2 / 2 + 1 / 4
    assert values(run_a(half_life=2), "half_life", 5) == pytest.approx([utility / best])


# Unit B: relevant 1 and 4; non-relevant targets 2, 3, 5.
B_TARGETS = {1: 1.0, 2: 0.0, 3: 0.0, 4: 1.0, 5: 0.0}


@pytest.mark.parametrize(
    "ranking, scores, expected",
    [
        ([1, 2, 4], None, 5 / 6),  # 1 beats 2, 3, 5; 4 beats the unranked 3 and 5
        ([1, 2], None, 4 / 6),  # 4 unranked: ties with the unranked 3 and 5 (one half each)
        ([1, 2, 4], [2.0, 1.0, 1.0], 5.5 / 6),  # 4 tied with 2: one half
        ([], None, 0.5),  # nothing ranked: every pair tied
        ([3, 5, 2, 4, 1], None, 0.0),
    ],
)
def test_auc_ties_and_truncation(ranking, scores, expected):
    f = measure(rankings_of([ranking], None if scores is None else [scores]),
                targets_of([B_TARGETS], 10), metrics=["auc"], k=1)
    assert values(f, "auc") == pytest.approx([expected])


def test_auc_full_ranking_uses_the_candidate_count():
    # relevant 1 and 4 among 6 candidates: N = 4 (item 2 ranked, three never ranked)
    f = measure(rankings_of([[1, 2, 4]]), targets_of([{1: 1.0, 4: 1.0}], 10, n_candidates=[6]),
                metrics=["auc", "recall"], k=3)
    assert values(f, "auc") == pytest.approx([(4 + 3) / 8])
    assert values(f, "recall", 3) == [1.0]


def test_ties_average_is_the_expectation_over_orderings():
    targets = targets_of([{1: 1.0, 2: 0.0, 3: 0.0}], 5)
    rankings = rankings_of([[2, 1, 3]], [[1.0, 1.0, 1.0]])
    avg = measure(rankings, targets, metrics=ALL, k=[1, 2, 3], ties="average")
    assert values(avg, "precision", 1) == pytest.approx([1 / 3])
    assert values(avg, "hit", 2) == pytest.approx([2 / 3])
    assert values(avg, "rr", 3) == pytest.approx([(1 + 1 / 2 + 1 / 3) / 3])
    assert values(avg, "ap", 3) == pytest.approx([(1 + 1 / 2 + 1 / 3) / 3])
    assert values(avg, "ndcg", 3) == pytest.approx([(1 + 1 / L3 + 1 / 2) / 3])
    assert values(avg, "auc") == pytest.approx([0.5])
    first = measure(rankings, targets, metrics=ALL, k=[1, 2, 3])  # ties by item index: 1, 2, 3
    assert values(first, "precision", 1) == [1.0]
    assert values(first, "rr", 3) == [1.0]
    assert values(first, "auc") == pytest.approx([0.5])  # AUC counts ties one half either way


def test_undefined_values_are_nan_and_empty_rankings_score_zero():
    targets = targets_of([{1: 0.0, 2: 0.0}, {3: 1.0, 4: 0.0}], 5)
    f = measure(rankings_of([[1, 2], []]), targets, metrics=ALL, k=[2])
    for name in ("recall", "f1", "ap", "ndcg", "rr", "half_life", "auc"):
        assert math.isnan(values(f, name, None if name == "auc" else 2)[0]), name
    assert values(f, "precision", 2)[0] == 0.0
    assert values(f, "hit", 2)[0] == 0.0
    for name in ("precision", "recall", "f1", "ap", "ndcg", "rr", "hit", "half_life"):
        assert values(f, name, 2)[1] == 0.0, name


def test_f1_brings_the_relevant_counts():
    f = measure(rankings_of([A_RANKING]), targets_of([A_TARGETS], 10), metrics=["f1"], k=2)
    assert values(f, "n_relevant") == [3.0]


def test_rows_are_labelled_and_users_can_be_raw_ids():
    targets = targets_of([{1: 1.0}, {2: 1.0}], 5)
    f = measure(rankings_of([[1], [3]]), targets, metrics=["hit"], k=1, system="pop",
                fold="f2", user_ids=["ann", "bob"])
    assert f.columns == ["system", "protocol", "fold", "user", "unit", "metric", "k", "value"]
    assert f.get_column("user").to_list() == ["ann", "bob"]
    assert set(f.get_column("system")) == {"pop"} and set(f.get_column("protocol")) == {"test"}
    assert set(f.get_column("fold")) == {"f2"}


def test_rank_targets_orders_by_score_then_item_index():
    targets = targets_of([{1: 1.0, 2: 0.0, 3: 0.0}, {4: 1.0, 5: 0.0}], 6)
    rankings = rank_targets(np.array([0.5, 0.9, 0.5, 0.1, 0.2]), targets, k=2)
    assert rankings.items.tolist() == [2, 1, 5, 4]
    assert rankings.offsets.tolist() == [0, 2, 4]
    assert rankings.scores.tolist() == [0.9, 0.5, 0.2, 0.1]
    shorter = rank_targets([0.5, 0.9, -np.inf, 0.1, 0.2], targets, k=2)  # -inf: not ranked
    assert shorter.items.tolist() == [2, 1, 5, 4] and shorter.offsets.tolist() == [0, 2, 4]
    assert rank_targets([0.5, 0.9, -np.inf, 0.1, 0.2], targets).items.tolist() == [2, 1, 5, 4]
    with pytest.raises(DataError, match="NaN"):
        rank_targets([0.5, np.nan, 0.5, 0.1, 0.2], targets)
    with pytest.raises(DataError, match="one number per listed target item"):
        rank_targets([0.5, 0.9], targets)
    with pytest.raises(ConfigError, match="k must be a positive"):
        rank_targets([0.5, 0.9, 0.5, 0.1, 0.2], targets, k=0)


def test_deterministic_tie_order_does_not_depend_on_the_listed_order():
    targets = targets_of([{1: 1.0, 2: 0.0}], 5)
    a = measure(rankings_of([[2, 1]], [[1.0, 1.0]]), targets, metrics=["precision"], k=1)
    b = measure(rankings_of([[1, 2]], [[1.0, 1.0]]), targets, metrics=["precision"], k=1)
    assert values(a, "precision", 1) == values(b, "precision", 1) == [1.0]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda r, t: measure(r, t, metrics=["ndgc"], k=1), "did you mean 'ndcg'"),
        (lambda r, t: measure(r, t, metrics=["ndcg"], k=0), "positive integer"),
        (lambda r, t: measure(r, t, metrics=["ndcg"], k=[5, -1]), "positive integer"),
        (lambda r, t: measure(r, t, metrics=["mae"], k=1), "rating_metrics"),
        (lambda r, t: measure(r, t, metrics=["ndcg"], gain="linear"), "gain"),
        (lambda r, t: measure(r, t, metrics=["ndcg"], ties="random"), "ties"),
        (lambda r, t: measure(r, t, metrics=["half_life"], half_life=1), "half_life"),
    ],
)
def test_bad_options_raise_clear_errors(call, message):
    with pytest.raises(ConfigError, match=message):
        call(rankings_of([[1]]), targets_of([{1: 1.0}], 3))


@pytest.mark.parametrize(
    "rankings, message",
    [
        (rankings_of([[1, 1]]), "more than once"),
        (rankings_of([[1, 2]], [[1.0, float("nan")]]), "NaN or infinite"),
        (rankings_of([[1, 2]], [[1.0, 2.0]]), "never increase"),
        (rankings_of([[1, 9]]), "outside the item index"),
        (rankings_of([[1], [2]]), "units"),
    ],
)
def test_bad_rankings_raise_clear_errors(rankings, message):
    with pytest.raises(DataError, match=message):
        measure(rankings, targets_of([{1: 1.0, 2: 0.0}], 3), metrics=["ndcg"], k=1)


@pytest.mark.parametrize(
    "scores, message",
    [
        ([[2.0, 1.0], [3.0, 1.0, 2.0]], r"unit 1 \(user 1\) at position 3"),
        ([[2.0, float("inf")], [3.0, float("nan"), 2.0]], r"2 NaN or infinite scores \(first in unit 0"),
    ],
)
def test_bad_scores_are_located(scores, message):
    rankings = rankings_of([[1, 2], [0, 1, 2]], scores)
    with pytest.raises(DataError, match=message):
        measure(rankings, targets_of([{1: 1.0}, {2: 1.0}], 3), metrics=["ndcg"], k=1)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_gain_that_is_not_a_finite_number_is_refused_with_its_place(bad):
    with pytest.raises(DataError, match=r"of item 2 in unit 1 \(user 1\); gains must be finite"):
        targets_of([{1: 1.0}, {0: 1.0, 2: bad}], 3)
