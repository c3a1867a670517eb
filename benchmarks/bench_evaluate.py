"""Benchmark: ``recsys-eval evaluate`` as a whole process beside rectools as a whole process, on the same
files, in the same run.

Input (seeded, written once to ``--dir`` as CSV and as Parquet): the ML-25M-size synthetic
interactions of ``benchmarks/synthetic.py`` (162,541 users, 59,047 items, 25M ratings) split per
user 80/20 at random into TRAIN (``user,item``) and TEST (``user,item``: every row relevant), and a
RUN of each user's top 100 (``user,item,rank``: items drawn by popularity with ~30% of the user's
test items mixed in, ranked at random), 16.3M rows.

Both processes read TEST, RUN and TRAIN from the same files (rectools with pandas: ``read_csv`` or
``read_parquet``) and compute the same 10 values, P, R, AP (MAP), nDCG (binary gain) and RR at k 10
and 100, each a mean over the TEST users; the benchmark checks that the means agree to 1e-9.
rectools (pandas) pins NumPy < 2, so it runs in its own environment: ``uv run --no-project --with
rectools --with "pyarrow<18" python benchmarks/bench_evaluate.py --peer ...`` (resolved once before
timing; its timed runs include uv's start-up, ~0.1 s).
Each process is run ``--repeat`` times per input format and bytecode setting (the best time is
shown): with Python writing bytecode, as in a user's environment (the first run writes the caches),
and with ``PYTHONDONTWRITEBYTECODE=1``, as this sandbox sets it (every run recompiles every module's
source). Wall time and peak RSS of each whole process (``os.wait4``, children included) are printed
with the ratios, then where our time goes (read, index, check, build, measure, summarise, write),
measured in this process.

    uv run python benchmarks/bench_evaluate.py [--dir /tmp/bench_evaluate] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

METRICS = ["precision", "recall", "ap", "ndcg", "rr"]
KS = [10, 100]
TOP = 100


# -- the peer, run in rectools' own environment (no recsys_eval import) ----------------------------
def peer(folder: Path, fmt: str, out: Path) -> None:
    import pandas as pd
    from rectools import Columns
    from rectools.metrics import MAP, MRR, NDCG, Precision, Recall, calc_metrics

    names = {"user": Columns.User, "item": Columns.Item, "rank": Columns.Rank}
    read = pd.read_csv if fmt == "csv" else pd.read_parquet
    test = read(folder / f"test.{fmt}").rename(columns=names)
    run = read(folder / f"run.{fmt}").rename(columns=names)
    train = read(folder / f"train.{fmt}").rename(columns=names)
    kinds = {"precision": Precision, "recall": Recall, "ap": MAP, "rr": MRR,
             "ndcg": lambda k: NDCG(k=k, divide_by_achievable=True)}  # IDCG of min(|R(u)|, k) hits, as ours
    metrics = {f"{m}@{k}": kinds[m](k=k) for m in METRICS for k in KS}
    values = calc_metrics(metrics, reco=run, interactions=test, prev_interactions=train)
    out.write_text(json.dumps({k: float(v) for k, v in values.items()}))


# -- input -----------------------------------------------------------------------------------------
def write_input(folder: Path, seed: int, small: bool) -> None:
    import numpy as np
    import polars as pl

    sys.path.insert(0, str(Path(__file__).parent))
    from synthetic import synthetic_interactions

    data = synthetic_interactions(5_000, 5_000, 300_000, seed=seed) if small else synthetic_interactions(seed=seed)
    rng = np.random.default_rng(seed + 1)
    users, items = data.users.astype(np.int64), data.items.astype(np.int64)
    is_test = rng.random(len(users)) < 0.2
    n_users, n_items = data.n_users, data.n_items
    counts = np.bincount(items, minlength=n_items).astype(np.float64)
    # the run: 130 popularity draws per user plus ~30% of its test items, first 100 distinct at random
    hits = is_test & (rng.random(len(users)) < 0.3)
    draw_user = np.repeat(np.arange(n_users, dtype=np.int64), 130)
    draw_item = rng.choice(n_items, size=len(draw_user), p=counts / counts.sum())
    keys = np.concatenate([users[hits] * n_items + items[hits], draw_user * n_items + draw_item])
    keys = np.unique(keys)
    keys = keys[np.lexsort((rng.random(len(keys)), keys // n_items))]
    user = keys // n_items
    rank = np.arange(len(keys)) - np.searchsorted(user, user) + 1
    keep = rank <= TOP
    folder.mkdir(parents=True, exist_ok=True)
    tables = {"run": pl.DataFrame({"user": user[keep], "item": keys[keep] % n_items, "rank": rank[keep]}),
              "test": pl.DataFrame({"user": users[is_test], "item": items[is_test]}),
              "train": pl.DataFrame({"user": users[~is_test], "item": items[~is_test]})}
    for name, table in tables.items():
        table.write_csv(folder / f"{name}.csv")
        table.write_parquet(folder / f"{name}.parquet")


# -- timing whole processes ------------------------------------------------------------------------
def timed(command: list[str], bytecode: bool) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB, the process and its children) of ``command``, with Python
    writing bytecode (as a user's shell) or not (``PYTHONDONTWRITEBYTECODE=1``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{command[0]} failed: {process.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def ours_command(folder: Path, fmt: str, out: Path) -> list[str]:
    script = Path(sys.executable).parent / "recsys-eval"
    return [str(script), "evaluate", "--test", str(folder / f"test.{fmt}"), "--run", str(folder / f"run.{fmt}"),
            "--train", str(folder / f"train.{fmt}"), "--metrics", ",".join(METRICS), "--k", ",".join(map(str, KS)),
            "--gain", "binary", "--out", str(out), "--force"]


def stages(folder: Path, fmt: str, out: Path) -> dict[str, float]:
    """Where the time of ``evaluate`` goes, stage by stage, in this process."""
    import polars as pl

    from recsys_eval.data.kernels import warm_up
    from recsys_eval.data.runs import Index, check_rows, load_run, read_table
    from recsys_eval.measure import measure
    from recsys_eval.measure.aggregate import PartitionState
    from recsys_eval.pipeline.evaluate import summary_of

    warm_up()  # numba's first dispatch, which evaluate does on its import thread while it reads
    times = {}
    start = time.perf_counter()
    tables = [read_table(folder / f"{n}.{fmt}", kind) for n, kind in
              (("test", "judgments"), ("run", "run"), ("train", "judgments"))]
    times["read + column checks"] = time.perf_counter() - start
    start = time.perf_counter()
    index = Index.of(tables)
    times["index ids"] = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(2):
        check_rows(tables[i], index.user[i], index.item[i], index)
    times["repeats and ranks (TEST, RUN)"] = time.perf_counter() - start
    start = time.perf_counter()
    data = load_run(folder / f"test.{fmt}", folder / f"run.{fmt}", folder / f"train.{fmt}")
    times["load_run in all (the above + build)"] = time.perf_counter() - start
    start = time.perf_counter()
    per_unit = measure(data.rankings, data.targets, metrics=METRICS, k=KS, gain="binary",
                       user_ids=data.user_ids, train=data.train)
    times["measure"] = time.perf_counter() - start
    start = time.perf_counter()
    summary = summary_of(PartitionState.of(per_unit), "skip")
    times["summarise (with t-intervals)"] = time.perf_counter() - start
    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    per_unit.write_parquet(out / "per_unit.parquet", compression="zstd", compression_level=1)
    summary.write_csv(out / "summary.csv")
    times["write"] = time.perf_counter() - start
    assert isinstance(summary, pl.DataFrame)
    return times


PEER = ["uv", "run", "--no-project", "--with", "rectools", "--with", "pyarrow<18", "python"]  # rectools pins NumPy < 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench_evaluate"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--small", action="store_true", help="5,000 users x 5,000 items: a smoke test")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each process; the best is shown")
    parser.add_argument("--formats", default="parquet,csv", help="input formats to time, of parquet and csv")
    parser.add_argument("--peer", nargs=3, metavar=("FOLDER", "FORMAT", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        peer(Path(args.peer[0]), args.peer[1], Path(args.peer[2]))
        return
    folder = args.dir / f"seed{args.seed}{'-small' if args.small else ''}"
    if not (folder / "run.parquet").exists():
        start = time.perf_counter()
        write_input(folder, args.seed, args.small)
        print(f"input written to {folder} in {time.perf_counter() - start:.0f} s")
    for name in ("test", "run", "train"):
        lines = sum(1 for _ in open(folder / f"{name}.csv", "rb")) - 1
        print(f"{name.upper():5} {lines:>11,} rows  {(folder / f'{name}.csv').stat().st_size / 1e6:6.0f} MB CSV  "
              f"{(folder / f'{name}.parquet').stat().st_size / 1e6:5.0f} MB Parquet")
    print(f"load before: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    subprocess.run([*PEER, "-c", "import rectools, pyarrow"], check=True)  # resolved once, before timing
    out = args.dir / "out"
    for fmt in args.formats.split(","):
        for bytecode in (True, False):
            compare(folder, fmt, bytecode, out, args.repeat)
    print(f"load after: {os.getloadavg()[0]:.2f} (1 min)")
    for fmt in args.formats.split(","):
        print(f"where the time of evaluate goes ({fmt}, in this process):")
        for stage, seconds in stages(folder, fmt, out / "stages").items():
            print(f"  {stage:40} {seconds:6.2f} s")


def compare(folder: Path, fmt: str, bytecode: bool, out: Path, repeat: int) -> None:
    """Both processes on one input format, ``repeat`` times each; the best times, the ratio, and the
    agreement of the 10 means."""
    import polars as pl

    runs = {"recsys-eval evaluate": ours_command(folder, fmt, out / "ours"),
            "rectools (pandas)": [*PEER, __file__, "--peer", str(folder), fmt, str(out / "rectools.json")]}
    print(f"{fmt}, bytecode {'written (a user' + chr(39) + 's environment)' if bytecode else 'off (PYTHONDONTWRITEBYTECODE=1)'}:")
    results = {}
    for name, command in runs.items():
        measured = [timed(command, bytecode) for _ in range(repeat)]
        results[name] = min(m[0] for m in measured), max(m[1] for m in measured)
        print(f"  {name:22} {results[name][0]:7.1f} s   peak RSS {results[name][1]:7,.0f} MB   "
              f"(runs: {', '.join(f'{m[0]:.1f} s' for m in measured)})", flush=True)
    (ours_t, ours_m), (peer_t, peer_m) = results.values()
    print(f"  ratio: rectools / recsys-eval = {peer_t / ours_t:.1f}x wall time, {peer_m / ours_m:.1f}x peak RSS")
    summary = pl.read_csv(out / "ours" / "summary.csv")
    ours_values = dict(zip(summary["name"], summary["mean"], strict=True))
    peer_values = json.loads((out / "rectools.json").read_text())
    diff = max(abs(ours_values[k] - v) for k, v in peer_values.items())
    print(f"  the 10 means agree with rectools' to {diff:.1e}")
    if diff > 1e-9:
        for key, value in sorted(peer_values.items()):
            print(f"    {key:14} ours {ours_values[key]:.12f} rectools {value:.12f}")


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
