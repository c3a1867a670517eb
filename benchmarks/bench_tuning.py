"""Tuning cost per trial on ML-100K (official fold u1) and ml-latest-small (per-user 80/20 holdout):
for item kNN, user kNN and ALS, ``trials`` TPE trials on the validation split of the fold's train
side, once in this process (one worker) and once on two worker processes; printed as seconds per
trial (fit, evaluation), the speed-up of two workers over one, and the peak RSS of the process and
of its children. The first trial of a fresh process pays numba's compilation (cached afterwards).

Run:  RECSYS_EVAL_DATA=../shared/datasets uv run python benchmarks/bench_tuning.py --trials 6
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import polars as pl

from recsys_eval.experiment.runner import config_splits
from recsys_eval.pipeline.config import parse_config
from recsys_eval.pipeline.inputs import load_data
from recsys_eval.tune import tune_fold

sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' config builder
from config_text import config_text, split_table  # noqa: E402

RECOMMENDERS = [
    {"name": "item_knn", "search": {"k": {"low": 10, "high": 400, "log": True}}},
    {"name": "user_knn", "search": {"k": {"low": 10, "high": 300, "log": True}}},
    {"name": "als", "params": {"iterations": 15},
     "search": {"factors": {"low": 16, "high": 128, "log": True},
                "regularization": {"low": 0.001, "high": 10.0, "log": True}}},
]
SPLITS = {"ml-100k": split_table("official", names=["u1"]),
          "ml-latest-small": split_table("holdout", fraction=0.2, per_user=True)}


def bench_config(dataset: str, trials: int, workers: int) -> str:
    return config_text("bench-tuning", seed=1, dataset={"name": dataset}, split=SPLITS[dataset],
                       recommenders=RECOMMENDERS, metrics={"names": ["ndcg"], "k": [10], "relevance_threshold": 4},
                       output=None, tuning={"method": "tpe", "trials": trials, "workers": workers})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=6)
    args = parser.parse_args()
    print(f"load: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores")
    for dataset in SPLITS:
        per_workers = {}
        for workers in (1, 2):
            config = parse_config(tomllib.loads(bench_config(dataset, args.trials, workers)))
            data = load_data(config.dataset)
            fold = config_splits(config, data)[0]
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                tune_fold(config, data, fold, Path(tmp) / "tuning.parquet")
                wall = time.perf_counter() - start
                log = pl.read_parquet(Path(tmp) / "tuning.parquet")
            per_workers[workers] = wall
            print(f"{dataset} workers={workers}: {wall:.1f} s wall for {log.height} trials "
                  f"({wall / log.height:.2f} s per trial)")
            cost = log.filter(pl.col("trial") > 0).group_by("system", maintain_order=True).agg(
                pl.len().alias("trials"), pl.col("fit_seconds").mean(), pl.col("eval_seconds").mean())
            for system, n, fit, evaluate in cost.iter_rows():
                print(f"  {system:<10} per trial (after the first): fit {fit:.2f} s, evaluation {evaluate:.2f} s")
        print(f"{dataset}: two workers / one worker wall time = {per_workers[2] / per_workers[1]:.2f}")
    self_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak RSS: this process {self_peak:,.0f} MB, largest worker {child_peak:,.0f} MB")


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
