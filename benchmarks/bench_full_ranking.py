"""Full ranking: ALS top-100 of every unseen item for every user, in user chunks.

Beside implicit's own batched ``model.recommend(userids, user_items, N=100,
filter_already_liked_items=True)`` (the peer, run with BLAS at its default threads and limited to
one, the faster counted; on small inputs each timing is the best of 3), on the MovieLens files at hand (ml-latest-small, ml-100k) and on a seeded
synthetic ML-25M-size input (162,541 users, 59,047 items, 25M interactions). Prints times, ratios
and memory: the peak resident memory during each ranking (sampled every 5 ms), the peak of
tracemalloc's traced allocations (numpy) during it, and the process's peak RSS (getrusage).

Run: RECSYS_EVAL_DATA=../shared/datasets uv run python benchmarks/bench_full_ranking.py
     [--synthetic-only | --movielens-only] [--chunk 2048] [--factors 32] [--iterations 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import threading
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_interactions  # noqa: E402

from recsys_eval.core import Interactions  # noqa: E402
from recsys_eval.data import load_dataset  # noqa: E402
from recsys_eval.errors import DataError  # noqa: E402
from recsys_eval.recommend import make_recommender, recommend_top_k  # noqa: E402

MB = 1024 * 1024
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def peak_rss_process() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB


@contextmanager
def measured(result: dict):
    """Time, peak sampled RSS and peak traced allocations of the block, into ``result``."""
    peak = [rss()]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], rss())

    sampler = threading.Thread(target=sample, daemon=True)
    base = rss()
    tracemalloc.start()
    sampler.start()
    start = time.perf_counter()
    try:
        yield
    finally:
        result["seconds"] = time.perf_counter() - start
        done.set()
        sampler.join()
        result["traced_peak_mb"] = tracemalloc.get_traced_memory()[1] / MB
        tracemalloc.stop()
        result["rss_peak_mb"] = max(peak[0], rss()) / MB
        result["rss_before_mb"] = base / MB


def line(label: str, r: dict) -> str:
    return (f"  {label:<44} {r['seconds']:8.2f} s   RSS peak {r['rss_peak_mb']:7,.0f} MB "
            f"(+{r['rss_peak_mb'] - r['rss_before_mb']:,.0f} over before)   traced peak {r['traced_peak_mb']:6,.0f} MB")


def run(name: str, data: Interactions, factors: int, iterations: int, chunk: int) -> None:
    print(f"\n{name}: {data.n_users:,} users x {data.n_items:,} items, {len(data):,} interactions")
    model = make_recommender("als", {"factors": factors, "iterations": iterations}, seed=0)
    start = time.perf_counter()
    model.fit(data)
    print(f"  fit ALS ({factors} factors, {iterations} iterations, {model.model.num_threads} threads)"
          f"   {time.perf_counter() - start:8.2f} s")
    users = np.arange(data.n_users, dtype=np.int32)
    start = time.perf_counter()
    recommend_top_k(model, data, users[:2], 100)  # numba: load the cached kernel (or compile it)
    print(f"  numba kernel load/compile, apart                    {time.perf_counter() - start:8.2f} s")

    user_items = data.csr()
    repeats = 3 if data.n_users * data.n_items < 10**8 else 1  # small inputs: the best of 3

    ours: dict = {}
    for _ in range(repeats):
        with measured(result := {}):
            rankings = recommend_top_k(model, data, users, 100, chunk_size=chunk)
        ours = min(ours, result, key=lambda r: r.get("seconds", np.inf))
    print(line(f"recsys_eval recommend_top_k (chunk {chunk})", ours))

    peers: list[tuple[str, dict, np.ndarray]] = []
    for label, limit in (("BLAS default threads", None), ("BLAS 1 thread", 1)):
        best: dict = {}
        for _ in range(repeats):
            with threadpool_limits(limit, "blas"), measured(result := {}):
                ids, _ = model.model.recommend(users, user_items[users], N=100, filter_already_liked_items=True)
            best = min(best, result, key=lambda r: r.get("seconds", np.inf))
        print(line(f"implicit model.recommend ({label})", best))
        peers.append((label, best, ids))
    label, best, ids = min(peers, key=lambda p: p[1]["seconds"])
    print(f"  ratio implicit ({label}) / recsys_eval: {best['seconds'] / ours['seconds']:.2f}x")

    sample = np.arange(0, data.n_users, max(1, data.n_users // 2000))
    same = np.mean([
        set(rankings.items[rankings.offsets[u]:rankings.offsets[u + 1]].tolist()) == set(ids[u][ids[u] >= 0].tolist())
        for u in sample
    ])
    print(f"  same top-100 sets as implicit on {len(sample):,} sampled users: {same:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--synthetic-only", action="store_true")
    parser.add_argument("--movielens-only", action="store_true")
    parser.add_argument("--chunk", type=int, default=2048)
    parser.add_argument("--factors", type=int, default=32, help="ALS factors on the synthetic input")
    parser.add_argument("--iterations", type=int, default=3, help="ALS iterations on the synthetic input")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; numpy {np.__version__}")
    if not args.synthetic_only:
        for name in ("ml-latest-small", "ml-100k"):
            try:
                data = load_dataset(name, download=False)
            except DataError as exc:
                print(f"\n{name}: not at hand ({exc})")
                continue
            run(name, data, 64, 15, args.chunk)
    if not args.movielens_only:
        start = time.perf_counter()
        data = synthetic_interactions(seed=0)
        print(f"\nsynthetic input made in {time.perf_counter() - start:.1f} s; "
              f"process RSS now {rss() / MB:,.0f} MB")
        run("synthetic ML-25M size", data, args.factors, args.iterations, args.chunk)
    print(f"\npeak RSS of the whole process: {peak_rss_process():,.0f} MB (target for full ranking: < 4,096 MB)")


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
