"""Benchmark: Krichene & Rendle's correction of 2.5M sampled ranks with each user's own candidate count.

ML-25M-sized AI+1R+NN100 (seeded synthetic): 59,047 items, 162,541 users whose train sizes follow a
log-normal law (median ~70, clipped to 16..26,000, as ML-25M's activity), 2.5M units spread over the
users in proportion to their train size; unit u of user v has N = 59,047 - train(v) candidates and a
sampled rank drawn in 1..101. recsys_eval: ``sampled_correction`` per metric and method, cold (every
distinct N solved) and warm (a second system: the tables come from the cache). Peer: the obvious
exact computation, the whole N x 101 matrix A = P(r | R) built and A'A, A'f solved per distinct N
(what the module did for its one N before), timed on a few N and extrapolated to all distinct N.
Run: uv run python benchmarks/bench_sampled.py [--units N] [--peer-counts M]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
from scipy import linalg
from threadpoolctl import threadpool_limits

from recsys_eval.compare import rank_distribution, rank_metric, sampled_correction
from recsys_eval.compare.sampled import DEFAULT_GAMMA, _corrected

ITEMS, USERS, NEGATIVES = 59_047, 162_541, 100


def synthetic(units: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    train = np.clip(np.round(rng.lognormal(np.log(70), 1.1, USERS)), 16, 26_000).astype(np.int64)
    owner = rng.choice(USERS, units, p=train / train.sum())
    ranks = rng.integers(1, NEGATIVES + 2, units)
    return ranks, ITEMS - train[owner]


def full_matrix_table(n_candidates: int, metric: str, k: int | None) -> np.ndarray:
    full = np.arange(1, n_candidates + 1)
    a = rank_distribution(full, NEGATIVES, n_candidates)
    gram = (1 - DEFAULT_GAMMA) * a.T @ a + DEFAULT_GAMMA * np.diag(a.sum(axis=0))
    return linalg.solve(gram, a.T @ rank_metric(full, metric, k, n_candidates), assume_a="pos")


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--units", type=int, default=2_500_000)
    parser.add_argument("--peer-counts", type=int, default=4)
    args = parser.parse_args()
    ranks, counts = synthetic(args.units)
    distinct = np.unique(counts)
    print(f"{args.units:,} units, {USERS:,} users, {ITEMS:,} items, n = {NEGATIVES}: "
          f"{distinct.size:,} distinct candidate counts in [{distinct.min():,}, {distinct.max():,}]")
    cold = {}
    for metric, k in (("ndcg", 10), ("rr", None)):
        label = metric if k is None else f"{metric}@{k}"
        for method in ("sampled", "rescale"):
            elapsed, _ = timed(sampled_correction, ranks, NEGATIVES, counts, metric, k, method=method)
            print(f"  {label:<8} {method:<14} {elapsed:8.2f} s")
        _corrected.cache_clear()
        cold[metric, k], values = timed(sampled_correction, ranks, NEGATIVES, counts, metric, k)
        warm, again = timed(sampled_correction, ranks, NEGATIVES, counts, metric, k)
        assert np.array_equal(values, again)
        print(f"  {label:<8} bias_variance  {cold[metric, k]:8.2f} s cold "
              f"({1e3 * cold[metric, k] / distinct.size:.1f} ms per N), {warm:.2f} s warm (cached tables)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:,.0f} MB (inputs: {(ranks.nbytes + counts.nbytes) / 2**20:.0f} MB)")
    sample = np.random.default_rng(1).choice(distinct, args.peer_counts, replace=False)
    for (metric, k), ours in cold.items():
        with threadpool_limits(1, "blas"):
            peer = sum(timed(full_matrix_table, int(n), metric, k)[0] for n in sample) / sample.size
            for n in sample[:2]:  # the same tables, to rounding
                exact = full_matrix_table(int(n), metric, k)
                got = _corrected(NEGATIVES, int(n), metric, k, DEFAULT_GAMMA, "hypergeometric")
                assert np.allclose(got, exact, rtol=1e-8, atol=1e-11)
        print(f"  {metric if k is None else f'{metric}@{k}':<8} peer: full N x 101 matrix per N, "
              f"{1e3 * peer:.0f} ms per N -> {peer * distinct.size:,.0f} s for all (x{peer * distinct.size / ours:.0f} ours)")


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
