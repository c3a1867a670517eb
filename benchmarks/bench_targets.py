"""Benchmark: target-item protocols for every user, recsys_eval beside a per-user numpy loop.

Inputs: a seeded synthetic split of MovieLens-25M size (162,541 users, 59,047 items, about 25M
interactions, Zipf-like item popularity, an ML-like rating distribution, 20% of every user's
interactions held out) and the largest MovieLens ratings file at hand under ``RECSYS_EVAL_DATA``.

For AI+1R+NN100 and TI+AR+NN100 (threshold 4.0), and for reference AI+AR+NN100 and AI+AR+AN, it
prints the build time (best of ``--repeat``), the peak traced memory (tracemalloc, a separate run),
and the same for a straightforward loop over users (``np.setdiff1d`` of the candidates, then
``Generator.choice`` without replacement, then sort): on large inputs the loop runs on a seeded
subsample of users and its time is extrapolated linearly to all users, as printed.

    RECSYS_EVAL_DATA=/work/shared/datasets uv run python benchmarks/bench_targets.py
"""

from __future__ import annotations

import argparse
import io
import os
import resource
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import polars as pl

from recsys_eval.core import Interactions, Split
from recsys_eval.targets import Protocol, build_targets

PROTOCOLS = ["AI+1R+NN100", "TI+AR+NN100", "AI+AR+NN100", "AI+AR+AN"]
LOOPED = {"AI+1R+NN100", "TI+AR+NN100"}
THRESHOLD = 4.0
# Shares of the ten half-star ratings, close to MovieLens-25M's (about half of ratings are >= 4).
RATING_SHARES = np.array([1.6, 3.1, 1.6, 6.6, 5.0, 19.6, 12.7, 26.6, 8.5, 14.7])


def synthetic_split(seed: int = 0, n_users: int = 162_541, n_items: int = 59_047,
                    n_interactions: int = 25_000_000, test_share: float = 0.2) -> Split:
    """A seeded ML-25M-size split: log-normal user activity (at least 20), Zipf-like popularity."""
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    activity = np.maximum(20.0, rng.lognormal(4.2, 1.0, n_users))
    activity = np.minimum(activity * n_interactions / activity.sum(), n_items // 3).astype(np.int64)
    popularity = 1.0 / np.arange(1, n_items + 1) ** 0.9
    item_of_rank = rng.permutation(n_items).astype(np.int32)
    draws = (activity * 1.25).astype(np.int64)  # repeats are merged away below
    users = np.repeat(np.arange(n_users, dtype=np.int32), draws)
    cdf = np.cumsum(popularity) / popularity.sum()
    items = item_of_rank[np.minimum(np.searchsorted(cdf, rng.random(len(users))), n_items - 1)]
    matrix = sp.csr_matrix((np.ones(len(users), np.float32), (users, items)), shape=(n_users, n_items))
    matrix.sum_duplicates()
    users = np.repeat(np.arange(n_users, dtype=np.int32), np.diff(matrix.indptr))
    ratings = rng.choice(np.arange(1, 11) / 2, len(users), p=RATING_SHARES / RATING_SHARES.sum())
    frame = pl.DataFrame({"user": users, "item": matrix.indices, "rating": ratings.astype(np.float32)})
    return holdout(Interactions.from_frame(frame, source="synthetic"), test_share, seed, "synthetic")


def holdout(data: Interactions, share: float, seed: int, name: str) -> Split:
    """Round(share x n_u) random interactions of every user to test (vectorised, seeded)."""
    rng = np.random.default_rng(seed + 1)
    users = data.users
    order = np.argsort(users + rng.random(len(users)), kind="stable")  # by user, random within
    counts = np.bincount(users, minlength=data.n_users)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    position = np.empty(len(users), np.int64)
    position[order] = np.arange(len(users)) - starts[users[order]]
    is_test = pl.Series(position < np.round(share * counts)[users])
    train, test = data.frame.filter(~is_test), data.frame.filter(is_test)
    return Split(data.with_frame(train), data.with_frame(test), name)


def movielens_split(data_home: Path) -> Split | None:
    """The largest MovieLens ratings file present, split 80/20 per user; None if none is."""
    candidates = [
        ("ml-latest-small.zip", "ml-latest-small/ratings.csv", ","),
        ("ml-100k/u.data", None, "\t"),
    ]
    for path, member, sep in candidates:
        source = data_home / path
        if not source.exists():
            continue
        if member:
            with zipfile.ZipFile(source) as archive:
                frame = pl.read_csv(io.BytesIO(archive.read(member)))
            frame = frame.rename({"userId": "user", "movieId": "item"})
        else:
            frame = pl.read_csv(source, separator=sep, has_header=False,
                                new_columns=["user", "item", "rating", "timestamp"])
        data = Interactions.from_frame(frame, source=str(source))
        return holdout(data, 0.2, 0, f"{path} ({len(data):,} ratings)")
    return None


def per_user_loop(split: Split, protocol: Protocol, users: np.ndarray, seed: int = 0) -> int:
    """The straightforward implementation: per user, set differences then ``rng.choice``."""
    rng = np.random.default_rng(seed)
    train = split.train.csr()
    test = split.test.csr("rating")
    all_items = np.arange(split.n_items, dtype=np.int32)
    pool = all_items if protocol.candidates == "AI" else np.unique(split.test.items)
    units = []
    for u in users:
        seen = train.indices[train.indptr[u]:train.indptr[u + 1]]
        te_items = test.indices[test.indptr[u]:test.indptr[u + 1]]
        te_ratings = test.data[test.indptr[u]:test.indptr[u + 1]]
        if len(te_items) == 0:
            continue
        relevant = te_items[te_ratings >= THRESHOLD]
        available = np.setdiff1d(pool, np.union1d(seen, relevant), assume_unique=True)
        negatives = rng.choice(available, size=min(protocol.n, len(available)), replace=False)
        if protocol.relevant == "AR":
            units.append(np.sort(np.concatenate([relevant, negatives])))
        else:
            units.extend(np.sort(np.append(negatives, item)) for item in relevant)
    return len(units)


def best_time(run, repeat: int) -> tuple[float, object]:
    """The best of ``repeat`` timed runs, and the last run's result."""
    times, result = [], None
    for _ in range(repeat):
        result = None  # free the previous result first
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def peak_mb(run) -> float:
    tracemalloc.start()
    result = run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    del result
    return peak / 2**20


def bench(split: Split, repeat: int, loop_users: int) -> None:
    n_users = int((np.diff(split.test.csr().indptr) > 0).sum())
    print(f"\n== {split.name}: {split.n_users:,} users x {split.n_items:,} items; train "
          f"{len(split.train):,}, test {len(split.test):,} rows ({n_users:,} test users); "
          f"relevance threshold {THRESHOLD}")
    split.train.csr(), split.test.csr("rating")  # cached index structures, shared by all stages
    header = (f"{'protocol':<13}{'units':>11}{'listed':>14}{'recsys_eval s':>15}{'peak MB':>9}"
              f"{'loop s':>10}{'loop users':>12}{'loop peak MB':>14}{'ratio':>8}")
    print(header)
    rng = np.random.default_rng(5)
    for name in PROTOCOLS:
        protocol = Protocol.parse(name)
        ours, targets = best_time(lambda: build_targets(split, protocol, threshold=THRESHOLD), repeat)
        units, listed = targets.n_units, len(targets.items)
        del targets
        memory = peak_mb(lambda: build_targets(split, protocol, threshold=THRESHOLD))
        line = f"{name:<13}{units:>11,}{listed:>14,}{ours:>15.3f}{memory:>9.0f}"
        if name in LOOPED:
            all_users = np.arange(split.n_users)
            sample = all_users if loop_users >= split.n_users else np.sort(
                rng.choice(all_users, loop_users, replace=False))
            start = time.perf_counter()
            per_user_loop(split, protocol, sample)
            loop = (time.perf_counter() - start) * split.n_users / len(sample)
            loop_memory = peak_mb(lambda: per_user_loop(split, protocol, sample))
            shown = "all" if len(sample) == split.n_users else f"{len(sample):,}*"
            line += f"{loop:>10.2f}{shown:>12}{loop_memory:>14.0f}{loop / ours:>8.0f}x"
        print(line)
    print("* the loop ran on a seeded sample of users; its time is scaled to all users "
          "(its peak memory is the sample's)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per protocol (best kept)")
    parser.add_argument("--loop-users", type=int, default=4000, help="users the loop runs on (large inputs)")
    parser.add_argument("--skip-synthetic", action="store_true")
    args = parser.parse_args()

    tiny = synthetic_split(n_users=50, n_items=40, n_interactions=1000)
    start = time.perf_counter()
    for name in PROTOCOLS:
        build_targets(tiny, name, threshold=THRESHOLD)
    print(f"numba kernels: first calls {time.perf_counter() - start:.2f} s (compile, or load from cache)")
    if not args.skip_synthetic:
        start = time.perf_counter()
        split = synthetic_split()
        print(f"synthetic input made in {time.perf_counter() - start:.1f} s")
        bench(split, args.repeat, args.loop_users)
        del split
    data_home = Path(os.environ.get("RECSYS_EVAL_DATA", ""))
    movielens = movielens_split(data_home) if data_home.name else None
    if movielens is None:
        print("\nno MovieLens file under RECSYS_EVAL_DATA: skipped")
    else:
        bench(movielens, args.repeat, loop_users=movielens.n_users)
    print(f"\nprocess peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:,.0f} MB")


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
