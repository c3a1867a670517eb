"""The kernels against the slow pure-Python reference, and bounds and invariances, on
hypothesis-generated rankings: short and empty lists, units without relevant items, graded gains,
ties, items outside the target set, k larger than the list, full ranking."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from measure_build import rankings_of, targets_of
from measure_reference import CUTOFF, close, unit_auc, unit_metrics

from recsys_eval.measure.api import ranking_values
from recsys_eval.measure.metrics import kernel_column

N_ITEMS = 9
CUTS = [1, 2, 3, 5, 8]


@st.composite
def unit(draw, full_ranking: bool):
    listed = draw(st.lists(st.integers(0, N_ITEMS - 1), max_size=6, unique=True))
    gains = draw(st.lists(st.sampled_from([0.0, 0.0, 1.0, 2.0, 3.5]), min_size=len(listed),
                          max_size=len(listed)))
    targets = dict(zip(listed, gains))
    pool = list(range(N_ITEMS)) if (full_ranking or draw(st.booleans())) else listed
    ranked = draw(st.lists(st.sampled_from(pool), max_size=6, unique=True)) if pool else []
    scores = draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0]), min_size=len(ranked),
                           max_size=len(ranked)))
    order = sorted(range(len(ranked)), key=lambda j: -scores[j])  # stable: ties keep drawn order
    ranked = [ranked[j] for j in order]
    scores = [scores[j] for j in order]
    extra = draw(st.integers(0, 5))
    n_target = len(set(listed) | set(ranked)) + extra if full_ranking else None
    return ranked, scores, targets, n_target


@st.composite
def batch(draw):
    full = draw(st.booleans())
    units = draw(st.lists(unit(full), min_size=1, max_size=4))
    with_scores = draw(st.booleans())
    options = {
        "gain": draw(st.sampled_from(["graded", "binary", "exp"])),
        "ap_denominator": draw(st.sampled_from(["relevant", "min_rk"])),
        "half_life": draw(st.sampled_from([2.0, 5.0])),
        "neutral": draw(st.sampled_from([0.0, 1.5])),
    }
    return units, full, with_scores, options


def _kernel(units, full, with_scores, options, ties):
    rankings = rankings_of([u[0] for u in units], [u[1] for u in units] if with_scores else None)
    targets = targets_of([u[2] for u in units], N_ITEMS,
                         n_candidates=[u[3] for u in units] if full else None)
    return ranking_values(rankings, targets, CUTS, ties=ties, **options)


@settings(max_examples=300, deadline=None)
@given(batch(), st.sampled_from(["first", "average"]))
def test_kernel_matches_reference(data, ties):
    units, full, with_scores, options = data
    got = _kernel(units, full, with_scores, options, ties)
    n_cut = len(CUTS)
    for u, (ranked, scores, targets, n_target) in enumerate(units):
        for c, k in enumerate(CUTS):
            expected = unit_metrics(ranked, scores if with_scores else None, targets, k, ties=ties,
                                    **options)
            for name in CUTOFF:
                value = got[u, kernel_column(name, c, n_cut)]
                assert close(value, expected[name]), (name, k, u, value, expected[name])
        auc = unit_auc(ranked, scores if with_scores else None, targets, n_target)
        value = got[u, kernel_column("auc", 0, n_cut)]
        assert close(value, auc), ("auc", u, value, auc)


@settings(max_examples=200, deadline=None)
@given(batch(), st.sampled_from(["first", "average"]))
def test_bounds_and_precision_times_k_is_hits(data, ties):
    units, full, with_scores, options = data
    got = _kernel(units, full, with_scores, options, ties)
    finite = got[~np.isnan(got)]
    assert (finite >= -1e-12).all() and (finite <= 1 + 1e-12).all()
    n_cut = len(CUTS)
    for u, (ranked, scores, targets, _) in enumerate(units):
        relevant = {i for i, g in targets.items() if g > 0}
        for c, k in enumerate(CUTS):
            precision = got[u, kernel_column("precision", c, n_cut)]
            recall = got[u, kernel_column("recall", c, n_cut)]
            if ties == "first" or not with_scores:
                order = ranked if not with_scores else [i for _, i in sorted(zip([-s for s in scores], ranked))]
                assert math.isclose(precision * k, len(relevant & set(order[:k])), abs_tol=1e-9)
            if relevant:
                assert math.isclose(recall * len(relevant), precision * k, abs_tol=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_perfect_ranking_scores_one(data):
    gains = data.draw(st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=1, max_size=5))
    non = data.draw(st.integers(0, 3))
    targets = {i: g for i, g in enumerate(gains)} | {len(gains) + j: 0.0 for j in range(non)}
    ranked = sorted(range(len(gains)), key=lambda i: -gains[i]) + [len(gains) + j for j in range(non)]
    k = len(gains)
    got = ranking_values(rankings_of([ranked]), targets_of([targets], 10), [k])
    for name in CUTOFF:
        assert math.isclose(got[0, kernel_column(name, 0, 1)], 1.0), name
    if non:
        assert math.isclose(got[0, kernel_column("auc", 0, 1)], 1.0)


@settings(max_examples=300, deadline=None)
@given(batch(), st.data())
def test_moving_a_relevant_item_above_a_non_relevant_neighbour_never_hurts(data, draw):
    units, full, _, options = data
    ranked, _, targets, n_target = units[0]
    swaps = [j for j in range(1, len(ranked))
             if targets.get(ranked[j], 0) > 0 and targets.get(ranked[j - 1], 0) <= 0]
    if not swaps:
        return
    j = draw.draw(st.sampled_from(swaps))
    better = ranked[: j - 1] + [ranked[j], ranked[j - 1]] + ranked[j + 1:]
    before = _kernel([(ranked, [], targets, n_target)], full, False, options, "first")
    after = _kernel([(better, [], targets, n_target)], full, False, options, "first")
    n_cut = len(CUTS)
    for name in ("precision", "recall", "ap", "ndcg", "rr", "hit", "auc"):
        for c in range(n_cut if name != "auc" else 1):
            col = kernel_column(name, c, n_cut)
            b, a = before[0, col], after[0, col]
            assert np.isnan(b) or a >= b - 1e-12, (name, c)


def test_ideal_of_long_target_lists_matches_reference():
    """nDCG and half-life ideals over target sets shorter and longer than the kernel sorts by
    insertion (64 gains): every unit against the reference, gains in random order."""
    rng = np.random.default_rng(7)
    units, lists = [], []
    for size in (3, 63, 64, 65, 300):
        items = rng.permutation(400)[:size]
        gains = rng.choice([0.0, 1.0, 2.0, 3.5, 5.0], size=size)
        units.append(dict(zip(items.tolist(), gains.tolist())))
        lists.append(rng.permutation(400)[:30].tolist())
    cuts = [1, 10, 30, 100]
    options = {"gain": "exp", "half_life": 5.0, "neutral": 1.5}
    got = ranking_values(rankings_of(lists), targets_of(units, 400), cuts, **options)
    for u, (ranked, targets) in enumerate(zip(lists, units)):
        for c, k in enumerate(cuts):
            expected = unit_metrics(ranked, None, targets, k, **options)
            for name in ("ndcg", "half_life"):
                value = got[u, kernel_column(name, c, len(cuts))]
                assert close(value, expected[name]), (name, k, len(targets), value, expected[name])
