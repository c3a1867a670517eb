"""Benchmark: what the per-user distributions and two slices add to the analysis of one part.

A part of the analysis is one (fold, protocol): the users x (system, metric, k) matrix read once
from its per-unit files (:mod:`recsys_eval.compare.parts`). Synthetic per-user nDCG-like values
(zero for 40% of users, else Beta(2, 5)) for ``--users`` users (default ML-1M's 6,040),
``--systems`` systems and cutoffs 5, 10, 20, laid out as that matrix. Timed, best of ``--repeat``,
each as the analysis runs it on the matrix: the paired tests it already runs (the ML-1M study's t,
Wilcoxon and permutation against a baseline, 1,000 resamples: :func:`partition_tests`), then the
distributions (numpy's sort of each column: :meth:`SortedValues.of_columns`, its summary and the
report's curves) and the slices activity:4 and cold:20 (means, and the one paired test per group of
:func:`slice_test_options`: :func:`slice_tables`). Target (issue 31): distributions and slices add
under 10% to the ML-1M study; this prints their share of the part's analysis.

    uv run python benchmarks/bench_diagnostics.py [--users 6040]
"""

from __future__ import annotations

import argparse

import numpy as np
import polars as pl
from bench_load import best
from peak import report_peak

from recsys_eval.compare.distributions import CurveMeans, SortedValues
from recsys_eval.compare.frames import Partition, partitions
from recsys_eval.compare.paired import partition_tests
from recsys_eval.compare.slices import slice_tables, slice_test_options


def part(n_users: int, n_systems: int, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    frames = []
    for k in (5, 10, 20):
        values = np.where(rng.random((n_systems, n_users)) < 0.4, 0.0, rng.beta(2, 5, (n_systems, n_users)))
        frames.append(pl.DataFrame({
            "system": np.repeat([f"s{i}" for i in range(n_systems)], n_users), "protocol": "AI+AR+AN", "fold": "0",
            "user": np.tile(np.arange(n_users, dtype=np.int64), n_systems), "metric": "ndcg",
            "k": pl.Series(np.full(n_users * n_systems, k), dtype=pl.Int32), "value": values.ravel()}))
    return pl.concat(frames)


def slices(n_users: int, seed: int = 1) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    counts = rng.lognormal(3.5, 1.0, n_users).astype(np.int64) + 16
    edges = np.quantile(counts, [0.25, 0.5, 0.75])
    activity = np.searchsorted(np.unique(edges), counts, side="right")
    users = np.arange(n_users, dtype=np.int64)
    return pl.concat([
        pl.DataFrame({"fold": "0", "user": users, "slice": "activity:4", "group": [f"Q{a + 1}" for a in activity],
                      "order": pl.Series(activity, dtype=pl.Int32)}),
        pl.DataFrame({"fold": "0", "user": users, "slice": "cold:20", "group": np.where(counts < 20, "cold", "warm"),
                      "order": pl.Series((counts >= 20).astype(np.int32))}),
    ])


def distributions(matrix: Partition) -> None:
    """The analysis's distributions of a part: one sort of every column, its summary and curves."""
    groups = SortedValues.of_columns(matrix, np.arange(matrix.columns.height))
    groups.summary()
    CurveMeans(["0"]).add(groups)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=6040)
    parser.add_argument("--systems", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    matrix, groups = partitions(part(args.users, args.systems))[0], slices(args.users)
    options = {"baseline": "s0", "tests": ["t", "wilcoxon", "permutation"], "n_resamples": 1000}
    every_column = [np.arange(matrix.columns.height)]  # every system has every cutoff: one group
    tests = best(lambda: partition_tests(matrix, **options), args.repeat)
    dist = best(lambda: distributions(matrix), args.repeat)
    sliced = best(lambda: slice_tables(matrix, ["ndcg"], groups, every_column, **slice_test_options(options)),
                  args.repeat)
    print(f"{args.users:,} users x {args.systems} systems x 3 cutoffs (best of {args.repeat})")
    print(f"paired tests (the analysis without diagnostics): {tests:.3f} s")
    print(f"distributions: {dist:.3f} s ({dist / tests:.0%} of the tests)")
    print(f"slices activity:4 + cold:20 (means and tests per group): {sliced:.3f} s ({sliced / tests:.0%})")
    report_peak()


if __name__ == "__main__":
    main()
