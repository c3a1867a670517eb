"""First-run benchmark: the README quickstart in a brand-new environment beside a warm one.

Clones the HEAD of the repository this script lives in (committed files only) into a temporary
folder, ``uv sync --offline`` there (uv's package cache must be warm), then times the quickstart
(``recsys-eval run experiments/quickstart.toml``) as a whole process, ``uv run`` included:

(a) cold: ``XDG_CACHE_HOME`` points at an empty folder, as on a machine where recsys-eval never ran,
    so every kernel is compiled;
(b) warm: the same clone again, with the kernel cache (a) wrote;
(c) new environment: a second fresh clone with a fresh virtual environment, sharing the kernel cache
    of (a), as a new clone or venv of the same version on a machine where recsys-eval ran before.

Target (issue "Scale"): (a) within 1.5x of (b); (c) should be as fast as (b), which is what the
shared per-user kernel cache is for. Each run writes to a fresh results folder.

The children get the environment of a user's shell: ``NUMBA_CACHE_DIR``,
``NUMBA_CACHE_LOCATOR_CLASSES``, ``PYTHONDONTWRITEBYTECODE``, ``VIRTUAL_ENV`` and ``UV_*`` are
removed (``UV_CACHE_DIR`` is set to uv's own package cache, which would otherwise move with
``XDG_CACHE_HOME``). Each run goes through a two-line wrapper around the console script's ``main`` that listens
to numba's ``numba:compile`` events (fired on cache misses only) and writes each compiled variant's
time (inclusive, and self: without the kernels compiled inside it) to a JSON file; the table of the
slowest kernels of run (a) is printed after the wall times.

    RECSYS_EVAL_DATA=../shared/datasets uv run python benchmarks/bench_first_run.py [--top 25]
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

REPO = Path(__file__).resolve().parent.parent
TARGET = 1.5

# Runs the console script's main with numba's compile events recorded (per thread, as nested
# compiles of the kernels a kernel calls), one JSON line each to sys.argv[1] as it ends (the console
# script leaves without the interpreter's teardown, so nothing is written at exit).
WRAPPER = r"""
import json, sys, threading, time
out = sys.argv.pop(1)
import recsys_eval.cli
from numba.core import event
lines, stacks = open(out, "a"), threading.local()
class Recorder(event.Listener):
    def on_start(self, ev):
        stack = stacks.__dict__.setdefault("s", [])
        d = ev.data["dispatcher"]
        stack.append([f"{d.py_func.__module__}.{d.py_func.__qualname__}",
                      str(ev.data["args"]), time.perf_counter(), 0.0])
    def on_end(self, ev):
        stack = stacks.s
        name, args, start, inner = stack.pop()
        took = time.perf_counter() - start
        if stack:
            stack[-1][3] += took
        lines.write(json.dumps({"kernel": name, "args": args, "inclusive": took, "self": took - inner,
                                "top": not stack}) + "\n")
        lines.flush()
event.register("numba:compile", Recorder())
sys.argv[0] = "recsys-eval"
recsys_eval.cli.main()
"""


def user_environment(cache_home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", "NUMBA_CACHE_LOCATOR_CLASSES", "PYTHONDONTWRITEBYTECODE",
                        "VIRTUAL_ENV")
           and not k.startswith("UV_")}
    # uv keeps its package cache under XDG_CACHE_HOME too: keep using the warm one
    env["UV_CACHE_DIR"] = subprocess.run(["uv", "cache", "dir"], check=True, capture_output=True,
                                         text=True).stdout.strip()
    env["XDG_CACHE_HOME"] = str(cache_home)
    return env


def clone(into: Path, ref: str) -> Path:
    subprocess.run(["git", "clone", "--quiet", "--no-local", str(REPO), str(into)], check=True)
    subprocess.run(["git", "-C", str(into), "checkout", "--quiet", ref], check=True)
    return into


def sync(checkout: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(["uv", "sync", "--offline", "--quiet"], cwd=checkout, env=env, check=True)
    return time.perf_counter() - start


def quickstart(checkout: Path, env: dict[str, str], results: Path, events: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        ["uv", "run", "--offline", "--quiet", "python", "-c", WRAPPER, str(events),
         "run", "experiments/quickstart.toml", "--out", str(results)],
        cwd=checkout, env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"quickstart failed in {checkout}:\n{done.stdout}\n{done.stderr}")
    return took


def compiled(events: Path) -> list[dict]:
    return [json.loads(line) for line in events.read_text().splitlines()] if events.exists() else []


def kernel_table(records: list[dict], top: int) -> None:
    per_kernel: dict[str, list[float]] = {}
    for r in records:
        entry = per_kernel.setdefault(r["kernel"], [0.0, 0.0, 0])
        entry[0] += r["self"]
        entry[1] += r["inclusive"] if r["top"] else 0.0
        entry[2] += 1
    rows = sorted(per_kernel.items(), key=lambda kv: -kv[1][0])
    print(f"\n{'kernel (run a)':<58} {'variants':>8} {'self s':>8} {'top-level s':>12}")
    for name, (own, inclusive, count) in rows[:top]:
        print(f"{name:<58} {count:>8} {own:>8.2f} {inclusive:>12.2f}")
    if len(rows) > top:
        rest = rows[top:]
        print(f"{f'({len(rest)} more)':<58} {sum(v[2] for _, v in rest):>8} "
              f"{sum(v[0] for _, v in rest):>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="HEAD", help="the commit to clone (default: HEAD)")
    parser.add_argument("--top", type=int, default=25, help="kernels listed by compile time")
    parser.add_argument("--json", type=Path, help="also write the figures and events here")
    args = parser.parse_args()
    if not os.environ.get("RECSYS_EVAL_DATA"):
        sys.exit("set RECSYS_EVAL_DATA to the data home that holds ml-100k")
    ref = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.ref], check=True,
                         capture_output=True, text=True).stdout.strip()

    with tempfile.TemporaryDirectory(prefix="first-run-") as tmp:
        root = Path(tmp)
        env = user_environment(root / "cache")
        (root / "cache").mkdir()
        first, second = clone(root / "clone-1", ref), clone(root / "clone-2", ref)
        print(f"commit {ref}; uv sync --offline: {sync(first, env):.1f} s (clone 1), "
              f"{sync(second, env):.1f} s (clone 2)")
        cold = quickstart(first, env, root / "results-a", root / "a.json")
        warm = quickstart(first, env, root / "results-b", root / "b.json")
        fresh = quickstart(second, env, root / "results-c", root / "c.json")
        runs = {"a": compiled(root / "a.json"), "b": compiled(root / "b.json"),
                "c": compiled(root / "c.json")}
        kernels = sum(1 for r in runs["a"] if r["top"])

    labels = {"a": "(a) cold: empty kernel cache", "b": "(b) warm: same clone again",
              "c": "(c) new clone + venv, shared cache"}
    print(f"\n{'run':<38} {'wall s':>8} {'compiles':>9} {'compile s':>10}")
    for key, took in (("a", cold), ("b", warm), ("c", fresh)):
        recs = runs[key]
        print(f"{labels[key]:<38} {took:>8.1f} {len(recs):>9} "
              f"{sum(r['self'] for r in recs):>10.1f}")
    print(f"\n(a)/(b) = {cold / warm:.2f}x  (target <= {TARGET}x: "
          f"{'met' if cold / warm <= TARGET else 'not met'})")
    print(f"(c)/(b) = {fresh / warm:.2f}x")
    print(f"run (a) compiled {len(runs['a'])} variants ({kernels} at top level)")
    kernel_table(runs["a"], args.top)
    if args.json:
        args.json.write_text(json.dumps({"commit": ref, "cold": cold, "warm": warm, "fresh": fresh,
                                         "events": runs}, indent=1))


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
