"""Whole studies end to end: time and peak memory of every step, the analysis and the report.

Studies (``--study``):
- ``ml100k``: experiments/ml100k-protocols.toml (needs ML-100K in RECSYS_EVAL_DATA); target < 1.5 GB.
- ``ml1m``: experiments/ml1m-protocols.toml on a seeded synthetic input of ML-1M size (6,040 users,
  3,706 items, 1,000,209 ratings); target < 12 min and < 3 GB.
- ``ml25m``: a seeded synthetic input of ML-25M size (162,541 users, 59,047 items, 25M ratings),
  per-user 80/20 holdout, popular and ALS (64 factors, 5 iterations) under AI+AR+AN and
  AI+1R+NN100, six metrics at k 10 and 100; target < 2 min and < 4 GB.

The study runs in a child process measured from outside, the analysis and the report included
(``--no-report`` leaves them out): wall time, and the peak RSS as ``/usr/bin/time`` gives it
(``resource.getrusage(RUSAGE_CHILDREN)``, children included), so the figures are what a user of
``recsys-eval run`` sees. The runner never resets the kernel's peak-RSS mark (each step's own peak
in ``timings.csv`` is sampled), so the outside figure holds every moment of the run.

Run:  RECSYS_EVAL_DATA=../shared/datasets uv run python benchmarks/bench_experiment.py --study ml25m
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from recsys_eval.core.results import ResultsFolder
from recsys_eval.data.synthetic import synthetic_interactions
from recsys_eval.pipeline.timings import WHOLE_RUN

sys.path.append(str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' config builder
from config_text import config_text, ratings_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("RECSYS_EVAL_BENCH_CACHE", Path(tempfile.gettempdir()) / "recsys-eval-bench"))
SIZES = {"ml1m": (6_040, 3_706, 1_000_209), "ml25m": (162_541, 59_047, 25_000_095)}
def synthetic_file(study: str) -> Path:
    """The study's synthetic ratings as Parquet (written once, then reused)."""
    users, items, ratings = SIZES[study]
    path = CACHE / f"{study}-ratings.parquet"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        data = synthetic_interactions(users, items, ratings, seed=0)
        data.frame.select(
            (pl.col("user") + 1).alias("userId"), (pl.col("item") + 1).alias("movieId"), "rating", "timestamp"
        ).write_parquet(path)
    return path


def study_config(study: str, out: Path) -> Path:
    if study == "ml100k":
        return ROOT / "experiments" / "ml100k-protocols.toml"
    path = synthetic_file(study)
    if study == "ml25m":
        text = config_text(
            "ml25m-two-by-two", seed=1, dataset=ratings_file(path), protocols=["AI+AR+AN", "AI+1R+NN100"],
            recommenders=["popular", {"name": "als", "params": {"factors": 64, "iterations": 5}}],
            metrics={"names": ["precision", "recall", "ap", "ndcg", "rr", "hit"], "k": [10, 100],
                     "relevance_threshold": 4})
    else:
        text = (ROOT / "experiments" / "ml1m-protocols.toml").read_text().replace(
            'name = "ml-1m"',
            f'path = "{path}"\ncolumns = {{ user = "userId", item = "movieId", rating = "rating", '
            'timestamp = "timestamp" }')
    config = out / f"{study}.toml"
    config.write_text(text)
    return config


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--study", choices=["ml100k", "ml1m", "ml25m"], default="ml100k")
    parser.add_argument("--no-report", action="store_true", help="leave out the analysis and the report")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix=f"bench-{args.study}-"))
    config = study_config(args.study, out)
    command = [sys.executable, "-c", "from recsys_eval.cli import main; main()", "run", str(config),
               "--out", str(out / "results"), "-q"]
    if args.no_report:
        command.append("--no-report")
    start = time.perf_counter()
    # as on a user's machine, Python keeps bytecode caches (a sandbox that disables them would
    # charge every run seconds of recompiling scipy's and polars' sources)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e6  # KiB -> MB
    folder = next(p for p in (out / "results").glob("*/*") if not p.name.startswith("."))
    rows = ResultsFolder.open(folder).scan_per_unit().select(pl.len()).collect().item()
    timings = pl.read_csv(folder / "timings.csv").filter(pl.col("step") != WHOLE_RUN)
    print(f"study {args.study}: {wall:,.1f} s wall, peak RSS {peak:,.0f} MB (outside), {rows:,} per-unit rows "
          f"(load {os.getloadavg()[0]:.1f})")
    by_step = (timings.with_columns(pl.col("step").str.extract(r"^(\w+)").alias("stage"))
               .group_by("stage").agg(pl.col("seconds").sum(), pl.col("peak_rss_mb").max())
               .sort("seconds", descending=True))
    for stage, seconds, peak_mb in by_step.iter_rows():
        print(f"  {stage:<12} {seconds:8.1f} s   step peak {peak_mb:,} MB")
    # fits side by side overlap: a fold's wall time for them is the longest, not their sum; fits in
    # the background overlap the other systems' steps, and so do the keeper thread's writes and
    # summaries (the main thread's waits for them are the "wait for writes" rows)
    side = timings.filter(pl.col("step") == "fit side by side").group_by("fold").agg(
        (pl.col("seconds").sum() - pl.col("seconds").max()).alias("overlap"))
    on_keeper = pl.col("step").str.contains(r"^(write|summarise) ") & (pl.col("system") != "")
    background = timings.filter((pl.col("step") == "fit in background") | on_keeper).get_column("seconds").sum()
    inside = (timings.get_column("seconds").sum() - background
              - (side.get_column("overlap").sum() if side.height else 0.0))
    print(f"  {'other':<12} {wall - inside:8.1f} s   (start-up, imports, config checks, manifest: the wall "
          f"time outside the steps)")
    print(f"results: {folder}")


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
