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
from recsys_eval.errors import ConfigError, DataError


def full_sums(n_negatives, n_candidates, metric, k, gamma, model, a=None):
    """The paper's objective solved with the whole N x (n + 1) matrix: the slow obvious reference."""
    full = np.arange(1, n_candidates + 1)
    a = rank_distribution(full, n_negatives, n_candidates, model) if a is None else a
    f = rank_metric(full, metric, k, n_candidates)
    gram = (1 - gamma) * a.T @ a + gamma * np.diag(a.sum(axis=0))
    return np.linalg.solve(gram, a.T @ f), a, f


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
    binomial = rank_distribution(np.arange(1, 101), 10, 100, "binomial")
    assert binomial.sum(axis=1) == pytest.approx(np.ones(100))
    assert binomial[:, 3] == pytest.approx([
        10 * 9 * 8 / 6 * p**3 * (1 - p) ** 7 for p in np.arange(100) / 99
    ])


def test_rank_metrics_of_one_relevant_item():
    ranks = np.array([1, 3, 10, 11])
    assert rank_metric(ranks, "hit", 10, 100).tolist() == [1, 1, 1, 0]
    assert rank_metric(ranks, "precision", 10, 100) == pytest.approx([0.1, 0.1, 0.1, 0])
    assert rank_metric(ranks, "ndcg", 10, 100) == pytest.approx([1, 0.5, 1 / np.log2(11), 0])
    assert rank_metric(ranks, "rr", None, 100) == pytest.approx([1, 1 / 3, 0.1, 1 / 11])
    assert rank_metric(ranks, "auc", None, 101) == pytest.approx([1, 0.98, 0.91, 0.9])
    assert rank_metric(ranks, "auc", None, np.array([101, 101, 11, 21])) == pytest.approx([1, 0.98, 0.1, 0.5])
    with pytest.raises(ConfigError, match="needs a cutoff"):
        rank_metric(ranks, "hit", None, 100)


def test_rescaling_maps_sampled_ranks_onto_the_full_range():
    # r = 1 stays 1; r = n + 1 (last) maps to N; AUC is unchanged by rescaling
    got = sampled_correction(np.array([1, 2, 11]), 10, 1001, "rr", None, method="rescale")
    assert got == pytest.approx([1, 1 / 101, 1 / 1001])
    auc = sampled_correction(np.array([1, 5, 11]), 10, 1001, "auc", method="rescale")
    assert auc == pytest.approx(sampled_correction(np.array([1, 5, 11]), 10, 1001, "auc", method="sampled"))
    per_unit = sampled_correction(np.array([2, 2, 11]), 10, np.array([1001, 101, 51]), "rr", None, method="rescale")
    assert per_unit == pytest.approx([1 / 101, 1 / 11, 1 / 51])


@pytest.mark.parametrize("model", ["hypergeometric", "binomial"])
@pytest.mark.parametrize(
    ("n_negatives", "n_candidates"), [(5, 7), (20, 45), (20, 300), (30, 2000), (10, 20000), (40, 12000)]
)
def test_quadrature_gives_the_full_sums_solution(model, n_negatives, n_candidates):
    a = rank_distribution(np.arange(1, n_candidates + 1), n_negatives, n_candidates, model)
    for metric, k in [("hit", 10), ("ndcg", 10), ("ap", 700), ("rr", None), ("ndcg", None), ("auc", None), ("recall", None)]:
        expected = full_sums(n_negatives, n_candidates, metric, k, 0.01, model, a)[0]
        got = corrected_values(n_negatives, n_candidates, metric, k, gamma=0.01, model=model)
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-11), (metric, k)


@pytest.mark.parametrize("gamma", [0.003, 0.01, 0.3, 1.0])
def test_corrected_values_minimise_the_papers_objective(gamma):
    n_items, n_negatives = 60, 5
    got = corrected_values(n_negatives, n_items, "ndcg", 10, gamma=gamma)
    _, a, f = full_sums(n_negatives, n_items, "ndcg", 10, gamma, "hypergeometric")

    def objective(g):
        expected = a @ g
        variance = a @ g**2 - expected**2
        return np.sum((expected - f) ** 2) + gamma * np.sum(variance)

    rng = np.random.default_rng(0)
    assert all(objective(got) <= objective(got + 1e-3 * rng.normal(size=got.size)) for _ in range(20))
    if gamma == 1.0:  # the posterior mean of f(R) given the sampled rank, uniform prior on R
        assert got == pytest.approx(a.T @ f / a.sum(axis=0))
        assert got.min() >= 0 and got.max() <= 1


def test_per_unit_candidate_counts():
    rng = np.random.default_rng(3)
    ranks = rng.integers(1, 22, 500)
    counts = rng.choice([300, 1000, 4321], 500)
    for metric, k in [("ndcg", 10), ("rr", None), ("auc", None)]:
        for method in ("sampled", "rescale", "bias_variance"):
            same = sampled_correction(ranks, 20, np.full(500, 1000), metric, k, method=method)
            assert same == pytest.approx(sampled_correction(ranks, 20, 1000, metric, k, method=method))
            mixed = sampled_correction(ranks, 20, counts, metric, k, method=method)
            for n in (300, 1000, 4321):
                unit = counts == n
                assert mixed[unit] == pytest.approx(sampled_correction(ranks[unit], 20, n, metric, k, method=method))
    table = corrected_values(20, 4321, "ndcg", 10)
    assert not table.flags.writeable  # cached: a caller cannot change it for the next one


def simulate(rng, n_candidates, n_negatives, full_ranks):
    """Sampled ranks drawn as the NN protocol draws them: n of the N - 1 negatives without
    replacement (random keys, the n smallest); the negatives 0..R-2 are those ranked above."""
    keys = rng.random((full_ranks.size, n_candidates - 1))
    sample = np.argpartition(keys, n_negatives, axis=1)[:, :n_negatives]
    return 1 + (sample < (full_ranks - 1)[:, None]).sum(axis=1)


def rank_laws(n_candidates):
    """Full-rank distributions of plausible systems: power laws R^-a and uniform over a top share."""
    full = np.arange(1, n_candidates + 1)
    laws = {f"power {a}": full**-a for a in (0.5, 0.8, 1.0)}
    laws |= {f"top {share}": (full <= share * n_candidates).astype(float) for share in (0.02, 0.2, 1.0)}
    return {name: p / p.sum() for name, p in laws.items()}


METRICS = [("hit", 10), ("ndcg", 10), ("rr", None), ("precision", 5)]


@pytest.mark.parametrize(("metric", "k"), METRICS)
def test_each_estimators_bias_as_the_paper_says(metric, k):
    """Exact expectations E[g(r)] = sum_R p(R) sum_r P(r | R) g(r) for known full-rank laws p."""
    n_candidates, n_negatives = 3000, 100
    full = np.arange(1, n_candidates + 1)
    a = rank_distribution(full, n_negatives, n_candidates)
    truth_per_rank = rank_metric(full, metric, k, n_candidates)
    sampled_ranks = np.arange(1, n_negatives + 2)
    estimators = {
        method: sampled_correction(sampled_ranks, n_negatives, n_candidates, metric, k, method=method)
        for method in ("sampled", "rescale", "bias_variance")
    }
    for law in rank_laws(n_candidates).values():
        truth = law @ truth_per_rank
        bias = {name: law @ a @ g - truth for name, g in estimators.items()}
        # in expectation every estimate lies within the metric's range (one unit's need not)
        assert all(0 <= law @ a @ g <= truth_per_rank.max() for g in estimators.values())
        # the sampled rank never exceeds the full rank: a top-heavy metric is overestimated
        assert bias["sampled"] > 0.01 * max(truth, 0.01)
        assert abs(bias["rescale"]) < bias["sampled"]
        assert abs(bias["bias_variance"]) < 0.5 * bias["sampled"]
    # AUC alone is unbiased under sampling (E[r - 1 | R] = n (R - 1)/(N - 1))
    auc = sampled_correction(sampled_ranks, n_negatives, n_candidates, "auc", method="sampled")
    assert a @ auc == pytest.approx(rank_metric(full, "auc", None, n_candidates))


def test_simulated_sampling_confirms_the_biases_and_orders_systems_like_the_full_ranking():
    rng = np.random.default_rng(7)
    n_candidates, n_negatives, units = 2000, 50, 1500
    full_values = {m: {} for m in METRICS}
    estimates = {m: {e: {} for e in ("sampled", "rescale", "bias_variance")} for m in METRICS}
    for name, law in rank_laws(n_candidates).items():
        full_ranks = rng.choice(np.arange(1, n_candidates + 1), units, p=law)
        sampled_ranks = simulate(rng, n_candidates, n_negatives, full_ranks)
        assert (sampled_ranks <= full_ranks).all()
        for metric, k in METRICS:
            full_values[metric, k][name] = rank_metric(full_ranks, metric, k, n_candidates).mean()
            for method in estimates[metric, k]:
                per_unit = sampled_correction(sampled_ranks, n_negatives, n_candidates, metric, k, method=method)
                estimates[metric, k][method][name] = per_unit.mean()
        auc = sampled_correction(sampled_ranks, n_negatives, n_candidates, "auc", method="sampled")
        truth = rank_metric(full_ranks, "auc", None, n_candidates)
        assert auc.mean() == pytest.approx(truth.mean(), abs=4 * auc.std() / np.sqrt(units))
    for key, full in full_values.items():
        error = {e: np.mean([(v[s] - full[s]) ** 2 for s in full]) for e, v in estimates[key].items()}
        assert error["bias_variance"] < error["rescale"] < error["sampled"], key
        agreement = ordering_agreement(full, estimates[key]["sampled"], estimates[key]["bias_variance"])
        assert agreement["corrected"] >= agreement["sampled"], key


def test_binomial_and_hypergeometric_models_agree_when_few_items_are_sampled():
    close = [corrected_values(10, 50000, "ndcg", 10, model=m) for m in ("hypergeometric", "binomial")]
    assert close[0] == pytest.approx(close[1], abs=1e-3 * np.abs(close[0]).max())
    far = [corrected_values(100, 150, "ndcg", 10, model=m) for m in ("hypergeometric", "binomial")]
    assert np.abs(far[0] - far[1]).max() > 0.05
    # sampling 100 of 149 without replacement: the exact model is the less biased one
    full = np.arange(1, 151)
    truth = rank_metric(full, "ndcg", 10, 150)
    exact = rank_distribution(full, 100, 150, "hypergeometric")
    bias = [np.sum((exact @ g - truth) ** 2) for g in far]
    assert bias[0] < bias[1]


def test_bad_input():
    with pytest.raises(DataError, match="integers in 1..11"):
        sampled_correction(np.array([0, 3]), 10, 100, "hit", 5)
    with pytest.raises(ConfigError, match="n_negatives < n_candidates"):
        sampled_correction(np.array([1]), 10, 10, "hit", 5)
    with pytest.raises(DataError, match="unit 1 has 10 candidates; expected more than n_negatives 10"):
        sampled_correction(np.array([1, 2]), 10, np.array([100, 10]), "hit", 5)
    with pytest.raises(DataError, match=r"one integer per sampled rank, shape \(2,\)"):
        sampled_correction(np.array([1, 2]), 10, np.array([100, 100, 100]), "hit", 5)
    with pytest.raises(ConfigError, match="did you mean 'ndcg'"):
        sampled_correction(np.array([1]), 10, 100, "ndgc", 5)
    with pytest.raises(ConfigError, match="unknown correction method 'minimal_bias'"):
        sampled_correction(np.array([1]), 10, 100, "hit", 5, method="minimal_bias")
    with pytest.raises(ConfigError, match="gamma 0.0: expected a number in"):
        corrected_values(10, 100, "hit", 5, gamma=0.0)
    with pytest.raises(ConfigError, match="needs a cutoff"):
        corrected_values(10, 100, "hit", None)


def test_metrics_added_through_their_specs_are_corrected_too():
    """R-precision (1R: hit@1) and RBP come with their closed forms: rank_metric reads them from the
    registry, RBP's persistence among its params, and the quadrature matches the full sums."""
    ranks = np.array([1, 2, 3, 10, 11])
    assert rank_metric(ranks, "rprecision", None, 100).tolist() == [1, 0, 0, 0, 0]
    assert rank_metric(ranks, "rbp", 10, 100) == pytest.approx([0.2 * 0.8 ** (r - 1) * (r <= 10) for r in ranks])
    half = rank_metric(ranks, "rbp", None, 100, {"rbp_persistence": 0.5})
    assert half == pytest.approx([0.5**r for r in ranks])
    with pytest.raises(ConfigError, match="rbp_persistence"):
        rank_metric(ranks, "rbp", 10, 100, {"rbp_persistence": 1.5})
    for n_negatives, n_candidates in [(20, 300), (30, 2000)]:
        a = rank_distribution(np.arange(1, n_candidates + 1), n_negatives, n_candidates, "hypergeometric")
        for metric, k in [("rprecision", None), ("rbp", 10), ("rbp", None)]:
            expected = full_sums(n_negatives, n_candidates, metric, k, 0.01, "hypergeometric", a)[0]
            got = corrected_values(n_negatives, n_candidates, metric, k, gamma=0.01)
            assert got == pytest.approx(expected, rel=1e-9, abs=1e-11), (metric, k)
    persistent = sampled_correction(ranks, 20, 300, "rbp", 10, params={"rbp_persistence": 0.9})
    assert not np.allclose(persistent, sampled_correction(ranks, 20, 300, "rbp", 10))
