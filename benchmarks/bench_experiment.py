"""The ML-100K protocol study end to end: time per stage (load, split, targets, fit, rank and
measure), the analysis and the report, and peak memory.

Run:     RECSYS_EVAL_DATA=../shared/datasets uv run python benchmarks/bench_experiment.py
Or, on a results folder already written:  ... bench_experiment.py --folder results/ml100k-protocols/<stamp>
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import polars as pl
from rich.console import Console

from recsys_eval.compare.study import analyse
from recsys_eval.experiment.config import load_config
from recsys_eval.experiment.runner import run_experiment
from recsys_eval.report import write_report

CONFIG = Path(__file__).resolve().parents[1] / "experiments" / "ml100k-protocols.toml"


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stage_times(folder: Path) -> pl.DataFrame:
    """Seconds per stage summed over folds and systems, from the run's timings.csv."""
    timings = pl.read_csv(folder / "timings.csv")
    stage = pl.col("step").str.extract(r"^(\w+)").replace({"load": "load and prepare"})
    return (timings.with_columns(stage.alias("stage")).group_by("stage").agg(pl.col("seconds").sum())
            .sort("seconds", descending=True))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", type=Path, help="an existing results folder of the study")
    args = parser.parse_args()
    if args.folder is None:
        out = Path(tempfile.mkdtemp(prefix="bench-experiment-"))
        config = load_config(CONFIG)
        config = config.model_copy(update={"output": config.output.model_copy(update={"report": False})})
        start = time.perf_counter()
        folder = run_experiment(config, CONFIG.read_text(), out_root=out, quiet=True,
                                console=Console(stderr=True)).folder
        print(f"run (no report): {time.perf_counter() - start:8.1f} s   peak RSS {peak_rss_mb():,.0f} MB")
    else:
        folder = args.folder
    print(f"results: {folder}")
    for stage, seconds in stage_times(folder).iter_rows():
        print(f"  {stage:<20} {seconds:8.1f} s")
    per_unit = pl.scan_parquet(folder / "per_unit.parquet").select(pl.len()).collect().item()
    print(f"  per-unit rows: {per_unit:,}")
    start = time.perf_counter()
    analyse(folder)
    middle = time.perf_counter()
    write_report(folder)
    end = time.perf_counter()
    print(f"analysis (tests, agreement, sampled correction, bins): {middle - start:6.1f} s")
    print(f"report (Markdown, HTML with figures, LaTeX):           {end - middle:6.1f} s")
    print(f"peak RSS of this process: {peak_rss_mb():,.0f} MB")


if __name__ == "__main__":
    main()
