"""Benchmark: bootstrap intervals of a fold's per-unit files on Spark (local[2]) beside the local
engine, the driver's peak memory at two sizes, and the intervals compared bit for bit.

Input: seeded per-unit files as a run writes them (one system, one AR protocol, chunks of 20,000
users per file; 8 metrics x 6 cutoffs, uniform values with 5 % undefined, and f1's relevant
counts), at 162,541 users
(ML-25M's) and 4x that. Each engine runs as its own process:

- local: every file read, the users' values reduced and resampled in one process
  (``confidence_intervals(..., method="bootstrap")``, what a local run does per partition);
- spark: :func:`recsys_eval.engine.stats.bootstrap_intervals` on ``local[2]``: the driver holds the
  blocks' counts and one (system, protocol)'s replicate sums, never a user's value, so its peak
  (VmHWM of the Python process that runs it) must stay flat as the users grow.

    uv run --extra spark python benchmarks/bench_spark_bootstrap.py [--users N,N] [--resamples R]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

from recsys_eval.core.results import PER_UNIT_FILE_COLUMNS, per_unit_file, read_per_unit

METRICS = ("precision", "recall", "f1", "ap", "ndcg", "rr", "hit", "auc")
K = (1, 5, 10, 20, 50, 100)
CHUNK = 20_000
SEED = 7


def write_per_unit(folder: Path, users: int) -> list[str]:
    """Per-unit files of ``users`` users (see the module docstring), one per chunk of users."""
    rng = np.random.default_rng(users)
    paths = []
    for first in range(0, users, CHUNK):
        ids = np.arange(first, min(first + CHUNK, users), dtype=np.int64)
        n, columns = len(ids), len(METRICS) * len(K)
        value = rng.random(n * columns)
        value[rng.random(n * columns) < 0.05] = np.nan
        frame = pl.DataFrame({
            "system": "als", "protocol": "AI+AR+AN", "fold": "0",
            "user": np.tile(ids, columns), "unit": np.tile(ids, columns),
            "metric": np.repeat(np.repeat(METRICS, len(K)), n),
            "k": pl.Series(np.repeat(np.tile(K, len(METRICS)), n), dtype=pl.Int32), "value": value})
        relevant = pl.DataFrame({"system": "als", "protocol": "AI+AR+AN", "fold": "0", "user": ids, "unit": ids,
                                 "metric": "n_relevant", "k": pl.Series([None] * n, dtype=pl.Int32),
                                 "value": np.full(n, 3.0)})  # f1's relevant counts, written beside it
        path = folder / per_unit_file({"fold": "0", "protocol": "AI+AR+AN", "system": "als"}, first)
        path.parent.mkdir(parents=True, exist_ok=True)
        pl.concat([frame, relevant]).select(PER_UNIT_FILE_COLUMNS).write_parquet(path)  # as a run writes them
        paths.append(str(path))
    return paths


def child(engine: str, files: list[str], out: str, resamples: int) -> None:
    """One engine's intervals of ``files``, written to ``out``."""
    keys = ["system", "protocol", "fold", "metric", "k"]
    if engine == "local":
        from recsys_eval.compare import confidence_intervals
        from recsys_eval.measure.aggregate import PartitionState

        # as a run summarises a partition: each file's state, merged (auxiliary rows left out)
        state = PartitionState.merge([PartitionState.of(read_per_unit([f]).collect()) for f in files])
        users = state.user_values().select("system", "protocol", "fold", "user", "metric", "k", "value")
        result = confidence_intervals(users, method="bootstrap", n_resamples=resamples, seed=SEED)
    else:
        from recsys_eval.core.spark import spark_session
        from recsys_eval.engine.stats import bootstrap_intervals

        spark = spark_session("local[2]")
        result = bootstrap_intervals(spark, files, undefined="skip", n_resamples=resamples,
                                     seeds={("0", "AI+AR+AN"): SEED}, partitions=8)
    result.select(*keys, "mean", "lower", "upper").sort(keys).write_parquet(out)


def main() -> None:
    from bench_spark import run_process

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", default="162541,650164", help="comma-separated user counts")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--child", nargs=4, metavar=("ENGINE", "FILES", "OUT", "RESAMPLES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        engine, files, out, resamples = args.child
        child(engine, files.split(","), out, int(resamples))
        return
    mb = 2**20
    for users in (int(u) for u in args.users.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            files = ",".join(write_per_unit(folder, users))
            results = {}
            for engine in ("local", "spark"):
                out = str(folder / f"{engine}.parquet")
                seconds, peaks = run_process([sys.executable, __file__, "--child", engine, files, out,
                                              str(args.resamples)])
                results[engine] = pl.read_parquet(out)
                print(f"{users:,} users, {args.resamples} resamples, {engine:5}: {seconds:7.1f} s, driver "
                      f"{peaks.driver / mb:,.0f} MB" + (f", JVM {peaks.jvm / mb:,.0f} MB, Python workers "
                                                        f"{peaks.workers / mb:,.0f} MB" if engine == "spark" else ""))
            print(f"{users:,} users: intervals bit-identical: {results['local'].equals(results['spark'])}")


if __name__ == "__main__":
    main()
