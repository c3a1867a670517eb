"""Benchmark: ``recsys-eval evaluate`` on Spark (local[2]) beside the local engine at two sizes, the
driver's memory beside the executors', and the cost of a Spark task per user and per ranked item
(the scale model of docs/SPARK.md).

Input: seeded synthetic interactions of MovieLens-25M size (recsys_eval.data.synthetic: 162,541 users,
59,047 items) and of 4x that size (650,164 users, the same items, 4x the interactions), each user's
interactions split 80/20 at random (~30 test items per user, ratings as graded gains, threshold
3.5); RUN = the top 100 of the popular recommender for every user (its train items left out);
TRAIN = the 80 %. Files are Parquet in a temporary folder.

1. Whole processes, in the same run, per size: ``recsys-eval evaluate`` with the local engine and with
   ``--engine spark --master local[2]`` on the same files and metrics; wall time and peak RSS of the
   process tree (sampled from /proc) and, for Spark, of its parts: the driver (the Python process
   that runs recsys-eval: VmHWM, the kernel's own high-water mark), the JVM (VmHWM; in local mode
   it hosts the executors' threads too) and the executors' Python workers (their summed RSS at its
   highest). The driver's memory must not grow with the users: it reads no per-unit row. The two
   engines' summary.csv must be the same bytes.
2. The task cost: :func:`recsys_eval.engine.partitions.measure_run_chunk` (what a task runs per
   chunk) in this process on one thread, at two list lengths, solved for seconds per user and per
   ranked item.

    uv run --extra spark python benchmarks/bench_spark.py [--users N,N] [--partitions P]
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


def _processes() -> tuple[dict[int, list[int]], dict[int, int], dict[int, str]]:
    """Every process's children, resident bytes and command name, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                head, tail = f.read().rsplit(")", 1)
            fields = tail.split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
            names[int(entry)] = head.split("(", 1)[1]
        except (OSError, IndexError, ValueError):
            continue
    return children, rss, names


def _high_water(pid: int) -> int:
    """A process's peak resident bytes so far (VmHWM), 0 once it has gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return 0


class TreePeaks:
    """Peaks of a process tree sampled every 0.2 s: the whole tree's summed RSS, the root's VmHWM
    (the driver), the largest VmHWM of a ``java`` descendant (the JVM), and the summed RSS of the
    other descendants (the executors' Python workers)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.tree = self.driver = self.jvm = self.workers = 0

    def sample(self) -> None:
        children, rss, names = _processes()
        below, stack = [], list(children.get(self.root, []))
        while stack:
            p = stack.pop()
            below.append(p)
            stack.extend(children.get(p, []))
        self.tree = max(self.tree, rss.get(self.root, 0) + sum(rss.get(p, 0) for p in below))
        self.driver = max(self.driver, _high_water(self.root))
        self.jvm = max([self.jvm, *(_high_water(p) for p in below if names.get(p) == "java")])
        self.workers = max(self.workers, sum(rss.get(p, 0) for p in below if names.get(p) != "java"))


def run_process(args: list[str]) -> tuple[float, TreePeaks]:
    """Wall seconds and the peaks of the process tree of ``args``."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peaks = TreePeaks(proc.pid)

    def sample() -> None:
        while proc.poll() is None:
            peaks.sample()
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    sampler.join()
    if proc.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{err[-3000:]}")
    return time.perf_counter() - start, peaks


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


def compare_engines(folder: Path, users: int, partitions: int, seed: int) -> tuple[dict[str, Path], dict]:
    """Both engines' whole processes on the inputs of ``users`` users (see the module docstring)."""
    paths = write_inputs(folder, users, seed)
    cli = [sys.executable, "-c", "from recsys_eval.cli import main; main()", "evaluate", "--test", str(paths["test"]),
           "--run", str(paths["run"]), "--train", str(paths["train"]), "--threshold", "3.5", "--metrics", METRICS,
           "--k", K]
    local_s, local = run_process([*cli, "--out", str(folder / "local")])
    spark_s, spark = run_process([*cli, "--out", str(folder / "spark"), "--engine", "spark", "--master",
                                  "local[2]", "--partitions", str(partitions)])
    same = (folder / "local" / "summary.csv").read_bytes() == (folder / "spark" / "summary.csv").read_bytes()
    mb = 2**20
    print(f"{users:,} users: local engine {local_s:7.1f} s, peak RSS {local.tree / mb:7,.0f} MB")
    print(f"{users:,} users: spark local[2] {spark_s:7.1f} s, peak RSS {spark.tree / mb:7,.0f} MB: driver "
          f"{spark.driver / mb:,.0f} MB, JVM {spark.jvm / mb:,.0f} MB, Python workers {spark.workers / mb:,.0f} MB")
    print(f"{users:,} users: ratio spark/local {spark_s / local_s:.1f}x time, {spark.tree / local.tree:.1f}x memory; "
          f"summary.csv byte-identical: {same}")
    return paths, {"users": users, "local_s": local_s, "local_mb": local.tree / mb, "spark_s": spark_s,
                   "driver_mb": spark.driver / mb, "jvm_mb": spark.jvm / mb, "workers_mb": spark.workers / mb,
                   "same": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", default=f"{ML25M['users']},{4 * ML25M['users']}",
                        help="comma-separated user counts (default: ML-25M's and 4x)")
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--task-users", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min), {os.cpu_count()} cores")
    rows = []
    for i, users in enumerate(int(u) for u in args.users.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            paths, row = compare_engines(Path(tmp), users, args.partitions, args.seed)
            rows.append(row)
            if i == 0:
                per_user, per_item = task_cost(paths, min(args.task_users, users))
        print(f"load now: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min)")
    print("\n| users | local engine | Spark local[2] | driver | JVM | Python workers | summary |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['users']:,} | {r['local_s']:.1f} s, {r['local_mb']:,.0f} MB | {r['spark_s']:.1f} s | "
              f"{r['driver_mb']:,.0f} MB | {r['jvm_mb']:,.0f} MB | {r['workers_mb']:,.0f} MB | "
              f"{'byte-identical' if r['same'] else 'DIFFERS'} |")
    print(f"task cost (1 thread): {per_user * 1e6:.1f} us per user + {per_item * 1e6:.3f} us per ranked item")
    users_item = per_user + TOP * per_item
    print(f"scale model: 100M users x top-{TOP} = {1e8 * users_item / 3600:.1f} core-hours of tasks "
          f"({1e8 * users_item / 3600 / 64:.2f} h on 64 cores), plus reading and shuffling the input")
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min)")


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
