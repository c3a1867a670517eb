from itertools import combinations

import numpy as np
import pytest

from recsys_eval.errors import ConfigError
from recsys_eval.targets import build_targets, expected_random, protocol_summary

from .reference import make_split


@pytest.mark.parametrize("t", range(1, 8))
def test_closed_form_matches_enumeration(t):
    for r in range(t + 1):
        for k in range(1, t + 3):
            shown = min(k, t)
            tops = list(combinations(range(t), shown))  # relevant items are 0..r-1
            hits = np.array([sum(i < r for i in top) for top in tops])
            precision, hit = expected_random(np.array([t]), np.array([r]), k)
            assert precision[0] == pytest.approx(hits.mean() / k)
            assert hit[0] == pytest.approx((hits > 0).mean())


def test_sampled_protocol_closed_form():
    precision, hit = expected_random(np.array([101, 101]), np.array([1, 1]), 10)
    assert precision.tolist() == pytest.approx([1 / 101] * 2)
    assert hit.tolist() == pytest.approx([10 / 101] * 2)


def random_split(seed=0, n_users=1500, n_items=400):
    rng = np.random.default_rng(seed)
    popularity = rng.zipf(1.6, n_items).astype(float)
    cells = np.argwhere(rng.random((n_users, n_items)) < 0.08 * popularity / popularity.mean())
    ratings = rng.integers(1, 6, len(cells)).astype(float)
    is_test = rng.random(len(cells)) < 0.3
    rows = list(zip(cells[:, 0].tolist(), cells[:, 1].tolist(), ratings.tolist()))
    return make_split([r for r, t in zip(rows, is_test) if not t], [r for r, t in zip(rows, is_test) if t])


def random_recommender_listed(targets, k, rng):
    """P@k and hit@k per unit of a recommender that scores every listed target at random."""
    unit = np.repeat(np.arange(targets.n_units), np.diff(targets.offsets))
    order = np.lexsort((rng.random(len(unit)), unit))
    rank = np.arange(len(unit)) - targets.offsets[unit[order]]
    hits = np.bincount(unit[order][rank < k], weights=(targets.gain[order] > 0)[rank < k],
                       minlength=targets.n_units)
    return hits / k, (hits > 0).astype(float)


def random_recommender_full(targets, split, k, rng):
    """The same over every candidate: random scores for users x items, training items and
    non-candidates never ranked."""
    scores = rng.random((split.n_users, split.n_items))
    scores[split.train.users, split.train.items] = -np.inf
    if targets.candidates is not None:
        scores[:, ~targets.candidates] = -np.inf
    top = np.argsort(-scores[targets.unit_user], axis=1)[:, :k]
    ranked = np.take_along_axis(scores[targets.unit_user], top, axis=1) > -np.inf
    relevant = np.zeros((targets.n_units, split.n_items), dtype=bool)
    unit = np.repeat(np.arange(targets.n_units), np.diff(targets.offsets))
    relevant[unit, targets.items] = True
    hits = (np.take_along_axis(relevant, top, axis=1) & ranked).sum(axis=1)
    return hits / k, (hits > 0).astype(float)


@pytest.mark.parametrize("name", ["AI+AR+AN", "TI+AR+AN", "TI+AR+NN50", "AI+1R+NN20", "UT+AR+AN"])
def test_random_recommender_meets_the_closed_form(name):
    split = random_split()
    targets = build_targets(split, name, threshold=4, seed=1)
    ks = [1, 5, 10]
    summary = protocol_summary(targets, ks)
    rng = np.random.default_rng(99)
    for k in ks:
        row = summary.filter(summary["k"] == k).row(0, named=True)
        expected_p, expected_h = expected_random(targets.sizes, targets.n_relevant, k)
        if targets.all_candidates:
            p, h = random_recommender_full(targets, split, k, rng)
        else:
            p, h = random_recommender_listed(targets, k, rng)
        for realised, expected, mean in ((p, expected_p, row["expected_precision_units"]),
                                         (h, expected_h, row["expected_hit_units"])):
            assert mean == pytest.approx(expected.mean())
            error = np.std(realised - expected, ddof=1) / np.sqrt(len(realised))
            assert abs(realised.mean() - mean) < 4 * error + 1e-12, (name, k, realised.mean(), mean)


def test_summary_columns_and_macro_mean_over_users():
    # user 0 has two 1R units of sizes 3 and 3, user 1 one unit of size 3: macro = micro here
    split = make_split([(0, 0, 3), (1, 1, 3), (2, 5, 3), (2, 6, 3)],
                       [(0, 1, 5), (0, 2, 5), (1, 0, 5), (2, 3, 1), (2, 4, 1)])
    targets = build_targets(split, "UT+1R+NN2", threshold=4)
    assert targets.sizes.tolist() == [1, 1, 1]  # u0 and u1 have no non-relevant test item
    ai = build_targets(split, "AI+1R+NN2", threshold=4)
    summary = protocol_summary(ai, [1, 2])
    assert summary.columns == [
        "protocol", "k", "units", "users", "mean_size", "min_size", "max_size", "mean_relevant",
        "expected_precision", "expected_hit", "expected_precision_units", "expected_hit_units",
    ]
    first = summary.row(0, named=True)
    assert (first["units"], first["users"], first["mean_size"], first["mean_relevant"]) == (3, 2, 3.0, 1.0)
    assert first["expected_precision"] == pytest.approx(1 / 3)
    assert summary.row(1, named=True)["expected_hit"] == pytest.approx(2 / 3)
    # AR with unequal units: macro over users weighs each user once
    ar = build_targets(split, "UT+AR+AN", threshold=4)  # u0: {1,2} both relevant; u1: {0}; u2: 2 non-relevant
    row = protocol_summary(ar, [1]).row(0, named=True)
    assert row["expected_precision"] == pytest.approx((1 + 1 + 0) / 3)
    assert row["min_size"] == 1 and row["max_size"] == 2


def test_summary_rejects_bad_cutoffs():
    split = make_split([(0, 0, 3)], [(0, 1, 5)])
    with pytest.raises(ConfigError, match="cutoffs"):
        protocol_summary(build_targets(split, "AI+AR+AN"), [0, 5])
