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

``--users N`` shrinks a synthetic study (``ml1m``, ``ml25m``) to N users, its items and ratings in
proportion (the same shape, for a quick look; the targets are for the full size).

``--diagnostics`` measures what the diagnostics of issue 31 add to a study: the study without them
(``[analysis] slices = []``, ``distributions = false``) and with them (``--slices``, default
``activity:4,cold:20``, and the distributions), each in a child process measured from outside by
``os.wait4`` (CPU time user + system, wall time, peak RSS), alternated ``--repeat`` times, best
of each; it prints the share the diagnostics add and where (the steps of ``timings.csv``).
Target: under 10% of the ML-1M-size study.

Run:  RECSYS_EVAL_DATA=../shared/datasets uv run python benchmarks/bench_experiment.py --study ml25m
      uv run python benchmarks/bench_experiment.py --study ml1m --diagnostics [--users 600]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
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


def synthetic_file(study: str, n_users: int | None = None) -> Path:
    """The study's synthetic ratings as Parquet (written once, then reused), shrunk to ``n_users``
    users with items and ratings in proportion when given."""
    users, items, ratings = SIZES[study]
    if n_users is not None and n_users != users:
        scale = n_users / users
        # items in proportion, but enough for each user's ratings to fill at most half of them
        ratings = round(ratings * scale)
        users, items = n_users, max(round(items * scale), 2 * -(-ratings // n_users) + 2)
    path = CACHE / (f"{study}-ratings.parquet" if users == SIZES[study][0] else f"{study}-{users}-ratings.parquet")
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        data = synthetic_interactions(users, items, ratings, seed=0)
        data.frame.select(
            (pl.col("user") + 1).alias("userId"), (pl.col("item") + 1).alias("movieId"), "rating", "timestamp"
        ).write_parquet(path)
    return path


def study_config(study: str, out: Path, n_users: int | None = None, analysis: str = "", name: str = "") -> Path:
    """The study's config in ``out`` (``name`` + .toml), with ``analysis`` (TOML text) appended."""
    if study == "ml100k":
        if not analysis:
            return ROOT / "experiments" / "ml100k-protocols.toml"
        text = (ROOT / "experiments" / "ml100k-protocols.toml").read_text()
        config = out / f"{name or study}.toml"
        config.write_text(text + analysis)
        return config
    path = synthetic_file(study, n_users)
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
    config = out / f"{name or study}.toml"
    config.write_text(text + analysis)
    return config


def run_command(config: Path, results: Path, *, report: bool = True) -> list[str]:
    """``recsys-eval run`` of ``config`` into ``results``, quiet, as a child's command line."""
    command = [sys.executable, "-c", "from recsys_eval.cli import main; main()", "run", str(config),
               "--out", str(results), "-q"]
    return command if report else [*command, "--no-report"]


#: As on a user's machine, Python keeps bytecode caches (a sandbox that disables them would charge
#: every run seconds of recompiling scipy's and polars' sources).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def measured(command: list[str]) -> dict[str, float]:
    """Run ``command`` in a child measured from outside (``os.wait4``): wall seconds, CPU seconds
    (user + system, the child's own and its waited-for children's) and peak RSS in MB."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=ENV)
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the study failed: {' '.join(command)}")
    return {"wall": time.perf_counter() - start, "cpu": usage.ru_utime + usage.ru_stime,
            "peak": usage.ru_maxrss * 1024 / 1e6}


def results_folder(results: Path) -> Path:
    return next(p for p in results.glob("*/*") if not p.name.startswith(".") and p.name != "latest")


def diagnostics(study: str, n_users: int | None, slices: list[str], repeat: int) -> None:
    """The study without and with the diagnostics, alternated ``repeat`` times (module docstring)."""
    out = Path(tempfile.mkdtemp(prefix=f"bench-{study}-diagnostics-"))
    variants = {"without": "\n[analysis]\nslices = []\ndistributions = false\n",
                "with": f"\n[analysis]\nslices = {json.dumps(slices)}\ndistributions = true\n"}
    configs = {v: study_config(study, out, n_users, text, name=f"{study}-{v}") for v, text in variants.items()}
    best: dict[str, dict[str, float]] = {}
    steps: dict[str, pl.DataFrame] = {}
    for attempt in range(repeat):
        for variant, config in configs.items():
            results = out / f"{variant}-{attempt}"
            figures = measured(run_command(config, results))
            kept = best.setdefault(variant, figures)
            if figures["cpu"] <= kept["cpu"]:
                best[variant] = figures
                steps[variant] = (pl.read_csv(results_folder(results) / "timings.csv")
                                  .filter(pl.col("step") != WHOLE_RUN).group_by("step").agg(pl.col("seconds").sum()))
            shutil.rmtree(results)
    users = f"{n_users:,} users" if n_users else "full size"
    print(f"study {study} ({users}), best of {repeat}, slices {', '.join(slices)} and distributions "
          f"(load {os.getloadavg()[0]:.1f}):")
    for variant, figures in best.items():
        print(f"  {variant:<8} diagnostics: {figures['cpu']:8.1f} s CPU {figures['wall']:8.1f} s wall "
              f"peak RSS {figures['peak']:,.0f} MB")
    for measure in ("cpu", "wall"):
        added = best["with"][measure] / best["without"][measure] - 1
        print(f"  added {measure.upper() if measure == 'cpu' else measure} time: {added:+.1%} (target: under 10%)")
    moved = (steps["with"].join(steps["without"], on="step", how="full", suffix="_without", coalesce=True)
             .fill_null(0.0).with_columns((pl.col("seconds") - pl.col("seconds_without")).alias("added"))
             .filter(pl.col("added").abs() >= 0.05).sort("added", descending=True))
    for step, seconds, without, added in moved.select("step", "seconds", "seconds_without", "added").iter_rows():
        print(f"    {step:<34} {without:7.2f} s -> {seconds:7.2f} s ({added:+.2f} s)")
    shutil.rmtree(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--study", choices=["ml100k", "ml1m", "ml25m"], default="ml100k")
    parser.add_argument("--no-report", action="store_true", help="leave out the analysis and the report")
    parser.add_argument("--users", type=int, help="shrink a synthetic study to this many users")
    parser.add_argument("--diagnostics", action="store_true",
                        help="measure the study without and with slices and distributions")
    parser.add_argument("--slices", default="activity:4,cold:20", help="the slices of --diagnostics")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each variant with --diagnostics")
    args = parser.parse_args()
    if args.users is not None and args.study == "ml100k":
        parser.error("--users shrinks the synthetic studies (ml1m, ml25m); ml100k is a real dataset")
    if args.diagnostics:
        diagnostics(args.study, args.users, args.slices.split(","), args.repeat)
        return
    out = Path(tempfile.mkdtemp(prefix=f"bench-{args.study}-"))
    config = study_config(args.study, out, args.users)
    start = time.perf_counter()
    subprocess.run(run_command(config, out / "results", report=not args.no_report), check=True,
                   stdout=subprocess.DEVNULL, env=ENV)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e6  # KiB -> MB
    folder = results_folder(out / "results")
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
