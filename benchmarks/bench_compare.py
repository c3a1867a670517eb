"""Benchmark: bootstrap intervals and permutation tests for ML-25M-sized comparisons.

162,541 users x 10 systems (seeded synthetic per-user nDCG@10-like values: zero for 40% of users,
else Beta-distributed, each system a little better than the last), 1,000 resamples. recsys_eval:
bootstrap intervals for every system's mean, and the randomization test of every system against a
baseline. Peer: scipy.stats.bootstrap and scipy.stats.permutation_test called naively, once per
system or pair, timed on a subsample of users and extrapolated linearly (both are linear in users
for these settings). Run: uv run python benchmarks/bench_compare.py [--users N] [--peer-users M]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import polars as pl
from scipy import stats

from recsys_eval.compare import confidence_intervals, paired_tests


def synthetic(n_users: int, n_systems: int, seed: int = 0) -> tuple[pl.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    values = np.where(rng.random((n_users, n_systems)) < 0.4, 0.0, rng.beta(2, 5, (n_users, n_systems)))
    values += np.linspace(0.0, 0.02, n_systems)
    frame = pl.DataFrame(
        {
            "system": np.repeat([f"s{i}" for i in range(n_systems)], n_users),
            "protocol": "AI+AR+AN",
            "fold": "0",
            "user": np.tile(np.arange(n_users, dtype=np.int64), n_systems),
            "metric": "ndcg",
            "k": pl.Series(np.full(n_users * n_systems, 10), dtype=pl.Int32),
            "value": values.T.ravel(),
        }
    )
    return frame, values


def timed(label: str, fn, *args, **kwargs) -> float:
    start = time.perf_counter()
    fn(*args, **kwargs)
    elapsed = time.perf_counter() - start
    print(f"  {label:<58} {elapsed:8.2f} s")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=162_541)
    parser.add_argument("--systems", type=int, default=10)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--peer-users", type=int, default=16_254)
    args = parser.parse_args()
    n, b = args.users, args.resamples

    frame, values = synthetic(n, args.systems)
    print(f"{n:,} users x {args.systems} systems, {b:,} resamples ({args.systems - 1} pairs against s0)")

    print("recsys_eval")
    timed("numba compile or cache load (tiny input, once per process)", confidence_intervals,
          frame.head(50), method="bootstrap", n_resamples=10)
    boot = timed("bootstrap CIs, BCa, every system", confidence_intervals, frame, method="bootstrap", n_resamples=b)
    boot_pct = timed("bootstrap CIs, percentile, every system", confidence_intervals, frame, method="bootstrap",
                     bootstrap_method="percentile", n_resamples=b)
    perm = timed("permutation tests, every system vs s0", paired_tests, frame, baseline="s0",
                 tests=("permutation",), n_resamples=b)
    print(f"  {'bootstrap (BCa) + permutation':<58} {boot + perm:8.2f} s   (target < 10 s)")
    timed("t intervals, every system", confidence_intervals, frame)
    timed("all default tests (t, wilcoxon, sign, permutation) vs s0", paired_tests, frame, baseline="s0")

    m = min(args.peer_users, n)
    scale = n / m
    sub = values[:m]
    print(f"scipy.stats, naive per system / pair, on {m:,} users, extrapolated x{scale:.1f}")
    start = time.perf_counter()
    for s in range(args.systems):
        stats.bootstrap((sub[:, s],), np.mean, n_resamples=b, method="percentile", rng=s)
    peer_boot = (time.perf_counter() - start) * scale
    print(f"  {'bootstrap (percentile), every system':<58} {peer_boot:8.2f} s")
    start = time.perf_counter()
    for s in range(1, args.systems):
        stats.permutation_test((sub[:, s], sub[:, 0]), lambda x, y, axis: np.mean(x - y, axis=axis),
                               vectorized=True, permutation_type="samples", n_resamples=b, rng=s)
    peer_perm = (time.perf_counter() - start) * scale
    print(f"  {'permutation_test, every system vs s0':<58} {peer_perm:8.2f} s")

    print("ratios (scipy / recsys_eval)")
    print(f"  bootstrap, percentile: {peer_boot / boot_pct:6.1f}x   permutation: {peer_perm / perm:6.1f}x   "
          f"both: {(peer_boot + peer_perm) / (boot_pct + perm):6.1f}x")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
