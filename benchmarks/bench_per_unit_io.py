"""Per-unit files: the CPU a run's keeper thread spends writing a chunk, and the time the end-of-run
analysis spends reading one back, in the results format before (2) and after (3) the labels moved
into the folder names.

A chunk as the ML-1M protocol study writes it (issue 34: ~1,500 chunks of ~440k rows): ``--units``
units x ``--columns`` (metric, k) columns of per-unit values made by the measure stage's own
:func:`recsys_eval.measure.frames.long_frame` (the label columns constant, as a run hands them to
the writer), NaN for 5% of the values.

- format 2: the chunk written whole, its three constant label columns in every row, as
  ``PartitionFiles.write`` wrote it (``per_unit/f<i>/s<j>-p<k>-<chunk>.parquet``, zstd level 1),
  read back with ``pl.read_parquet``;
- format 3: :meth:`recsys_eval.core.results.PartitionFiles.write` (hive-style folders, the file
  without the labels), read back with :func:`recsys_eval.core.results.read_per_unit`, as the
  analysis (:mod:`recsys_eval.compare.parts`) and every other reader read it.

Each is timed ``--repeat`` times, alternated; printed: the median CPU time (user + system of the
process: polars' writer threads included) and wall time per chunk, and the file size. The last line
is the peak RSS (benchmarks/peak.py).

Run:  uv run python benchmarks/bench_per_unit_io.py [--units 2000 --columns 220 --repeat 15]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from recsys_eval.core import atomic
from recsys_eval.core.results import PartitionFiles, check_per_unit, partition_labels, read_per_unit
from recsys_eval.measure.frames import long_frame

LABELS = {"system": "als", "protocol": "AI+1R+NN100", "fold": "0"}
METRICS = ("precision", "recall", "f1", "ap", "ndcg", "rr", "hit", "auc", "mrr", "rprec", "rbp")


def chunk(units: int, columns: int, seed: int = 1) -> pl.DataFrame:
    """A chunk of per-unit rows as the measure stage makes it (see the module docstring)."""
    rng = np.random.default_rng(seed)
    values = rng.random((columns, units))
    values[rng.random((columns, units)) < 0.05] = np.nan
    metrics = [METRICS[j % len(METRICS)] for j in range(columns)]
    ks = [1 + j // len(METRICS) for j in range(columns)]
    unit_user = np.sort(rng.integers(0, units // 4, units))
    return long_frame(values.T, metrics, ks, unit_user, np.arange(units // 4, dtype=np.int64) * 7, LABELS)


def write_format_2(frame: pl.DataFrame, folder: Path, part: int) -> Path:
    """The format-2 writer: the labels checked constant, the frame written whole."""
    assert partition_labels(frame) is not None
    target = folder / "per_unit" / "f0" / f"s0-p0-{part:05d}.parquet"
    return atomic.write_parquet(check_per_unit(frame), target, compression="zstd", compression_level=1)


def timed(task) -> tuple[float, float, object]:
    """CPU seconds (the process's, every thread), wall seconds and the result of ``task()``."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = task()
    return time.process_time() - cpu, time.perf_counter() - wall, result


def main() -> None:
    from peak import report_peak

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=2_000)
    parser.add_argument("--columns", type=int, default=220)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    frame = chunk(args.units, args.columns)
    print(f"chunk: {frame.height:,} rows ({args.units:,} units x {args.columns} columns)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = PartitionFiles(folder, {"folds": ["0"], "systems": ["als"], "protocols": ["AI+1R+NN100"]})
        writers = {2: lambda part: write_format_2(frame, folder, part),
                   3: lambda part: files.write(frame, part=part)}
        readers = {2: lambda path: check_per_unit(pl.read_parquet(path)),
                   3: lambda path: read_per_unit([path]).collect()}
        written: dict[int, list[tuple[float, float]]] = {2: [], 3: []}
        read: dict[int, list[tuple[float, float]]] = {2: [], 3: []}
        paths: dict[int, Path] = {}
        for part in range(args.repeat):
            for version in (2, 3):
                cpu, wall, paths[version] = timed(lambda v=version: writers[v](part))
                written[version].append((cpu, wall))
                cpu, wall, back = timed(lambda v=version: readers[v](paths[version]))
                read[version].append((cpu, wall))
                assert back.equals(frame), f"format {version} does not read back the chunk written"
        for version in (2, 3):
            w_cpu, w_wall = (statistics.median(x) * 1e3 for x in zip(*written[version], strict=True))
            r_cpu, r_wall = (statistics.median(x) * 1e3 for x in zip(*read[version], strict=True))
            print(f"format {version}: write {w_cpu:5.1f} ms CPU, {w_wall:5.1f} ms wall; read {r_cpu:5.1f} ms CPU, "
                  f"{r_wall:5.1f} ms wall; file {paths[version].stat().st_size / 2**20:.2f} MiB")
    report_peak()


if __name__ == "__main__":
    main()
