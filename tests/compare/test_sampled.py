from itertools import combinations

import numpy as np
import pytest

from recsys_eval.compare import (
    corrected_values,
    ordering_agreement,
    rank_distribution,
    rank_metric,
    sampled_correction,
)
from recsys_eval.compare import sampled as sampled_module
from recsys_eval.errors import ConfigError, DataError


def test_hypergeometric_rank_distribution_matches_enumerating_every_sample():
    n_items, n_negatives = 8, 3
    negatives = n_items - 1
    for full_rank in range(1, n_items + 1):
        above = full_rank - 1  # negatives ranked above the relevant item
        counts = np.zeros(n_negatives + 1)
        for sample in combinations(range(negatives), n_negatives):
            counts[sum(item < above for item in sample)] += 1
        expected = counts / counts.sum()
        got = rank_distribution(np.array([full_rank]), n_negatives, n_items, "hypergeometric")[0]
        assert got == pytest.approx(expected)
    binomial = rank_distribution(np.arange(1, 101), 10, 100)
    assert binomial.sum(axis=1) == pytest.approx(np.ones(100))


def test_rank_metrics_of_one_relevant_item():
    ranks = np.array([1, 3, 10, 11])
    assert rank_metric(ranks, "hit", 10, 100).tolist() == [1, 1, 1, 0]
    assert rank_metric(ranks, "precision", 10, 100) == pytest.approx([0.1, 0.1, 0.1, 0])
    assert rank_metric(ranks, "ndcg", 10, 100) == pytest.approx([1, 0.5, 1 / np.log2(11), 0])
    assert rank_metric(ranks, "rr", None, 100) == pytest.approx([1, 1 / 3, 0.1, 1 / 11])
    assert rank_metric(ranks, "auc", None, 101) == pytest.approx([1, 0.98, 0.91, 0.9])
    with pytest.raises(ConfigError, match="needs a cutoff"):
        rank_metric(ranks, "hit", None, 100)


def test_rescaling_maps_sampled_ranks_onto_the_full_range():
    # r = 1 stays 1; r = n + 1 (last) maps to N; AUC is unchanged by rescaling
    got = sampled_correction(np.array([1, 2, 11]), 10, 1001, "rr", None, method="rescale")
    assert got == pytest.approx([1, 1 / 101, 1 / 1001])
    auc = sampled_correction(np.array([1, 5, 11]), 10, 1001, "auc", method="rescale")
    assert auc == pytest.approx(sampled_correction(np.array([1, 5, 11]), 10, 1001, "auc", method="sampled"))


@pytest.mark.parametrize("gamma", [0.0, 0.01, 0.3, 1.0])
def test_corrected_values_solve_the_papers_objective_with_the_whole_matrix(monkeypatch, gamma):
    monkeypatch.setattr(sampled_module, "BLOCK", 7)  # stream the full ranks in many blocks
    n_items, n_negatives = 60, 5
    full = np.arange(1, n_items + 1)
    a = rank_distribution(full, n_negatives, n_items)
    f = rank_metric(full, "ndcg", 10, n_items)
    got = corrected_values(n_negatives, n_items, "ndcg", 10, method="bias_variance", gamma=gamma)

    def objective(g):
        expected = a @ g
        variance = a @ g**2 - expected**2
        return np.sum((expected - f) ** 2) + gamma * np.sum(variance)

    rng = np.random.default_rng(0)
    assert all(objective(got) <= objective(got + 1e-3 * rng.normal(size=got.size)) for _ in range(20))
    if gamma == 1.0:  # the posterior mean of f(R) given the sampled rank, uniform prior on R
        assert got == pytest.approx(a.T @ f / a.sum(axis=0))
    if gamma == 0.0:
        assert got == pytest.approx(np.linalg.lstsq(a, f, rcond=None)[0], rel=1e-6, abs=1e-8)
        assert corrected_values(n_negatives, n_items, "ndcg", 10, method="minimal_bias") == pytest.approx(got)


def simulate(rng, n_items, n_negatives, units, p_top, spread):
    """Full ranks mixing a head (ranks 1..10 with probability p_top) and a uniform body over the top
    ``spread`` share of the items; sampled ranks drawn as the NN protocol draws them, without replacement."""
    top = rng.random(units) < p_top
    full = np.where(top, rng.integers(1, 11, units), rng.integers(1, int(n_items * spread) + 1, units))
    sampled = 1 + rng.hypergeometric(full - 1, n_items - full, n_negatives)
    return full, sampled


SYSTEMS = [(0.3, 1.0), (0.2, 0.5), (0.1, 0.2), (0.0, 0.1), (0.05, 0.05), (0.25, 0.8)]


@pytest.mark.parametrize(("metric", "k"), [("hit", 10), ("ndcg", 10), ("rr", None), ("precision", 5)])
def test_corrected_estimates_are_closer_to_full_and_order_systems_like_it(metric, k):
    rng = np.random.default_rng(7)
    n_items, n_negatives = 3000, 100
    table = corrected_values(n_negatives, n_items, metric, k)
    wins, agreement = 0, {"sampled": [], "corrected": []}
    for _ in range(3):
        full, raw, corrected = {}, {}, {}
        for i, (p_top, spread) in enumerate(SYSTEMS):
            full_ranks, sampled_ranks = simulate(rng, n_items, n_negatives, 3000, p_top, spread)
            full[i] = rank_metric(full_ranks, metric, k, n_items).mean()
            raw[i] = sampled_correction(sampled_ranks, n_negatives, n_items, metric, k, method="sampled").mean()
            corrected[i] = table[sampled_ranks - 1].mean()
        mse_raw = np.mean([(raw[i] - full[i]) ** 2 for i in full])
        mse_corrected = np.mean([(corrected[i] - full[i]) ** 2 for i in full])
        wins += mse_corrected < mse_raw
        for key, value in ordering_agreement(full, raw, corrected).items():
            agreement[key].append(value)
    assert wins == 3
    assert np.mean(agreement["corrected"]) > np.mean(agreement["sampled"])


def test_bad_input():
    with pytest.raises(DataError, match="integers in 1..11"):
        sampled_correction(np.array([0, 3]), 10, 100, "hit", 5)
    with pytest.raises(ConfigError, match="n_negatives < n_items"):
        sampled_correction(np.array([1]), 10, 10, "hit", 5)
    with pytest.raises(ConfigError, match="did you mean 'ndcg'"):
        sampled_correction(np.array([1]), 10, 100, "ndgc", 5)
    with pytest.raises(ConfigError, match="gamma"):
        corrected_values(10, 100, "hit", 5, gamma=2.0)
