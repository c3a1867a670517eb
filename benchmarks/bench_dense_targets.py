"""Benchmark: ranking dense target sets (AI+1R+AN: every unit lists nearly every item).

Under 1R+AN each relevant test item of a user is one unit whose targets are all the user's
candidates but the other relevant items, so a user with 30 relevant items has 30 units of ~9,700
items each on ml-latest-small. recsys_eval scores one block per user, sorts it once and reads every
unit off that order. Peers in the same run, on the same fitted model and targets:

- "score pairs, sort each unit": gather every listed pair's score from the user blocks and sort
  each unit's slice (a numba per-unit argsort; what recsys_eval did before);
- "per-unit numpy loop": for each unit, take the user's score row at its items and ``np.lexsort``
  by (-score, item), the straightforward approach.

Data: ml-latest-small from ``RECSYS_EVAL_DATA`` when it is there, else a seeded synthetic input of
the same size. 80/20 per-user holdout, relevant = rating >= 4; ALS (64 factors) and popularity. The
loop runs on ``--loop-units`` units and is extrapolated linearly.

    RECSYS_EVAL_DATA=../shared/datasets uv run python benchmarks/bench_dense_targets.py
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from recsys_eval.errors import DataError
from recsys_eval.recommend import Recommender, make_recommender, rank_targets
from recsys_eval.recommend.base import _sorted_rankings
from recsys_eval.split import make_split
from recsys_eval.targets import build_targets


def load() -> tuple[object, str]:
    from recsys_eval.data import load_dataset

    from synthetic import synthetic_interactions

    try:
        return load_dataset("ml-latest-small", download=False), "ml-latest-small"
    except DataError:
        return synthetic_interactions(610, 9_742, 100_836, seed=0), "synthetic (ml-latest-small size)"


def sort_each_unit(model: Recommender, targets) -> object:
    pair_user = np.repeat(targets.unit_user, np.diff(targets.offsets))
    scores = Recommender.score(model, pair_user, targets.items)
    return _sorted_rankings(targets, scores)


def numpy_loop(model: Recommender, targets, units: np.ndarray) -> None:
    rows = {}
    for u in units:
        user = int(targets.unit_user[u])
        if user not in rows:
            rows[user] = model.score_block(np.array([user], dtype=np.int32))[0]
        items = targets.items[targets.offsets[u]:targets.offsets[u + 1]]
        items[np.lexsort((items, -rows[user][items]))]


def best_of(repeat: int, fn) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--loop-units", type=int, default=1000)
    args = parser.parse_args()
    data, source = load()
    split = make_split(data, "holdout", fraction=0.2, per_user=True, seed=0)
    targets = build_targets(split, "AI+1R+AN", threshold=4.0)
    print(f"{source}: {targets.n_units:,} AI+1R+AN units, {len(targets.items):,} listed items")
    from synthetic import synthetic_interactions

    start = time.perf_counter()
    tiny = make_split(synthetic_interactions(50, 40, 1000, seed=1), "holdout", fraction=0.2, per_user=True, seed=1)
    warm = make_recommender("popular", {}).fit(tiny.train)
    small = build_targets(tiny, "AI+1R+AN", threshold=4.0)
    rank_targets(warm, small)
    sort_each_unit(warm, small)
    print(f"numba kernels: first calls {time.perf_counter() - start:.2f} s (compile, or load from cache)")
    for name, params in (("als", {"factors": 64, "iterations": 15}), ("popular", {})):
        model = make_recommender(name, params, seed=0, threads=2).fit(split.train)
        ours_s, ours = best_of(args.repeat, lambda: rank_targets(model, targets))
        sort_s, theirs = best_of(args.repeat, lambda: sort_each_unit(model, targets))
        assert np.array_equal(ours.items, theirs.items) and np.array_equal(ours.offsets, theirs.offsets)
        units = np.random.default_rng(0).choice(targets.n_units, min(args.loop_units, targets.n_units), replace=False)
        loop_s, _ = best_of(1, lambda: numpy_loop(model, targets, np.sort(units)))
        loop_s *= targets.n_units / len(units)
        print(f"{name:>8}: recsys_eval {ours_s:6.2f} s | score pairs + sort each unit {sort_s:6.2f} s "
              f"({sort_s / ours_s:4.1f}x) | per-unit numpy loop {loop_s:7.2f} s extrapolated ({loop_s / ours_s:5.1f}x)")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
