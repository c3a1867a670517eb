"""Benchmark: ranking metrics at ML-25M size, beside ranx and pytrec_eval in the same run.

Seeded synthetic input of MovieLens-25M size: 162,541 users, 59,047 items with Zipf-like popularity,
about 30 relevant test items (graded 1..5) per user, a top-100 list per user (full ranking: AUC over
every item but the user's ~100 train items). Measured: P, R, AP, nDCG, RR, hit at k in
{1, 5, 10, 20, 50, 100} plus AUC: the kernel, measure() (the per-unit table) and the whole way from
the in-memory Targets/Rankings to the summary (measure + summarize; target < 1 s). Peers compute the same 36 cutoff values (neither has AUC). A peer
too slow for the whole input runs on a user subsample and its time is extrapolated linearly (said so
in the output). The compile or cache-load time of the first call is shown apart.

    RECSYS_EVAL_DATA=... uv run --group bench python benchmarks/bench_metrics.py [--peer-users N]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
import warnings

import numpy as np

from recsys_eval.core.units import Rankings, Targets
from recsys_eval.measure import measure, summarize
from recsys_eval.measure.api import kernel_layout, ranking_values

N_USERS, N_ITEMS, TOP, TEST_MEAN, TRAIN_MEAN = 162_541, 59_047, 100, 30, 100
CUTS = [1, 5, 10, 20, 50, 100]
METRICS = ["precision", "recall", "ap", "ndcg", "rr", "hit", "auc"]


def synthetic(seed: int = 42, n_users: int = N_USERS) -> tuple[Rankings, Targets]:
    """Test items and top-100 lists drawn from a Zipf-like popularity; ~1 list item in 8 relevant."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, N_ITEMS + 1) ** 0.8
    popularity /= popularity.sum()
    item_of_rank = rng.permutation(N_ITEMS)

    def distinct_draws(per_user: np.ndarray, extra: float) -> tuple[np.ndarray, np.ndarray]:
        draws = np.ceil(per_user * extra).astype(np.int64)
        user = np.repeat(np.arange(n_users), draws)
        item = item_of_rank[rng.choice(N_ITEMS, size=len(user), p=popularity)]
        _, first = np.unique(user * N_ITEMS + item, return_index=True)
        first.sort()
        return user[first], item[first]

    t_user, t_item = distinct_draws(rng.poisson(TEST_MEAN, n_users).clip(1), 1.0)
    t_sizes = np.bincount(t_user, minlength=n_users)
    gain = rng.integers(1, 6, len(t_item)).astype(np.float32)
    order = np.lexsort((t_item, t_user))
    targets = Targets(
        unit_user=np.arange(n_users, dtype=np.int32),
        offsets=np.concatenate([[0], np.cumsum(t_sizes)]).astype(np.int64),
        items=t_item[order].astype(np.int32), gain=gain, n_items=N_ITEMS, protocol="AI+AR+AN",
        all_candidates=True,
        n_candidates=(N_ITEMS - rng.poisson(TRAIN_MEAN, n_users)).astype(np.int64),
    )
    # lists: popular items, with test items mixed in at random positions
    r_user, r_item = distinct_draws(np.full(n_users, TOP), 1.6)
    hits = rng.random(len(t_item)) < 0.4
    r_user = np.concatenate([t_user[hits], r_user])
    r_item = np.concatenate([t_item[hits], r_item])
    _, first = np.unique(r_user * N_ITEMS + r_item, return_index=True)
    r_user, r_item = r_user[first], r_item[first]
    shuffle = np.lexsort((rng.random(len(r_user)), r_user))
    r_user, r_item = r_user[shuffle], r_item[shuffle]
    starts = np.concatenate([[0], np.cumsum(np.bincount(r_user, minlength=n_users))])
    position = np.arange(len(r_user)) - starts[r_user]
    keep = position < TOP
    r_user, r_item, position = r_user[keep], r_item[keep], position[keep]
    lengths = np.bincount(r_user, minlength=n_users)
    rankings = Rankings(
        unit_user=np.arange(n_users, dtype=np.int32),
        offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        items=r_item.astype(np.int32),
        scores=1.0 - position / 1000.0,
    )
    return rankings, targets


def subsample(rankings: Rankings, targets: Targets, n: int) -> tuple[Rankings, Targets]:
    rs, ts = rankings.offsets[n], targets.offsets[n]
    return (
        Rankings(rankings.unit_user[:n], rankings.offsets[: n + 1], rankings.items[:rs], rankings.scores[:rs]),
        Targets(targets.unit_user[:n], targets.offsets[: n + 1], targets.items[:ts], targets.gain[:ts],
                targets.n_items, targets.protocol, True, None, targets.n_candidates[:n]),
    )


def peer_dicts(rankings: Rankings, targets: Targets):
    qrels, run = {}, {}
    for u in range(rankings.n_units):
        t = slice(targets.offsets[u], targets.offsets[u + 1])
        qrels[str(u)] = dict(zip(map(str, targets.items[t].tolist()), targets.gain[t].astype(int).tolist()))
        r = slice(rankings.offsets[u], rankings.offsets[u + 1])
        run[str(u)] = dict(zip(map(str, rankings.items[r].tolist()), rankings.scores[r].tolist()))
    return qrels, run


def timed(call, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-users", type=int, default=20_000,
                        help="users the peers run on (their time is extrapolated to all users)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    start = time.perf_counter()
    rankings, targets = synthetic()
    print(f"input: {rankings.n_units:,} users, {N_ITEMS:,} items, {len(rankings.items):,} ranked "
          f"(mean list {rankings.lengths.mean():.1f}), {len(targets.items):,} relevant test items "
          f"(mean {np.diff(targets.offsets).mean():.1f}/user); made in {time.perf_counter() - start:.1f} s")

    small_r, small_t = subsample(rankings, targets, 1000)
    first = timed(lambda: measure(small_r, small_t, metrics=METRICS, k=CUTS))
    print(f"recsys_eval first call (numba compile or cache load): {first:.2f} s")

    columns, _, _ = kernel_layout(METRICS, CUTS)  # the 37 columns measure() keeps
    kernel = timed(lambda: ranking_values(rankings, targets, CUTS, columns=columns, want_half_life=False),
                   args.repeat)
    frame = None

    def full():
        nonlocal frame
        frame = measure(rankings, targets, metrics=METRICS, k=CUTS)

    ours = timed(full, args.repeat)
    to_summary = timed(lambda: summarize(measure(rankings, targets, metrics=METRICS, k=CUTS)), args.repeat)
    print(f"recsys_eval kernel (values of 37 metric-cutoffs, all users): {kernel:.3f} s")
    print(f"recsys_eval measure() incl. the per-unit table ({frame.height:,} rows): {ours:.3f} s")
    print(f"recsys_eval the 37 values from in-memory Targets/Rankings to the summary (measure + "
          f"summarize): {to_summary:.3f} s (target < 1 s; load {os.getloadavg()[0]:.1f}, peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB)")

    n = min(args.peer_users, N_USERS)
    scale = N_USERS / n
    peer_r, peer_t = subsample(rankings, targets, n)
    qrels, run = peer_dicts(peer_r, peer_t)
    results = {}
    try:
        import ranx

        names = [f"{m}@{k}" for m in ("precision", "recall", "map", "ndcg", "mrr", "hit_rate") for k in CUTS]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tiny = {q: qrels[q] for q in list(qrels)[:50]}
            ranx.evaluate(ranx.Qrels(tiny), ranx.Run({q: run[q] for q in tiny}), names)  # compile
            build = timed(lambda: (ranx.Qrels(qrels), ranx.Run(run)))
            q, r = ranx.Qrels(qrels), ranx.Run(run)
            evaluate = timed(lambda: ranx.evaluate(q, r, names, save_results_in_run=False))
        results["ranx"] = (build * scale, evaluate * scale)
    except ImportError:
        print("ranx not installed (uv run --group bench ...)")
    try:
        import pytrec_eval

        cuts = ",".join(map(str, CUTS))
        measures = {f"P_{cuts}", f"recall_{cuts}", f"map_cut_{cuts}", f"ndcg_cut_{cuts}", "recip_rank",
                    f"success_{cuts}"}
        build = timed(lambda: pytrec_eval.RelevanceEvaluator(qrels, measures))
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
        evaluate = timed(lambda: evaluator.evaluate(run))
        results["pytrec_eval"] = (build * scale, evaluate * scale)
    except ImportError:
        print("pytrec_eval not installed (uv run --group bench ...)")

    print()
    print(f"{'tool':<34}{'time (s)':>10}{'vs recsys_eval':>16}")
    print(f"{'recsys_eval measure()':<34}{ours:>10.3f}{1.0:>15.1f}x")
    print(f"{'recsys_eval kernel only':<34}{kernel:>10.3f}{kernel / ours:>15.2f}x")
    note = f" (run on {n:,} users, x{scale:.2f})" if scale > 1 else ""
    for name, (build, evaluate) in results.items():
        print(f"{name + ' evaluate':<34}{evaluate:>10.3f}{evaluate / ours:>15.1f}x{note}")
        print(f"{name + ' evaluate + input build':<34}{build + evaluate:>10.3f}{(build + evaluate) / ours:>15.1f}x")
    print("(peers: the 36 cutoff values, no AUC; recsys_eval: the 36 plus AUC)")


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
