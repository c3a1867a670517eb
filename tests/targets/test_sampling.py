import numpy as np
import pytest
from scipy.stats import chisquare

from recsys_eval.core.sorting import sort_items
from recsys_eval.targets import build_targets
from recsys_eval.targets.sampling import alias_table, stream_state, uniform

from .reference import make_split, unit_slices


def identical_users(n_users, n_items, train_items, test_item):
    """Users who all trained on ``train_items`` and hold ``test_item`` in test, so that every user
    samples from the same set C(u) \\ Rel(u); one more user trained on every item, so that all
    ``n_items`` items are in the index."""
    train = [(u, i, 3.0) for u in range(n_users) for i in train_items]
    train += [(n_users, i, 3.0) for i in range(n_items)]
    test = [(u, test_item, 5.0) for u in range(n_users)]
    return make_split(train, test)


def sampled_counts(targets, n_items):
    counts = np.zeros(n_items, dtype=np.int64)
    np.add.at(counts, targets.items[targets.gain == 0], 1)
    return counts


@pytest.mark.parametrize(
    "n_items, n_train, n",
    [
        (80, 5, 10),  # light exclusions: rejection sampling only
        (300, 280, 8),  # heavy exclusions: the draw budget runs out, exponential keys finish
        (40, 5, 30),  # the sample is most of what is available
    ],
)
def test_nn_samples_are_uniform(n_items, n_train, n):
    # one unit per user; train items are the last ones, so the available items are 0..n_avail-1
    n_users = 1500
    train_items = list(range(n_items - n_train, n_items))
    split = identical_users(n_users, n_items, train_items, test_item=0)
    targets = build_targets(split, f"AI+AR+NN{n}", seed=2024)
    available = np.arange(1, n_items - n_train)
    counts = sampled_counts(targets, n_items)
    assert counts.sum() == n_users * n
    assert counts[train_items].sum() == 0 and counts[0] == 0
    result = chisquare(counts[available])
    assert result.pvalue > 0.01, result


def test_nn_pairs_are_uniform():
    # without replacement: every pair of the 12 available items is equally likely in a 2-sample
    n_users = 3000
    split = identical_users(n_users, 14, [13], test_item=0)
    targets = build_targets(split, "AI+AR+NN2", seed=7)
    pairs = targets.items[targets.gain == 0].reshape(-1, 2)
    assert np.all(pairs[:, 0] < pairs[:, 1])
    codes = (pairs[:, 0] - 1) * 12 + (pairs[:, 1] - 1)
    counts = np.bincount(codes, minlength=144).reshape(12, 12)[np.triu_indices(12, 1)]
    assert chisquare(counts).pvalue > 0.01


def test_popularity_sampling_draws_in_proportion_to_training_counts():
    # items 1..9 are trained on by 1..9 other users: a 1-sample picks item i with p proportional to i
    n_users = 4000
    others = [(n_users + j, i, 3.0) for i in range(1, 10) for j in range(i)]
    split = make_split(others, [(u, 0, 5.0) for u in range(n_users)])
    targets = build_targets(split, "AI+AR+NN1", seed=3, sampling="popularity")
    counts = sampled_counts(targets, 10)[1:]
    weights = np.arange(1, 10)
    assert counts.sum() == n_users
    assert chisquare(counts, weights / weights.sum() * n_users).pvalue > 0.01
    assert chisquare(counts).pvalue < 1e-6  # far from uniform
    uniform_counts = sampled_counts(build_targets(split, "AI+AR+NN1", seed=3), 10)[1:]
    assert chisquare(uniform_counts).pvalue > 0.01


def test_popularity_sampling_never_draws_items_unseen_in_training():
    split = make_split([(5, 1, 3.0), (5, 2, 3.0)], [(0, 0, 5.0), (0, 3, 1.0), (5, 4, 2.0)])
    targets = build_targets(split, "AI+AR+NN10", sampling="popularity")
    for _, u, items, gains in unit_slices(targets):
        negatives = {i for i, g in zip(items, gains) if g == 0}
        assert negatives <= {1, 2, 3, 4}
        assert not negatives & {0, 3, 4}  # items 0, 3, 4 have no training interaction


def test_stream_numbers_are_uniform_and_keyed():
    def first(seed, user, key, counter=0):
        return uniform(np.uint64(stream_state(np.uint64(seed), user, key)), counter)

    values = np.array([first(9, 4, -1, c) for c in range(20000)])
    assert 0 < values.min() and values.max() < 1
    assert chisquare(np.bincount((values * 20).astype(int), minlength=20)).pvalue > 0.01
    assert first(9, 4, -1) == values[0]
    assert len({first(9, 4, -1), first(9, 5, -1), first(9, 4, 0), first(10, 4, -1)}) == 4


@pytest.mark.parametrize("n, bits", [(0, 8), (5, 8), (23, 16), (24, 16), (100, 16), (1000, 20), (300, 31)])
def test_radix_sort_matches_numpy(n, bits):
    rng = np.random.default_rng(n)
    values = rng.integers(0, 2**bits, n).astype(np.int32)
    tail = np.array([7, 3, 5], dtype=np.int32)
    work = np.concatenate([values, tail])
    sort_items(work, n, bits, np.empty(n + 1, np.int32), np.zeros(257, np.int64))
    assert np.array_equal(work[:n], np.sort(values))
    assert np.array_equal(work[n:], tail)  # only the first n entries are sorted


def test_alias_table_reproduces_the_weights():
    weights = np.array([1.0, 5.0, 0.5, 3.5, 10.0])
    prob, alias = alias_table(weights)
    implied = prob.copy()
    np.add.at(implied, alias, 1.0 - prob)
    assert np.allclose(implied / len(weights), weights / weights.sum())
