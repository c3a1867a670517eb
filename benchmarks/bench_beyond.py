"""Benchmark: the beyond-accuracy families (issue 30) at ML-25M size, in the same pass as the accuracy
metrics.

The input of bench_metrics.py (162,541 users x top-100 lists over 59,047 items, ~30 relevant test
items per user), with a seeded train side (~100 items per user from the same Zipf-like popularity)
and 20 genres (1-3 per item). Each measurement is a child process, its peak RSS read from outside
(``os.wait4``): it makes the input, makes numba compile or load its cache on 1,000 users (timed
apart), then times measure() with the accuracy metrics alone (P, R, AP, nDCG, RR, hit at six
cutoffs, AUC) and with a set of beyond-accuracy metrics added in the same call, alternately, each
best of ``--repeat``, in wall seconds and in the process's CPU seconds (all threads). The set's cost
is the difference; its ratio to the accuracy metrics' cost is taken of CPU times measured in the same
process (on a loaded machine the CPU time is the steadier measure of the work). The table also gives
each call's minor page faults (fewest of the repeats): the per-unit rows' fresh memory, which
polars' allocator (jemalloc) hands back to the kernel between calls under its default decay, so
that each call of 8.8M new rows faults ~300 MB in again (``_RJEM_MALLOC_CONF=dirty_decay_ms:5000``
in the environment keeps them: a process-wide setting the package does not make). Sets:

- issue 30's new metrics: calibration, ARP, APLT, ACLT, PopRSP, PopREO, EPC, EFD, surprisal,
  unexpectedness, serendipity (the issue's bar: adding less than the accuracy metrics cost, < 1x);
- ILD apart (pairwise Jaccard distances, k(k-1)/2 pairs a list: docs/CONVENTIONS.md#beyond-accuracy);
- novelty and Gini (which existed before), and every one of them together.

Then each beyond metric alone (``measure(metrics=[name])``, its own table) in one more child, and
in one more the CPU seconds of the phases of the new metrics' share of measure() (:data:`PHASES`:
the list pass's kernel, the per-unit rows, the run-level head/tail counts, the rest): what a
further cut would have to come from.

    uv run python benchmarks/bench_beyond.py [--users 162541] [--repeat 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

# recsys_eval before polars, as the CLI imports them: it sets polars' allocator options (core/allocator.py)
import recsys_eval  # noqa: F401

# isort: split
import polars as pl

sys.path.insert(0, str(Path(__file__).parent))
from bench_metrics import CUTS, METRICS, N_ITEMS, N_USERS, TRAIN_MEAN, subsample, synthetic  # noqa: E402
from peak import report_peak  # noqa: E402

from recsys_eval.core.interactions import Interactions  # noqa: E402

NEW = ["calibration", "arp", "aplt", "aclt", "pop_rsp", "pop_reo", "epc", "efd", "surprisal", "unexpectedness",
       "serendipity"]
OLDER = ["novelty", "gini"]
BEYOND = [*NEW, *OLDER, "ild"]
#: The sets of beyond-accuracy metrics timed beside the accuracy metrics, each in a child process.
SETS = {"issue 30's new metrics": NEW, "ILD": ["ild"], "novelty, Gini": OLDER, "all of them": BEYOND}
GENRES = 20
#: The phases of measure() timed apart: (module, class or None, function wrapped, label).
PHASES = (("recsys_eval.measure.api", None, "ranking_matrix", "accuracy metrics' kernels"),
          ("recsys_eval.measure.api", None, "long_frame", "accuracy metrics' per-unit rows"),
          ("recsys_eval.measure.listpass", None, "run_chunks", "list pass kernel (numba, every thread)"),
          ("recsys_eval.measure.beyond", None, "long_frame", "per-unit rows (long_frame)"),
          ("recsys_eval.measure.beyond", "RunExposure", "add", "run-level counts (PopRSP/PopREO)"),
          ("recsys_eval.measure.beyond", None, "beyond_accuracy", "new metrics (beyond_accuracy) in all"))


def train_and_genres(n_users: int, seed: int = 43) -> tuple[Interactions, np.ndarray]:
    """~TRAIN_MEAN distinct train items per user from a Zipf-like popularity, and item genres."""
    rng = np.random.default_rng(seed)
    popularity = 1.0 / np.arange(1, N_ITEMS + 1) ** 0.8
    item_of_rank = rng.permutation(N_ITEMS)
    draws = rng.poisson(TRAIN_MEAN, n_users).clip(1)
    user = np.repeat(np.arange(n_users, dtype=np.int64), draws)
    item = item_of_rank[rng.choice(N_ITEMS, size=len(user), p=popularity / popularity.sum())]
    keys = np.unique(user * N_ITEMS + item)
    frame = pl.DataFrame({"user": (keys // N_ITEMS).astype(np.int32), "item": (keys % N_ITEMS).astype(np.int32)})
    train = Interactions(frame, pl.Series("user_id", np.arange(n_users)), pl.Series("item_id", np.arange(N_ITEMS)),
                         source="bench train")
    genres = np.zeros((N_ITEMS, GENRES), dtype=bool)
    for extra in range(3):  # 1 to 3 genres per item
        chosen = rng.random(N_ITEMS) < (1.0 if extra == 0 else 0.4)
        genres[np.flatnonzero(chosen), rng.integers(0, GENRES, int(chosen.sum()))] = True
    return train, genres


def timed_cpu(call) -> tuple[float, float, int]:
    """Wall and CPU seconds (every thread of the process) of one call, and its minor page faults
    (fresh memory the kernel maps: most of the per-unit rows' cost when polars' allocator has
    returned the last call's pages)."""
    start, start_cpu, start_faults = time.perf_counter(), time.process_time(), _faults()
    call()
    return time.perf_counter() - start, time.process_time() - start_cpu, _faults() - start_faults


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def child(users: int, repeat: int, which: str) -> None:
    """Make the input and time the accuracy metrics alone and with the set ``which`` (``accuracy``:
    alone; ``each``: every beyond metric alone; ``phases``: :func:`phases`); print the best times as
    one JSON line."""
    from recsys_eval.measure import measure

    warnings.filterwarnings("ignore", message=".*AUC reads every candidate")  # top-100 lists, as bench_metrics
    start = time.perf_counter()
    rankings, targets = synthetic(n_users=users)
    train, genres = train_and_genres(users)
    made = time.perf_counter() - start
    extra = dict(train=train, genres=genres)
    small_r, small_t = subsample(rankings, targets, min(1000, users))
    first = timed_cpu(lambda: measure(small_r, small_t, metrics=METRICS + BEYOND, k=CUTS, **extra))[0]
    if which == "phases":
        print(json.dumps({"phases": phases(rankings, targets, extra, repeat), "load": os.getloadavg()[0]}))
        return
    calls = {"accuracy": METRICS} if which == "accuracy" else (
        {name: [name] for name in BEYOND} if which == "each" else {"accuracy": METRICS, which: METRICS + SETS[which]})
    best = {name: [float("inf"), float("inf"), float("inf")] for name in calls}
    for _ in range(repeat):  # alternately, so that a change of load touches both
        for name, metrics in calls.items():
            timed = timed_cpu(lambda metrics=metrics: measure(rankings, targets, metrics=metrics, k=CUTS, **extra))
            best[name] = [min(old, new) for old, new in zip(best[name], timed, strict=True)]
    print(json.dumps({"made": made, "first": first, "best": best, "rows": len(train),
                      "top": int(rankings.lengths.max()), "load": os.getloadavg()[0]}))


@contextlib.contextmanager
def phase_clock(spent: dict[str, float]):
    """Add each :data:`PHASES` function's CPU seconds (every thread) to ``spent`` while open."""
    import importlib

    saved = []
    for module, owner, name, label in PHASES:
        target = importlib.import_module(module)
        target = getattr(target, owner) if owner else target
        original = getattr(target, name)

        def timed(*args, original=original, label=label, **kwargs):
            start = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - start

        saved.append((target, name, original))
        setattr(target, name, timed)
    try:
        yield spent
    finally:
        for target, name, original in saved:
            setattr(target, name, original)


def phases(rankings, targets, extra: dict, repeat: int) -> dict[str, float]:
    """The CPU seconds of each phase of measure() with the accuracy and the new metrics, in its
    best of ``repeat`` calls, and of the call in all."""
    from recsys_eval.measure import measure

    best: dict[str, float] = {"measure() in all": float("inf")}
    for _ in range(repeat):
        with phase_clock({}) as spent:
            start = time.process_time()
            measure(rankings, targets, metrics=METRICS + NEW, k=CUTS, **extra)
            spent["measure() in all"] = time.process_time() - start
        if spent["measure() in all"] < best["measure() in all"]:
            best = spent
    return best


def measured(users: int, repeat: int, which: str) -> tuple[dict, float]:
    """The child's JSON line and its peak RSS (MB), read from outside (its output goes to files, so
    that no pipe fills while it runs)."""
    command = [sys.executable, __file__, "--users", str(users), "--repeat", str(repeat), "--child", which]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        if process.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{err.read()[-3000:]}")
        return json.loads(out.read().strip().splitlines()[-1]), usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=N_USERS)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.users, args.repeat, args.child)

    base, base_peak = measured(args.users, args.repeat, "accuracy")
    wall, cpu, faults = base["best"]["accuracy"]
    print(f"input: {args.users:,} users x top-{base['top']}, {base['rows']:,} train pairs, {GENRES} genres "
          f"(made in {base['made']:.1f} s); first call on 1,000 users (numba compile or cache load) {base['first']:.2f} s")
    print(f"{'measure() with':<40}{'cpu s':>8}{'wall s':>8}{'added cpu':>11}{'/ accuracy':>12}{'peak RSS':>11}"
          f"{'faults':>9}")
    print(f"{f'accuracy metrics ({len(METRICS)} at {len(CUTS)} cutoffs)':<40}{cpu:>8.3f}{wall:>8.3f}{'':>23}"
          f"{base_peak:>8,.0f} MB{faults:>9,.0f}")
    for name, metrics in SETS.items():
        result, peak = measured(args.users, args.repeat, name)
        (wall, cpu, faults), (set_wall, set_cpu, set_faults) = result["best"]["accuracy"], result["best"][name]
        print(f"{f'  + {name} ({len(metrics)})':<40}{set_cpu:>8.3f}{set_wall:>8.3f}{set_cpu - cpu:>11.3f}"
              f"{(set_cpu - cpu) / cpu:>11.2f}x{peak:>8,.0f} MB{set_faults:>9,.0f}   (accuracy alone here: cpu "
              f"{cpu:.3f} s, {faults:,.0f} faults)")
    print("issue 30's bar: its new metrics add < 1x the accuracy metrics' cost")
    each, each_peak = measured(args.users, args.repeat, "each")
    print(f"each beyond-accuracy metric alone, measure(metrics=[name]) (peak RSS {each_peak:,.0f} MB):")
    for name in BEYOND:
        wall, cpu, _ = each["best"][name]
        print(f"  {name:<16}cpu {cpu:.3f} s, wall {wall:.3f} s")
    spent = measured(args.users, args.repeat, "phases")[0]["phases"]
    print(f"issue 30's new metrics with the accuracy metrics, CPU s of measure()'s phases (best of {args.repeat}):")
    for label, seconds in spent.items():
        print(f"  {label:<40}{seconds:8.3f}")
    print(f"load average {os.getloadavg()[0]:.1f}")
    report_peak()


if __name__ == "__main__":
    main()
