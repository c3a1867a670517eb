"""R-precision and RBP, the metrics added through their specs alone: against the slow reference
written from the papers (``ties="average"`` by brute force over every ordering of tied items),
hand-worked values, properties, their parameter and depth, and the closed form of a unit with one
relevant item. Peers: tests/measure/test_measure_peers.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from measure_build import rankings_of, targets_of, values
from measure_reference import close, expected, rbp_of_order, rprecision_of_order
from test_measure_reference import CUTS, N_ITEMS, batch

from recsys_eval.core.units import RelevantRanks
from recsys_eval.errors import ConfigError
from recsys_eval.measure import measure
from recsys_eval.measure.metrics import METRICS, ranking_depth

PERSISTENCE = st.sampled_from([0.5, 0.8, 0.95])


def _measure(units, full, with_scores, ties, p, k=CUTS, metrics=("rprecision", "rbp")):
    rankings = rankings_of([u[0] for u in units], [u[1] for u in units] if with_scores else None)
    targets = targets_of([u[2] for u in units], N_ITEMS, n_candidates=[u[3] for u in units] if full else None)
    frame = measure(rankings, targets, metrics=list(metrics), k=k, ties=ties, rbp_persistence=p)
    return {(r["metric"], r["k"], r["unit"]): r["value"] for r in frame.iter_rows(named=True)}


@settings(max_examples=300, deadline=None)
@given(batch(), st.sampled_from(["first", "average"]), PERSISTENCE)
def test_kernels_match_the_reference(data, ties, p):
    units, full, with_scores, _ = data
    got = _measure(units, full, with_scores, ties, p)
    for u, (ranked, scores, targets, _) in enumerate(units):
        scores = scores if with_scores else None
        want = expected(ranked, scores, ties, lambda order: rprecision_of_order(order, targets))
        assert close(got["rprecision", None, u], want), (u, got["rprecision", None, u], want)
        for k in CUTS:
            want = expected(ranked, scores, ties, lambda order: rbp_of_order(order, targets, k, p))
            assert close(got["rbp", k, u], want), (k, u, got["rbp", k, u], want)


@settings(max_examples=200, deadline=None)
@given(batch(), st.sampled_from(["first", "average"]), PERSISTENCE)
def test_properties(data, ties, p):
    """RBP@k lies in [0, 1 - p^k] and never falls as k grows; R-precision is recall@R and
    precision@R (every one of them an expectation over tie orderings under average ties)."""
    units, full, with_scores, _ = data
    ks = [1, 2, 3, 4, 5, 6]
    got = _measure(units, full, with_scores, ties, p, k=ks, metrics=("rprecision", "rbp", "recall", "precision"))
    for u, (_, _, targets, _) in enumerate(units):
        rbp = [got["rbp", k, u] for k in ks]
        assert all(0 <= value <= 1 - p**k + 1e-12 for value, k in zip(rbp, ks, strict=True)), rbp
        assert all(a <= b + 1e-12 for a, b in zip(rbp, rbp[1:])), rbp
        n_rel = sum(g > 0 for g in targets.values())
        if n_rel:
            assert got["rprecision", None, u] == pytest.approx(got["recall", n_rel, u], abs=1e-12)
            assert got["rprecision", None, u] == pytest.approx(got["precision", n_rel, u], abs=1e-12)
        else:
            assert math.isnan(got["rprecision", None, u])


def test_hand_worked_values():
    """Unit 0: items 3 (relevant) > 0 (relevant) = 5 > 1, R = 2; unit 1: no relevant item; unit 2:
    an empty list; unit 3: three tied items, two relevant (R = 2)."""
    rankings = rankings_of([[3, 0, 5, 1], [2, 4], [], [1, 2, 3]],
                           [[4.0, 3.0, 3.0, 1.0], [2.0, 1.0], [], [1.0, 1.0, 1.0]])
    targets = targets_of([{0: 2.0, 1: 0.0, 3: 1.0, 5: 0.0}, {2: 0.0, 4: 0.0}, {1: 3.0, 6: 0.0},
                          {1: 1.0, 2: 0.0, 3: 1.0}], 8)
    first = measure(rankings, targets, metrics=["rbp", "rprecision"], k=[1, 3], rbp_persistence=0.5)
    assert values(first, "rbp", 1) == [0.5, 0, 0, 0.5]
    assert values(first, "rbp", 3) == [0.5 * (1 + 0.5), 0, 0, 0.5 * (1 + 0.25)]
    assert values(first, "rprecision")[2:] == [0, 0.5] and values(first, "rprecision")[0] == 1
    assert math.isnan(values(first, "rprecision")[1])
    average = measure(rankings, targets, metrics=["rbp", "rprecision"], k=[3], ties="average", rbp_persistence=0.5)
    # unit 0: items 0 and 5 tied, one relevant: 1/2 at ranks 2 and 3; unit 3: 2/3 at every rank
    assert values(average, "rbp", 3) == pytest.approx([0.5 * (1 + 0.5 / 2 + 0.5 / 4), 0, 0, 0.5 * 2 / 3 * 1.75])
    assert values(average, "rprecision")[0] == pytest.approx(0.75)
    assert values(average, "rprecision")[3] == pytest.approx(2 / 3)
    default = measure(rankings, targets, metrics=["rbp"], k=[1])
    assert values(default, "rbp", 1) == pytest.approx([0.2, 0, 0, 0.2])


def test_rows_keep_the_asked_metric_order_beside_the_fused_kernel():
    rankings = rankings_of([[3, 0, 5, 1]], [[4.0, 3.0, 3.0, 1.0]])
    targets = targets_of([{0: 2.0, 1: 0.0, 3: 1.0, 5: 0.0}], 8)
    asked = ["rbp", "ndcg", "rprecision", "auc", "precision"]
    rows = measure(rankings, targets, metrics=asked, k=[1, 3])
    assert list(dict.fromkeys(rows.get_column("metric"))) == asked
    alone = measure(rankings, targets, metrics=["ndcg", "auc", "precision"], k=[1, 3])
    for name in ("ndcg", "auc", "precision"):
        assert values(rows, name, 3 if METRICS[name].cutoff else None) == \
            values(alone, name, 3 if METRICS[name].cutoff else None)


@pytest.mark.parametrize(("given", "message"), [
    ({"rbp_persistence": 1.0}, r"rbp_persistence .* must be a number with 0 < rbp_persistence < 1, got 1.0"),
    ({"rbp_persistence": 0}, r"0 < rbp_persistence < 1, got 0"),
    ({"rbp_persistence": "0.8"}, r"got '0.8'"),
    ({"rbp_persistance": 0.9}, r"unknown metric parameter 'rbp_persistance'.*did you mean 'rbp_persistence'"),
])
def test_bad_parameters_raise_clear_errors(given, message):
    rankings = rankings_of([[0]])
    targets = targets_of([{0: 1.0}], 2)
    with pytest.raises(ConfigError, match=message):
        measure(rankings, targets, metrics=["rbp"], k=[1], **given)


def test_ranking_depth():
    assert ranking_depth(["ndcg", "auc"], [5, 20], max_relevant=500, at_least=100) == 100
    assert ranking_depth(["ndcg"], [5, 200], max_relevant=500, at_least=100) == 200
    assert ranking_depth(["rbp", "precision"], [10], max_relevant=500, at_least=100) == 100
    assert ranking_depth(["precision", "rprecision"], [10], max_relevant=500, at_least=100) == 500
    assert ranking_depth(["rprecision"], [10], max_relevant=30, at_least=100) == 100
    with pytest.raises(ConfigError, match="unknown metric 'rprec'"):
        ranking_depth(["rprec"], [10], max_relevant=30, at_least=100)


def _one_relevant(above, tied, before, n_non, ranked):
    n = len(above)
    return RelevantRanks(np.arange(n, dtype=np.int32), np.asarray(above, np.int64), np.asarray(tied, np.int64),
                         np.asarray(before, np.int64), np.asarray(n_non, np.int64), np.ones(n, np.float32),
                         np.asarray(ranked, bool))


def test_one_relevant_closed_form_is_the_mean_over_the_tied_group():
    """Unit 0: rank 3 (two above); unit 1: two above and three tied (ranks 3..6, one of them first
    when ties go by item index: rank 4); unit 2: not ranked; unit 3: a tied group of 400 reaching
    far past every cutoff."""
    ranks = _one_relevant([2, 2, 0, 0], [0, 3, 0, 399], [0, 1, 0, 7], [50, 50, 50, 500], [True, True, False, True])
    targets = targets_of([{0: 1.0}] * 4, 2)
    p = 0.8
    rbp = [(1 - p) * p ** (r - 1) for r in range(1, 401)]
    first = measure(ranks, targets, metrics=["rbp", "rprecision"], k=[3, 5], rbp_persistence=p)
    assert values(first, "rbp", 3) == pytest.approx([rbp[2], 0, 0, 0])
    assert values(first, "rbp", 5) == pytest.approx([rbp[2], rbp[3], 0, 0])
    assert values(first, "rprecision") == [0, 0, 0, 0]
    average = measure(ranks, targets, metrics=["rbp", "rprecision"], k=[3, 5], ties="average", rbp_persistence=p)
    assert values(average, "rbp", 5) == pytest.approx([rbp[2], sum(rbp[2:5]) / 4, 0, sum(rbp[:5]) / 400])
    assert values(average, "rprecision") == pytest.approx([0, 0, 0, 1 / 400])


def test_a_metric_without_closed_form_refuses_one_relevant_units(monkeypatch):
    """A spec with a kernel but no at_rank: 1R units raise, where they once got a silent NaN."""
    import dataclasses

    from recsys_eval.measure import metrics

    monkeypatch.setitem(metrics.METRICS, "rbp", dataclasses.replace(METRICS["rbp"], at_rank=None))
    ranks = _one_relevant([0], [0], [0], [5], [True])
    with pytest.raises(ConfigError, match="'rbp' has no closed form for units with one relevant item"):
        measure(ranks, targets_of([{0: 1.0}], 2), metrics=["rbp"], k=[3])


def test_read_only_rankings_are_measured():
    """Arrays the caller cannot write (polars' zero-copy columns) fit the kernels' one signature."""
    rankings = rankings_of([[3, 0, 5, 1], [2, 4]], [[4.0, 3.0, 3.0, 1.0], [2.0, 1.0]])
    for array in (rankings.offsets, rankings.items, rankings.scores):
        array.setflags(write=False)
    targets = targets_of([{0: 2.0, 1: 0.0, 3: 1.0, 5: 0.0}, {2: 1.0, 4: 0.0}], 8)
    frame = measure(rankings, targets, metrics=["rbp", "rprecision"], k=[3], rbp_persistence=0.5)
    assert values(frame, "rbp", 3) == [0.75, 0.5] and values(frame, "rprecision") == [1, 1]
