"""Benchmark: the beyond-accuracy families (issue 30) at ML-25M size, in the same pass as the accuracy
metrics.

The input of bench_metrics.py (162,541 users x top-100 lists over 59,047 items, ~30 relevant test
items per user), with a seeded train side (~100 items per user from the same Zipf-like popularity)
and 20 genres (1-3 per item). Timed: measure() with the accuracy metrics alone (P, R, AP, nDCG, RR,
hit at six cutoffs, AUC), then with the beyond-accuracy ones added in the same call (calibration,
ARP, APLT, ACLT, PopRSP, PopREO, EPC, EFD, surprisal, unexpectedness, serendipity, novelty, ILD,
Gini); the difference is what they add (issue 30's bar: less than the accuracy metrics cost). The
first call (numba compile or cache load) is timed apart on 1,000 users. Each time is the best of
``--repeat`` runs, in wall seconds and in the process's CPU seconds (all threads): on a loaded
machine the CPU time is the steadier measure of the work, and the beyond/accuracy ratio is taken of
CPU times measured in the same process, one after the other. Peak RSS at the end (benchmarks/peak.py).

    uv run python benchmarks/bench_beyond.py [--users 162541] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).parent))
from bench_metrics import CUTS, METRICS, N_ITEMS, N_USERS, TRAIN_MEAN, subsample, synthetic, timed  # noqa: E402
from peak import report_peak  # noqa: E402

from recsys_eval.core.interactions import Interactions  # noqa: E402
from recsys_eval.measure import measure  # noqa: E402

BEYOND = ["calibration", "arp", "aplt", "aclt", "pop_rsp", "pop_reo", "epc", "efd", "surprisal",
          "unexpectedness", "serendipity", "novelty", "ild", "gini"]
GENRES = 20


def train_and_genres(n_users: int, seed: int = 43) -> tuple[Interactions, np.ndarray]:
    """~TRAIN_MEAN distinct train items per user from a Zipf-like popularity, and item genres."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, N_ITEMS + 1) ** 0.8
    item_of_rank = rng.permutation(N_ITEMS)
    draws = rng.poisson(TRAIN_MEAN, n_users).clip(1)
    user = np.repeat(np.arange(n_users, dtype=np.int64), draws)
    item = item_of_rank[rng.choice(N_ITEMS, size=len(user), p=popularity / popularity.sum())]
    keys = np.unique(user * N_ITEMS + item)
    frame = pl.DataFrame({"user": (keys // N_ITEMS).astype(np.int32), "item": (keys % N_ITEMS).astype(np.int32)})
    train = Interactions(frame, pl.Series("user_id", np.arange(n_users)), pl.Series("item_id", np.arange(N_ITEMS)),
                         source="bench train")
    genres = np.zeros((N_ITEMS, GENRES), dtype=bool)
    for extra in range(3):  # 1 to 3 genres per item
        chosen = rng.random(N_ITEMS) < (1.0 if extra == 0 else 0.4)
        genres[np.flatnonzero(chosen), rng.integers(0, GENRES, int(chosen.sum()))] = True
    return train, genres


def timed_cpu(call, repeat: int = 1) -> tuple[float, float]:
    """Best wall and best CPU seconds (every thread of the process) of ``repeat`` calls."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        wall, cpu = min(wall, time.perf_counter() - start), min(cpu, time.process_time() - start_cpu)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=N_USERS)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=".*AUC reads every candidate")  # top-100 lists, as bench_metrics

    start = time.perf_counter()
    rankings, targets = synthetic(n_users=args.users)
    train, genres = train_and_genres(args.users)
    print(f"input: {rankings.n_units:,} users x top-{rankings.lengths.max()}, {len(train):,} train pairs, "
          f"{GENRES} genres; made in {time.perf_counter() - start:.1f} s")
    extra = dict(train=train, genres=genres)

    small_r, small_t = subsample(rankings, targets, min(1000, args.users))
    first = timed(lambda: measure(small_r, small_t, metrics=METRICS + BEYOND, k=CUTS, **extra))
    print(f"first call on 1,000 users (numba compile or cache load): {first:.2f} s")

    accuracy, accuracy_cpu = timed_cpu(lambda: measure(rankings, targets, metrics=METRICS, k=CUTS), args.repeat)
    both, both_cpu = timed_cpu(lambda: measure(rankings, targets, metrics=METRICS + BEYOND, k=CUTS, **extra),
                               args.repeat)
    print(f"accuracy metrics alone ({len(METRICS)} at {len(CUTS)} cutoffs): {accuracy:.2f} s "
          f"(cpu {accuracy_cpu:.2f} s)")
    print(f"accuracy + beyond-accuracy ({len(BEYOND)} more) in one measure(): {both:.2f} s (cpu {both_cpu:.2f} s)")
    print(f"beyond-accuracy added: {both - accuracy:.2f} s, cpu {both_cpu - accuracy_cpu:.2f} s")
    print(f"beyond/accuracy ratio: cpu {(both_cpu - accuracy_cpu) / accuracy_cpu:.2f}x, wall "
          f"{(both - accuracy) / accuracy:.2f}x (issue 30's bar: < 1x)")
    for name in BEYOND:  # each one's share, for finding the costly one
        alone, alone_cpu = timed_cpu(
            lambda name=name: measure(rankings, targets, metrics=[name], k=CUTS, **extra), args.repeat)
        print(f"  {name:<16}{alone:>8.2f} s alone (cpu {alone_cpu:.2f} s)")
    print(f"load average {os.getloadavg()[0]:.1f}")
    report_peak()


if __name__ == "__main__":
    main()
