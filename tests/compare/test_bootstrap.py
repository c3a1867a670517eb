"""The blocked bootstrap (recsys_eval.compare.bootstrap): its draw is a multinomial resample of the
users (closed forms: Binomial block totals, the Multinomial(n; 1/n) pmf of whole count vectors), its
states merge in any order to the same bits, and its intervals agree with scipy's bootstrap."""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from recsys_eval.compare import confidence_intervals
from recsys_eval.compare.bootstrap import BlockCounts, Resampled, ResamplePlan, bootstrap_columns, bounds, user_blocks
from recsys_eval.core.exact import VALUE_SCALE

from .conftest import user_frame


def _blocks(users: np.ndarray, block_users: int) -> list[tuple[int, np.ndarray]]:
    blocks = user_blocks(users, block_users)
    return [(int(b), np.flatnonzero(blocks == b)) for b in np.unique(blocks)]


def _counts(users: np.ndarray, n_resamples: int, seed: int, block_users: int) -> np.ndarray:
    """Each replicate's count of every user (replicates x users), read off the replicate sums of
    the identity matrix (column u is 1 for user u, 0 for the others: its sum is u's count)."""
    values = np.eye(len(users))
    parts = _blocks(users, block_users)
    counts = BlockCounts.merge([BlockCounts.of(values[rows], b) for b, rows in parts])
    plan = ResamplePlan(counts, n_resamples, seed)
    sums = Resampled.merge([plan.resample(values[rows], b) for b, rows in parts]).exact_sums()
    return np.array([[int(s) >> VALUE_SCALE for s in row] for row in sums])


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), block_users=st.integers(1, 9), seed=st.integers(0, 2**32 - 1),
       gap=st.integers(1, 5))
def test_every_replicate_draws_n_users(n, block_users, seed, gap):
    users = np.arange(n, dtype=np.int64) * gap  # ids with gaps: blocks of unequal sizes, some empty
    counts = _counts(users, 20, seed, block_users)
    assert (counts.sum(axis=1) == n).all() and (counts >= 0).all()


def test_block_totals_are_binomial():
    # 10 users in blocks of 4, 4, 2: a block's total over 4000 replicates ~ Binomial(10, m_b / 10)
    users = np.arange(10, dtype=np.int64)
    counts = _counts(users, 4000, 7, 4)
    for block, m in ((0, 4), (1, 4), (2, 2)):
        totals = counts[:, 4 * block: 4 * block + m].sum(axis=1)
        observed = np.bincount(totals, minlength=11)
        expected = stats.binom.pmf(np.arange(11), 10, m / 10) * len(totals)
        keep = expected > 5  # chi-square cells with enough expected counts, the tail pooled
        pooled_obs = np.r_[observed[keep], observed[~keep].sum()]
        pooled_exp = np.r_[expected[keep], expected[~keep].sum()]
        assert stats.chisquare(pooled_obs, pooled_exp).pvalue > 1e-3


def test_whole_count_vectors_follow_the_multinomial():
    # three users, ids 5, 70000 and 70001 (blocks 0 and 1 of the default size): each of the 10
    # count vectors of 3 draws has probability 3! / (c1! c2! c3!) / 27
    users = np.array([5, 70000, 70001], dtype=np.int64)
    counts = _counts(users, 6000, 11, 1 << 16)
    vectors = [c for c in product(range(4), repeat=3) if sum(c) == 3]
    index = {c: i for i, c in enumerate(vectors)}
    observed = np.bincount([index[tuple(c)] for c in counts], minlength=len(vectors))
    pmf = np.array([math.factorial(3) / math.prod(math.factorial(x) for x in c) / 27 for c in vectors])
    assert stats.chisquare(observed, pmf * len(counts)).pvalue > 1e-3
    # and users are exchangeable: every user's mean count is 1
    assert counts.mean(axis=0) == pytest.approx([1, 1, 1], abs=0.05)


def test_states_merge_to_the_same_bits_in_any_order():
    rng = np.random.default_rng(3)
    values = rng.random((300, 3))
    values[rng.random((300, 3)) < 0.1] = np.nan
    users = np.sort(rng.choice(5000, 300, replace=False)).astype(np.int64)
    parts = _blocks(users, 256)
    whole = bootstrap_columns(values, users, n_resamples=200, seed=5, level=0.9, method="bca", block_users=256)
    # pass 1 of a block split across two tasks adds up; the tasks' states merge in reverse order
    halves = [BlockCounts.of(values[rows[: len(rows) // 2]], b) for b, rows in parts if len(rows) > 1]
    halves += [BlockCounts.of(values[rows[len(rows) // 2:]], b) for b, rows in parts]
    counts = BlockCounts.merge(halves[::-1])
    plan = ResamplePlan(counts, 200, 5)
    resampled = Resampled.merge([plan.resample(values[rows], b) for b, rows in parts[::-1]])
    merged = bounds(counts, resampled, level=0.9, method="bca")
    for a, b in zip(whole, merged, strict=True):
        assert np.array_equal(a, b, equal_nan=True)
    # the mean is the exact mean of the defined values, rounded once
    assert whole[0] == pytest.approx(np.nanmean(values, axis=0), rel=1e-15)


def test_one_blocks_doubles_give_the_exact_sums_bits():
    # a block alone keeps its replicate sums as doubles; divided by n they are the exact path's means
    rng = np.random.default_rng(4)
    values = rng.random((120, 2)) ** 3
    values[::7, 1] = np.nan
    counts = BlockCounts.of(values, 0)
    alone = ResamplePlan(counts, 300, 9).resample(values, 0)
    exact = Resampled(None, alone.exact_sums(), alone.squares, alone.cubes)
    assert np.array_equal(alone.means(counts.n), exact.means(counts.n))
    for a, b in zip(bounds(counts, alone, level=0.95, method="bca"), bounds(counts, exact, level=0.95, method="bca"),
                    strict=True):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("block_users", [7, 1 << 16])
@pytest.mark.parametrize("method", ["bca", "percentile", "basic"])
def test_intervals_close_to_scipy_bootstrap(rng, block_users, method):
    a = rng.exponential(size=200)
    a[:12] = np.nan
    mean, lower, upper = bootstrap_columns(a[:, None], np.arange(200), n_resamples=4000, seed=2, level=0.9,
                                           method=method, block_users=block_users)
    kept = a[~np.isnan(a)]
    ref = stats.bootstrap((kept,), np.mean, n_resamples=4000, rng=7, confidence_level=0.9,
                          method=method).confidence_interval
    width = ref.high - ref.low
    assert lower[0] == pytest.approx(ref.low, abs=0.08 * width)
    assert upper[0] == pytest.approx(ref.high, abs=0.08 * width)


def test_percentile_intervals_cover_the_mean_as_the_plain_bootstrap_does():
    # 300 normal samples of 40 users, blocks of 8: the 90% percentile interval covers the true mean
    # 0 as often as the textbook bootstrap (n uniform indices per replicate) does on the same
    # samples, about 84% (the percentile bootstrap undercovers at n = 40)
    rng = np.random.default_rng(17)
    covered = plain = 0
    for trial in range(300):
        x = rng.normal(size=(40, 1))
        _, lower, upper = bootstrap_columns(x, np.arange(40), n_resamples=300, seed=trial, level=0.9,
                                            method="percentile", block_users=8)
        covered += lower[0] <= 0.0 <= upper[0]
        means = x[np.random.default_rng(trial).integers(0, 40, (300, 40)), 0].mean(axis=1)
        low, high = np.quantile(means, [0.05, 0.95])
        plain += low <= 0.0 <= high
    assert 0.78 <= covered / 300 <= 0.93
    assert abs(covered - plain) / 300 <= 0.05


def test_a_column_is_resampled_alike_whatever_its_neighbours():
    # the same values give the same interval alone or beside other systems' columns
    rng = np.random.default_rng(8)
    a, b = rng.random(90), rng.random(90)
    b[::4] = np.nan
    both = confidence_intervals(user_frame({"a": a, "b": b}), method="bootstrap", n_resamples=300, seed=4)
    alone = confidence_intervals(user_frame({"a": a}), method="bootstrap", n_resamples=300, seed=4)
    assert both.filter(pl.col("system") == "a").drop("system").equals(alone.drop("system"))


def test_text_ids_are_blocked_by_rank():
    users = np.array(["a", "b", "c", "d", "e"], dtype=object)
    assert user_blocks(users, 2).tolist() == [0, 0, 1, 1, 2]
    assert user_blocks(np.array([-3, 0, 7, 8], dtype=np.int64), 4).tolist() == [-1, 0, 1, 2]


def test_columns_resample_the_same_users_and_threads_change_no_bit(monkeypatch):
    from recsys_eval.compare import bootstrap

    rng = np.random.default_rng(2)
    x = rng.normal(size=300)
    values = np.c_[x, 2 * x, rng.random(300)]  # a column twice another stays so in every replicate
    counts, serial = bootstrap.resample_columns(values, np.arange(300), n_resamples=400, seed=4, block_users=64)
    means = serial.means(counts.n)
    assert np.array_equal(means[:, 1], 2 * means[:, 0])
    assert means[:, 0].std() == pytest.approx(x.std() / math.sqrt(300), rel=0.1)
    monkeypatch.setattr(bootstrap, "SERIAL_DRAWS", 0)  # every block's replicates on the thread pool
    _, pooled = bootstrap.resample_columns(values, np.arange(300), n_resamples=400, seed=4, block_users=64)
    assert np.array_equal(pooled.means(counts.n), means)
