"""Fast paths of the rank and measure stages, before and after, each in a process of its own.

1. Popularity's full ranking (top-100 of every unseen item for every user) on a seeded synthetic
   ML-25M-size input: before, a score block per chunk of users scanned by the top-k heap (what
   every model without :meth:`Recommender.item_scores` gets); after, one global order walked per
   user past its train items.
2. AI+1R+NN100 on the same input (per-user 80/20 holdout, relevant = rating >= 4), popularity and
   ALS (64 factors, 5 iterations): targets, rank and measure (P, R, AP, nDCG, RR at k 10 and 100,
   and AUC). Before: the listed targets (101 items per unit), every unit's ranking sorted, the
   general ranking kernel; after: one-relevant targets (a user's sample listed once), each unit's
   relevant item placed by counting (rank_one_relevant), the metrics in closed form.
3. AI+1R+AN on ml-latest-small (RECSYS_EVAL_DATA; a synthetic input of its size otherwise), same
   systems and metrics. Before: listed targets (every unit lists ~all items), ranked by one sort
   per user; after: no lists, every user's relevant items placed among its candidates in one pass.

The "after" per-unit values are checked equal to the "before" ones (popularity: bit for bit; ALS
scores a factor tile where the old path scored a block, so to 1e-12 where ranks agree).
Part ``q`` checks the quick start instead (experiments/quickstart.toml: ML-100K, its split, seeds,
protocols and five systems, built by the runner's own functions): per-unit values of the runner's
path today (``rank`` + ``measure``) against the fast paths (``recommend_top_k(..., targets=)``,
``rank_one_relevant`` on one-relevant targets), every ranking metric compared bit for bit, and
AUC of the full-ranking protocols shown beside the depth-truncated value it replaces.

Each measurement runs in a fresh process (peak RSS is the process's); numba kernels are compiled
or loaded from the cache by a warm-up call on tiny data first, outside the timings.
Prints seconds, the after/before ratio, peak RSS and the machine's load (``uptime``).

Run: RECSYS_EVAL_DATA=../shared/datasets uv run python benchmarks/bench_one_relevant.py [--parts 1 2 3 | q]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import synthetic_interactions  # noqa: E402

METRICS = ["precision", "recall", "ap", "ndcg", "rr", "auc"]
K = [10, 100]
SYSTEMS = {"popular": {}, "als": {"factors": 64, "iterations": 5}}


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class BlockPopular:
    """Popularity without item_scores: ranked from score blocks like any user-dependent model."""

    @staticmethod
    def make():
        from recsys_eval.recommend import PopularRecommender

        class _Block(PopularRecommender):
            def item_scores(self):
                return None

        return _Block()


def split_of(source: str):
    """The benchmark's split of ``source``, made once and kept in /tmp for the child processes."""
    from recsys_eval.errors import DataError
    from recsys_eval.split import load_split, make_split, save_split

    folder = Path(f"/tmp/bench_one_relevant_split_{source}")
    if (folder / "split.json").is_file():
        return load_split(folder)
    if source == "ml25m":
        data = synthetic_interactions(seed=0)
    else:
        from recsys_eval.data import load_dataset

        try:
            data = load_dataset("ml-latest-small", download=False)
        except DataError:
            data = synthetic_interactions(610, 9_742, 100_836, seed=0)
    split = make_split(data, "holdout", fraction=0.2, per_user=True, seed=0)
    save_split(split, folder, overwrite=True)
    return split


def warm_up() -> None:
    """Compile (or load) every kernel both paths use, on tiny data."""
    from recsys_eval.measure import measure
    from recsys_eval.recommend import make_recommender, rank_one_relevant, rank_targets, recommend_top_k
    from recsys_eval.split import make_split
    from recsys_eval.targets import build_targets

    tiny = make_split(synthetic_interactions(60, 50, 1500, seed=1), "holdout", fraction=0.2, per_user=True, seed=1)
    for name in ("popular", "als"):
        model = make_recommender(name, {"factors": 4, "iterations": 1} if name == "als" else {}, seed=0).fit(tiny.train)
        for protocol in ("AI+1R+NN5", "AI+1R+AN"):
            listed = build_targets(tiny, protocol, threshold=4.0)
            measure(rank_targets(model, listed), listed, metrics=METRICS, k=K)
            compact = build_targets(tiny, protocol, threshold=4.0, one_relevant=True)
            measure(rank_one_relevant(model, tiny.train, compact), compact, metrics=METRICS, k=K)
        recommend_top_k(model, tiny.train, np.arange(tiny.n_users), 10)
        recommend_top_k(BlockPopular.make().fit(tiny.train), tiny.train, np.arange(tiny.n_users), 10)


def run_part(part: str, mode: str, system: str) -> dict:
    """One measurement, in this process."""
    from recsys_eval.measure import measure
    from recsys_eval.recommend import make_recommender, rank_one_relevant, rank_targets, recommend_top_k
    from recsys_eval.targets import build_targets

    warm_up()
    out: dict = {}
    split = split_of("ml25m" if part in ("1", "2") else "small")
    if part == "1":
        model = (BlockPopular.make() if mode == "before" else make_recommender("popular", {})).fit(split.train)
        users = np.arange(split.n_users, dtype=np.int32)
        start = time.perf_counter()
        rankings = recommend_top_k(model, split.train, users, 100)
        out["rank"] = time.perf_counter() - start
        out["checksum"] = int(rankings.items.astype(np.int64).sum())
    else:
        protocol = "AI+1R+NN100" if part == "2" else "AI+1R+AN"
        model = make_recommender(system, SYSTEMS[system], seed=0, threads=2).fit(split.train)
        start = time.perf_counter()
        targets = build_targets(split, protocol, threshold=4.0, one_relevant=mode == "after")
        out["targets"] = time.perf_counter() - start
        start = time.perf_counter()
        ranked = (rank_targets(model, targets) if mode == "before"
                  else rank_one_relevant(model, split.train, targets))
        out["rank"] = time.perf_counter() - start
        start = time.perf_counter()
        frame = measure(ranked, targets, metrics=METRICS, k=K)
        out["measure"] = time.perf_counter() - start
        out["units"] = targets.n_units
        values = frame.sort("metric", "k", "unit").get_column("value").to_numpy()
        np.save(f"/tmp/bench_one_relevant_{part}_{system}_{mode}.npy", values)
    out["peak_mb"] = peak_mb()
    return out


def check_quickstart() -> None:
    """Part q (module docstring)."""
    import polars as pl

    from recsys_eval.experiment.runner import config_splits
    from recsys_eval.pipeline import jobs
    from recsys_eval.pipeline.config import load_config
    from recsys_eval.pipeline.inputs import load_data, prepare_data
    from recsys_eval.pipeline.plan import RunOptions
    from recsys_eval.measure import measure
    from recsys_eval.recommend import rank_one_relevant, recommend_top_k
    from recsys_eval.targets import build_targets

    path = Path(__file__).resolve().parents[1] / "experiments" / "quickstart.toml"
    config = load_config(path)
    run = RunOptions.from_config(config)
    data, _ = prepare_data(config.prepare, load_data(config.dataset))
    split = config_splits(config, data)[0]
    m = config.metrics
    names = [n for n in run.measure.ranking if n not in ("catalog_coverage", "novelty")]
    for job in run.model_jobs(split.name):
        rec = job.rec
        model = job.make(data, run.threads).fit(split.train)
        for protocol in config.protocols:
            target = run.target_sets(protocol, split)[0].whole()
            targets = target.targets
            options = dict(metrics=names, k=m.k, gain=m.gain, ties=m.ties, system=rec.display, fold=split.name)
            old = measure(jobs.rank(run.rank, model, target), targets, **options)
            if targets.all_candidates:
                ranked = recommend_top_k(model, split.train, targets.unit_user, run.rank.depth,
                                         candidates=targets.candidates, targets=targets)
                new_targets = targets
            elif "1R" in protocol.name:
                seed = run.seeds.targets(split.name, protocol.definition)
                new_targets = build_targets(split, protocol.name, threshold=m.relevance_threshold, seed=seed,
                                            one_relevant=True)
                ranked = rank_one_relevant(model, split.train, new_targets)
            else:
                continue  # AR+NN: the listed path is the fast path
            new = measure(ranked, new_targets, **options)
            key = ["metric", "k", "unit"]
            joined = old.join(new, on=key, how="full", suffix="_new", nulls_equal=True)
            same = (pl.col("value") == pl.col("value_new")) | (pl.col("value").is_nan() & pl.col("value_new").is_nan())
            differ = joined.filter(~same)
            other = differ.filter(pl.col("metric") != "auc").height
            line = f"  {rec.display:>9} {protocol.name:<12} {old.height:>7,} values: {other} differ"
            if targets.all_candidates:
                auc = joined.filter(pl.col("metric") == "auc")
                line += (f"; AUC exact {auc.get_column('value_new').fill_nan(None).mean():.4f} "
                         f"(was {auc.get_column('value').fill_nan(None).mean():.4f} at depth {run.rank.depth})")
            else:
                line += f"; AUC identical: {differ.filter(pl.col('metric') == 'auc').height == 0}"
            print(line)


def measure_in_process(part: str, mode: str, system: str) -> dict:
    result = subprocess.run(
        [sys.executable, __file__, "--child", part, mode, system], capture_output=True, text=True, check=True,
        env=os.environ,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def compare_values(part: str, system: str) -> str:
    before = np.load(f"/tmp/bench_one_relevant_{part}_{system}_before.npy")
    after = np.load(f"/tmp/bench_one_relevant_{part}_{system}_after.npy")
    same = (before == after) | (np.isnan(before) & np.isnan(after))
    if same.all():
        return "per-unit values identical"
    close = np.isclose(before, after, rtol=1e-12, atol=0) | (np.isnan(before) & np.isnan(after))
    return f"per-unit values: {same.mean():.4%} identical, {close.mean():.4%} within 1e-12"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", nargs="*", default=["1", "2", "3"])
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_part(*args.child)))
        return
    if args.parts == ["q"]:
        check_quickstart()
        return
    print(f"load before: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    for part in args.parts:  # make the splits once, outside the timed children
        split_of("ml25m" if part in ("1", "2") else "small")
    titles = {"1": "popularity full ranking, top-100 of 162,541 users (ML-25M size)",
              "2": "AI+1R+NN100, ML-25M size", "3": "AI+1R+AN, ml-latest-small"}
    for part in args.parts:
        print(f"\n{titles[part]}")
        for system in (["popular"] if part == "1" else list(SYSTEMS)):
            before = measure_in_process(part, "before", system)
            after = measure_in_process(part, "after", system)
            steps = [s for s in ("targets", "rank", "measure") if s in before]
            for step in steps:
                print(f"  {system:>8} {step:<8} before {before[step]:8.2f} s   after {after[step]:8.2f} s   "
                      f"{before[step] / max(after[step], 1e-9):6.1f}x faster")
            total_b, total_a = sum(before[s] for s in steps), sum(after[s] for s in steps)
            print(f"  {system:>8} {'total':<8} before {total_b:8.2f} s   after {total_a:8.2f} s   "
                  f"{total_b / max(total_a, 1e-9):6.1f}x faster   peak RSS before {before['peak_mb']:,.0f} MB, "
                  f"after {after['peak_mb']:,.0f} MB" + (f"   ({before['units']:,} units)" if "units" in before else ""))
            if part == "1":
                print(f"           same top-100 lists: {before['checksum'] == after['checksum']}")
            else:
                print(f"           {compare_values(part, system)}")
    print(f"\nload after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
