"""Factor-model full ranking: the fixed-order score kernel (recsys_eval.recommend.factor_scores) against
the BLAS tile product it replaced, on synthetic factors.

Two timings, each on numba's threads (the tiles are the parallelism, BLAS held to one thread):
- the product alone: every user's scores, tile by tile (``tile`` users x every item), in GFLOP/s
  (2 x users x items x factors per pass);
- the top-100 of every user as recommend_top_k computes it (product, then the scan of each row
  past its seen items), the old way (``np.dot`` per tile, as topk.py did) and the new.
Checks that both give the same top-100 item sets on a sample (scores agree within rounding, so
only near-ties may swap) and prints the largest score difference, then the peak RSS.

Full size (the lead's run): uv run python benchmarks/bench_factor_scores.py
                            (162,541 users x 59,047 items x 64 factors, 20 train items per user)
Small: uv run python benchmarks/bench_factor_scores.py --users 10000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numba
import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recsys_eval.core.chunks import chunk_bounds, run_chunks  # noqa: E402
from recsys_eval.recommend.base import TILE_CELLS  # noqa: E402
from recsys_eval.recommend.factor_scores import R_USERS, W_ITEMS, pack_items, score_tile  # noqa: E402
from recsys_eval.recommend.topk import _scan_row, no_places, top_k_factors  # noqa: E402


@numba.njit(nogil=True)
def _blas_top_k_chunk(t_lo, t_hi, user_factors, item_factors_t, seen_indptr, seen_indices, blocked, tile,
                      place_ptr, placed, above, tied, before, out_i, out_s, counts, nans):
    """The replaced kernel (topk.py before #33): a BLAS product per tile, then the scan."""
    n_rows = len(user_factors)
    for t in range(t_lo, t_hi):
        lo, hi = t * tile, min((t + 1) * tile, n_rows)
        scores = np.dot(user_factors[lo:hi], item_factors_t)
        for r in range(lo, hi):
            a, b = place_ptr[r], place_ptr[r + 1]
            counts[r], nans[r] = _scan_row(scores[r - lo], seen_indices, seen_indptr[r], seen_indptr[r + 1], blocked,
                                           out_s[r], out_i[r], placed[a:b], above[a:b], tied[a:b], before[a:b])


def blas_top_k(user_factors, item_factors_t, seen_indptr, seen_indices, blocked, k, tile):
    n = len(user_factors)
    out_i = np.full((n, k), -1, dtype=np.int32)
    out_s = np.full((n, k), -np.inf, dtype=np.float32)
    counts, nans = np.zeros(n, np.int64), np.zeros(n, np.int64)
    run_chunks(_blas_top_k_chunk, chunk_bounds(-(-n // tile)), user_factors, item_factors_t, seen_indptr,
               seen_indices, blocked, tile, *no_places(n), out_i, out_s, counts, nans)
    return out_i, out_s


@numba.njit(nogil=True)
def _blas_product_chunk(t_lo, t_hi, user_factors, item_factors_t, tile, sink):
    for t in range(t_lo, t_hi):
        lo, hi = t * tile, min((t + 1) * tile, len(user_factors))
        sink[t] = np.dot(user_factors[lo:hi], item_factors_t)[0, 0]


@numba.njit(nogil=True)
def _fixed_product_chunk(t_lo, t_hi, user_factors, packed, n_items, tile, sink):
    scores = np.empty((tile, n_items), dtype=np.float32)
    blocks = np.zeros(((tile + R_USERS - 1) // R_USERS, R_USERS, packed.shape[1]), dtype=np.float32)
    edge = np.zeros((R_USERS, W_ITEMS), dtype=np.float32)
    rows = np.arange(len(user_factors))
    for t in range(t_lo, t_hi):
        lo, hi = t * tile, min((t + 1) * tile, len(user_factors))
        score_tile(user_factors, rows[lo:hi], packed, scores, blocks, edge)
        sink[t] = scores[0, 0]


def timed(fn, *args):
    fn(*args)  # compile / warm
    start, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=162_541)
    parser.add_argument("--items", type=int, default=59_047)
    parser.add_argument("--factors", type=int, default=64)
    parser.add_argument("--seen", type=int, default=20, help="train items per user, skipped by the scan")
    args = parser.parse_args()
    n, m, k = args.users, args.items, args.factors
    rng = np.random.default_rng(0)
    users = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
    items_t = np.ascontiguousarray(rng.standard_normal((k, m)).astype(np.float32))
    seen_indptr = np.arange(n + 1, dtype=np.int64) * args.seen
    seen_indices = np.sort(rng.integers(0, m, (n, args.seen)), axis=1).astype(np.int32).ravel()
    blocked = np.zeros(m, dtype=bool)
    tile = max(1, TILE_CELLS // m)
    n_tiles = -(-n // tile)
    flops = 2.0 * n * m * k
    print(f"{n:,} users x {m:,} items x {k} factors; tiles of {tile} users; {numba.get_num_threads()} threads")

    with threadpool_limits(1, "blas"):
        sink = np.zeros(n_tiles, np.float32)
        packed = pack_items(items_t)
        _, blas_s, blas_cpu = timed(run_chunks, _blas_product_chunk, chunk_bounds(n_tiles), users, items_t, tile, sink)
        _, new_s, new_cpu = timed(run_chunks, _fixed_product_chunk, chunk_bounds(n_tiles), users, packed, m, tile, sink)
        print(f"product alone   BLAS {blas_s:8.2f} s ({flops / blas_s / 1e9:6.1f} GFLOP/s, cpu {blas_cpu:7.2f} s)   "
              f"fixed-order {new_s:8.2f} s ({flops / new_s / 1e9:6.1f} GFLOP/s, cpu {new_cpu:7.2f} s)   "
              f"ratio {new_s / blas_s:.2f}")

        (old_i, old_s), old_t, old_cpu = timed(blas_top_k, users, items_t, seen_indptr, seen_indices, blocked, 100, tile)
        rows = np.arange(n, dtype=np.int64)
        (new_i, new_sc, _, _), new_t, new_tcpu = timed(top_k_factors, users, items_t, rows, seen_indptr, seen_indices,
                                                       blocked, 100, tile, *no_places(n))
        print(f"top-100         BLAS {old_t:8.2f} s (cpu {old_cpu:7.2f} s)   fixed-order {new_t:8.2f} s "
              f"(cpu {new_tcpu:7.2f} s)   ratio {new_t / old_t:.2f}")
    sample = np.arange(0, n, max(1, n // 2000))
    same = np.mean([set(old_i[u].tolist()) == set(new_i[u].tolist()) for u in sample])
    print(f"same top-100 sets on {len(sample):,} sampled users: {same:.1%}; "
          f"largest score difference {np.abs(old_s - new_sc)[old_i == new_i].max():.2e}")


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
