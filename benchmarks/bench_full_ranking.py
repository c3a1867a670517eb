"""Full ranking: ALS top-100 of every unseen item for every user, in user chunks.

Beside implicit's own batched ``model.recommend`` (the peer), on the largest MovieLens file at hand
and on a seeded synthetic ML-25M-size input. Prints times, ratios and peak memory.
Run: RECSYS_EVAL_DATA=../shared/datasets uv run python benchmarks/bench_full_ranking.py [--synthetic-only]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_interactions  # noqa: E402

from recsys_eval.data import load_dataset  # noqa: E402
from recsys_eval.errors import DataError  # noqa: E402
from recsys_eval.recommend import make_recommender, recommend_top_k  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(name: str, data, factors: int, iterations: int, chunk: int) -> None:
    print(f"\n{name}: {data.n_users:,} users x {data.n_items:,} items, {len(data):,} interactions")
    model = make_recommender("als", {"factors": factors, "iterations": iterations}, seed=0)
    start = time.perf_counter()
    model.fit(data)
    print(f"  fit ALS ({factors} factors, {iterations} iterations)   {time.perf_counter() - start:8.2f} s")
    users = np.arange(data.n_users, dtype=np.int32)
    recommend_top_k(model, data, users[:10], 100)  # numba compile or cache load
    start = time.perf_counter()
    ours = recommend_top_k(model, data, users, 100, chunk_size=chunk)
    t_ours = time.perf_counter() - start
    print(f"  recsys_eval recommend_top_k (chunk {chunk})   {t_ours:8.2f} s   peak RSS so far {peak_rss_mb():,.0f} MB")
    start = time.perf_counter()
    with threadpool_limits(1, "blas"):
        ids, scores = model.model.recommend(users, data.csr()[users], N=100, filter_already_liked_items=True)
    t_peer = time.perf_counter() - start
    print(f"  implicit model.recommend (batched)         {t_peer:8.2f} s   peak RSS so far {peak_rss_mb():,.0f} MB")
    print(f"  ratio implicit / recsys_eval: {t_peer / t_ours:.2f}x")
    same = np.mean([
        set(ours.items[ours.offsets[u]:ours.offsets[u + 1]].tolist()) == set(ids[u][ids[u] >= 0].tolist())
        for u in range(0, data.n_users, max(1, data.n_users // 2000))
    ])
    print(f"  same top-100 sets as implicit on sampled users: {same:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--synthetic-only", action="store_true")
    parser.add_argument("--chunk", type=int, default=1024)
    args = parser.parse_args()
    if not args.synthetic_only:
        for name in ("ml-latest-small", "ml-100k"):
            try:
                run(name, load_dataset(name, download=False), 64, 15, args.chunk)
                break
            except DataError as exc:
                print(f"{name}: not at hand ({exc})")
    start = time.perf_counter()
    data = synthetic_interactions(seed=0)
    print(f"\nsynthetic input made in {time.perf_counter() - start:.1f} s")
    run("synthetic ML-25M size", data, 32, 3, args.chunk)
    print(f"\npeak RSS of the whole run: {peak_rss_mb():,.0f} MB (target for full ranking: < 4,096 MB)")


if __name__ == "__main__":
    main()
