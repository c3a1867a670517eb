"""Benchmark: ``recsys-eval evaluate`` on Spark (local[2]) beside the local engine, and the cost of a
Spark task per user and per ranked item (the scale model of docs/SPARK.md).

Input: seeded synthetic interactions of MovieLens-25M size (recsys_eval.data.synthetic: 162,541 users,
59,047 items), each user's interactions split 80/20 at random (~30 test items per user, ratings as
graded gains, threshold 3.5); RUN = the top 100 of the popular recommender for every user (its train
items left out); TRAIN = the 80 %. Files are Parquet in a temporary folder.

1. Whole processes, in the same run: ``recsys-eval evaluate`` with the local engine and with
   ``--engine spark --master local[2]`` on the same files and metrics; wall time and peak RSS of the
   process tree (the JVM and its Python workers included, sampled from /proc), and the ratio.
2. The task cost: :func:`recsys_eval.engine.partitions.measure_run_chunk` (what a task runs per
   chunk) in this process on one thread, at two list lengths, solved for seconds per user and per
   ranked item.

    uv run --extra spark python benchmarks/bench_spark.py [--users N] [--partitions P]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl

from recsys_eval.data.synthetic import ML25M, synthetic_interactions
from recsys_eval.engine.partitions import (
    RUN,
    TEST,
    TRAIN,
    RunMeasure,
    measure_run_chunk,
)
from recsys_eval.pipeline.options import MeasureOptions
from recsys_eval.recommend import make_recommender, recommend_top_k

METRICS = "precision,recall,f1,ap,ndcg,rr,hit,auc"
K = "1,5,10,20,50,100"
TOP = 100


def write_inputs(folder: Path, users: int, seed: int) -> dict[str, Path]:
    """TEST, RUN and TRAIN Parquet files of the synthetic data (see the module docstring)."""
    scale = users / ML25M["users"]
    data = synthetic_interactions(users, ML25M["items"], int(ML25M["interactions"] * scale), seed=seed)
    rng = np.random.default_rng(seed + 1)
    is_test = rng.random(len(data)) < 0.2
    frame = data.frame.with_columns(pl.Series("test", is_test))
    train = data.with_frame(frame.filter(~pl.col("test")))
    top = recommend_top_k(make_recommender("popular").fit(train), train, np.arange(data.n_users), TOP)
    run = top.to_frame().select("user", "item", pl.col("score").cast(pl.Float64))
    paths = {name: folder / f"{name}.parquet" for name in ("test", "run", "train")}
    frame.filter(pl.col("test")).select("user", "item", "rating").write_parquet(paths["test"])
    run.write_parquet(paths["run"])
    train.frame.select("user", "item").write_parquet(paths["train"])
    print(f"input: {data.n_users:,} users, {data.n_items:,} items; TEST {int(is_test.sum()):,} rows, "
          f"RUN {run.height:,} rows, TRAIN {len(train):,} rows")
    return paths


def tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        stack.extend(children.get(p, []))
    return total


def run_process(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of the process tree of ``args``."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], tree_rss(proc.pid))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{err[-3000:]}")
    return time.perf_counter() - start, peak[0] / 2**20


def chunk_of(paths: dict[str, Path], users: int, top: int) -> tuple[pl.DataFrame, RunMeasure]:
    """The long-table chunk a task would get for the first ``users`` TEST users, lists cut at ``top``."""
    test = pl.read_parquet(paths["test"]).filter(pl.col("user") < users)
    tested = pl.col("user").is_in(test.get_column("user").unique().implode())  # as Spark's join does
    run = pl.read_parquet(paths["run"]).filter(tested)
    run = run.filter(pl.int_range(pl.len()).over("user") < top)
    train = pl.read_parquet(paths["train"]).filter(tested)
    parts = [
        test.select("user", "item", pl.lit(TEST, pl.Int8).alias("kind"), pl.col("rating").cast(pl.Float64)),
        run.select("user", "item", pl.lit(RUN, pl.Int8).alias("kind"), "score"),
        train.select("user", "item", pl.lit(TRAIN, pl.Int8).alias("kind")),
    ]
    chunk = pl.concat(parts, how="diagonal_relaxed").with_columns(
        pl.col("user").cast(pl.Int64).alias("unit"), pl.col("user").cast(pl.Int64), pl.col("item").cast(pl.Int64),
        pl.lit(None, pl.Float64).alias("rank"),
    ).sort("unit", "kind")
    options = MeasureOptions(tuple(METRICS.split(",")), (), tuple(int(x) for x in K.split(",")))
    spec = RunMeasure(n_items=ML25M["items"], options=options, system="run", test_name="TEST", run_name="RUN",
                      train_name="TRAIN", run_values=("score",), test_rating=True, train_rating=False,
                      text_ids=(False, False), threshold=3.5)
    return chunk, spec


def task_cost(paths: dict[str, Path], users: int) -> tuple[float, float]:
    """Seconds per user and per ranked item of one task on one thread (least squares over lists
    of 20 and 100 items, best of 3 runs each)."""
    import numba

    numba.set_num_threads(1)
    rows = []
    for top in (20, TOP):
        chunk, spec = chunk_of(paths, users, top)
        measure_run_chunk(chunk, spec)  # compile or load the kernels first
        best = min(_timed(lambda c=chunk, s=spec: measure_run_chunk(c, s)) for _ in range(3))
        ranked = int((chunk.get_column("kind") == RUN).sum())
        rows.append((users, ranked, best))
        print(f"task chunk: {users:,} users, {ranked:,} ranked items: {best:.2f} s")
    a = np.array([[u, r] for u, r, _ in rows], dtype=float)
    per_user, per_item = np.linalg.solve(a, np.array([t for *_, t in rows]))
    return per_user, per_item


def _timed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=ML25M["users"])
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--task-users", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min), {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = write_inputs(folder, args.users, args.seed)
        cli = [sys.executable, "-c", "from recsys_eval.cli import main; main()", "evaluate", "--test", str(paths["test"]), "--run",
               str(paths["run"]), "--train", str(paths["train"]), "--threshold", "3.5", "--metrics", METRICS,
               "--k", K]
        local_s, local_mb = run_process([*cli, "--out", str(folder / "local")])
        spark_s, spark_mb = run_process([*cli, "--out", str(folder / "spark"), "--engine", "spark", "--master",
                                         "local[2]", "--partitions", str(args.partitions)])
        same = pl.read_csv(folder / "local" / "summary.csv").get_column("mean").to_numpy()
        other = pl.read_csv(folder / "spark" / "summary.csv").get_column("mean").to_numpy()
        print(f"local engine    : {local_s:7.1f} s, peak RSS {local_mb:7,.0f} MB")
        print(f"spark local[2]  : {spark_s:7.1f} s, peak RSS {spark_mb:7,.0f} MB (JVM and Python workers)")
        print(f"ratio spark/local: {spark_s / local_s:.1f}x time, {spark_mb / local_mb:.1f}x memory; "
              f"summaries equal to 1e-12: {np.allclose(same, other, rtol=1e-12, atol=0, equal_nan=True)}")
        per_user, per_item = task_cost(paths, args.task_users)
        print(f"task cost (1 thread): {per_user * 1e6:.1f} us per user + {per_item * 1e6:.3f} us per ranked item")
        users_item = per_user + TOP * per_item
        print(f"scale model: 100M users x top-{TOP} = {1e8 * users_item / 3600:.1f} core-hours of tasks "
              f"({1e8 * users_item / 3600 / 64:.2f} h on 64 cores), plus reading and shuffling the input")
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min)")


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
