"""The end-of-run analysis of a finished results folder, alone: time, CPU and peak memory, and
whether its tables are the bytes of another analysis's.

The analysis (``recsys_eval.compare.study.analyse``: paired tests, distributions, agreement, the
sampled correction, the aggregation audit...) of ``FOLDER`` runs in a child process, its tables
written to ``--out`` (default: a temporary folder; never into ``FOLDER``), measured from outside by
``os.wait4``: wall time, CPU time (user + system) and peak RSS, the figure ``/usr/bin/time``
gives. With ``--reference DIR`` (the tables another version's analysis wrote, e.g. with this
script from a checkout of main) every table file of either folder is compared byte for byte, and a
table that differs is named with its first differing row: the check that a faster analysis
changed no number.

Target (issue 34): the ML-1M protocol study's analysis within a fold's memory (2.9 GB) and several
times faster than its 321 s.

Run:  uv run python benchmarks/bench_analysis.py results/ml1m-protocols/latest [--out DIR] [--reference DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

CHILD = "import sys; from recsys_eval.compare.study import analyse; analyse(sys.argv[1], out=sys.argv[2])"


def measure(folder: Path, out: Path) -> None:
    """The analysis of ``folder`` in a child process, its tables in ``out``."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(folder), str(out)])
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"the analysis of {folder} failed (exit code {os.waitstatus_to_exitcode(status)})")
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is KiB on Linux, bytes on macOS
    print(f"analysis of {folder}: {wall:,.1f} s wall, {usage.ru_utime + usage.ru_stime:,.1f} s CPU, "
          f"peak RSS {usage.ru_maxrss * scale / 1e6:,.0f} MB (load {os.getloadavg()[0]:.1f})")


def differences(out: Path, reference: Path) -> list[str]:
    """Every table file of ``out`` or ``reference`` that is not the same bytes in both, each with
    where it differs."""
    found = []
    for name in sorted({p.name for p in out.iterdir() if p.is_file()} | {p.name for p in reference.iterdir() if p.is_file()}):
        mine, theirs = out / name, reference / name
        if not mine.is_file() or not theirs.is_file():
            found.append(f"{name}: only in {out if mine.is_file() else reference}")
        elif mine.read_bytes() != theirs.read_bytes():
            found.append(f"{name}: {first_difference(mine, theirs)}")
    return found


def first_difference(mine: Path, theirs: Path) -> str:
    """Where two table files differ: shape, columns, or the first row that differs."""
    if mine.suffix not in (".parquet", ".csv"):
        return "the bytes differ"
    read = pl.read_parquet if mine.suffix == ".parquet" else pl.read_csv
    a, b = read(mine), read(theirs)
    if a.shape != b.shape or a.columns != b.columns:
        return f"shape {a.shape} vs {b.shape}, columns {a.columns} vs {b.columns}"
    same = pl.Series([True] * a.height)
    for column in a.columns:
        same &= _same(a[column], b[column])
    if same.all():
        return "the same values, other bytes"
    row = int(same.not_().arg_true()[0])
    return f"row {row}: {a.row(row, named=True)} vs {b.row(row, named=True)}"


def _same(x: pl.Series, y: pl.Series) -> pl.Series:
    """Where two columns hold the same value, nulls and NaNs equal to themselves."""
    same = (x == y).fill_null(x.is_null() & y.is_null())
    return same | (x.is_nan() & y.is_nan()).fill_null(False) if x.dtype.is_float() else same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a finished results folder (read only)")
    parser.add_argument("--out", type=Path, help="where the tables go (default: a temporary folder)")
    parser.add_argument("--reference", type=Path, help="tables to compare byte for byte")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch)
        out.mkdir(parents=True, exist_ok=True)
        measure(args.folder, out)
        if args.reference is not None:
            found = differences(out, args.reference)
            print("\n".join(found) if found else f"every table is the same bytes as in {args.reference}")
            if found:
                raise SystemExit(1)


if __name__ == "__main__":
    main()
