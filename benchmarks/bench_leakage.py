"""Benchmark: the leakage audit (recsys_eval.split.leakage) of an ML-25M-size ratings file.

The seeded synthetic ratings of benchmarks/synthetic.py (by default ML-25M's 162,541 users, 59,047
items, 25,000,095 ratings with timestamps) are written once as a Parquet file. Each measurement is
a child process that reads the file, splits it, and computes the audit ``--repeat`` times (the
best printed), measured from outside: its whole wall time and peak RSS (``os.wait4``), reading
and splitting included. Two splits: a per-user random 80/20 holdout (the leaking case, every share
non-zero) and a global time split at the 0.8 quantile (every share zero).

Peer: the same four fold shares written as plain polars expressions over the split's train and
test frames (no per-user table, no counts kept), in a child process of its own. It computes less
than the audit (which also writes one row per test user), so it bounds what the audit could cost.
Target (issue 31): the audit under 10 s per split at ML-25M size.

    uv run python benchmarks/bench_leakage.py [--users 5000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
from peak import report_peak
from synthetic import ML25M, synthetic_interactions

SPLITS = ("holdout", "time")
SHARES = ("share_after_test_start", "share_after_user_test", "share_future_items", "share_users_leaking")


def peer_shares(train: pl.DataFrame, test: pl.DataFrame) -> dict[str, float]:
    """The four shares of docs/CONVENTIONS.md#leakage in plain polars, from (user, item, timestamp) frames."""
    start = test.get_column("timestamp").min()
    tau = test.lazy().group_by("user").agg(pl.col("timestamp").min().alias("tau"))
    late = train.lazy().join(tau, on="user").filter(pl.col("timestamp") > pl.col("tau"))
    first = train.lazy().group_by("item").agg(pl.col("timestamp").min().alias("first"))
    future = test.lazy().join(tau, on="user").join(first, on="item", how="left").select(
        (pl.col("first") > pl.col("tau")).sum())
    counts = pl.collect_all([late.select(pl.len(), pl.col("user").n_unique()), future, tau.select(pl.len())])
    (n_late, n_leaking), (n_future,), (n_users,) = (frame.row(0) for frame in counts)
    return {"share_after_test_start": train.filter(pl.col("timestamp") > start).height / train.height,
            "share_after_user_test": n_late / train.height, "share_future_items": n_future / test.height,
            "share_users_leaking": n_leaking / n_users}


def child(path: Path, split_name: str, engine: str, repeat: int) -> None:
    """Read, split, and time the shares; print them and the best time as JSON."""
    from recsys_eval.core import Interactions
    from recsys_eval.split import holdout, leakage_audit, time_split

    data = Interactions.from_frame(pl.read_parquet(path), source=str(path))
    split = holdout(data, 0.2, per_user=True, seed=0) if split_name == "holdout" else time_split(data, 0.8)
    times = []
    for _ in range(repeat):
        begin = time.perf_counter()
        if engine == "ours":
            shares = leakage_audit([split]).folds.select(SHARES).row(0, named=True)
        else:
            columns = ["user", "item", "timestamp"]
            shares = peer_shares(split.train.frame.select(columns), split.test.frame.select(columns))
        times.append(time.perf_counter() - begin)
    print(json.dumps({"seconds": min(times), "shares": shares}))


def measured(command: list[str]) -> tuple[dict, float, float]:
    """The child's JSON line, its whole wall seconds and its peak RSS (MB), from outside."""
    begin = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - begin
    out, err = process.stdout.read(), process.stderr.read()
    if status != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1]), wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=ML25M["users"])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--child", nargs=3, metavar=("FILE", "SPLIT", "ENGINE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(Path(args.child[0]), args.child[1], args.child[2], args.repeat)
    scale = args.users / ML25M["users"]
    items = max(1000, int(ML25M["items"] * min(1.0, scale * 4)))
    data = synthetic_interactions(args.users, items, int(ML25M["interactions"] * scale), seed=0)
    print(f"{data!r}; load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ratings.parquet"
        data.frame.select("user", "item", "rating", "timestamp").write_parquet(path)
        del data
        for split in SPLITS:
            results = {}
            for engine in ("ours", "polars"):
                command = [sys.executable, __file__, "--repeat", str(args.repeat), "--child", str(path), split, engine]
                results[engine] = measured(command)
            (ours, wall, peak), (peer, peer_wall, peer_peak) = results["ours"], results["polars"]
            same = all(abs(ours["shares"][s] - peer["shares"][s]) < 1e-12 for s in SHARES)
            shares = ", ".join(f"{ours['shares'][s]:.4f}" for s in SHARES) + (", equal" if same else ", DIFFERENT")
            print(f"{split} split: audit {ours['seconds']:.2f} s (best of {args.repeat}; whole process {wall:.1f} s, "
                  f"peak RSS {peak:,.0f} MB); plain polars shares {peer['seconds']:.2f} s (whole process "
                  f"{peer_wall:.1f} s, peak RSS {peer_peak:,.0f} MB); shares {shares}")
    report_peak()


if __name__ == "__main__":
    main()
