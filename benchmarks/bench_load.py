"""Loading benchmark: recsys_eval beside pandas.read_csv on the same ratings file, in one run.

Two inputs:
1. the largest MovieLens ratings file in the data home (``RECSYS_EVAL_DATA``);
2. a seeded synthetic ML-1M-size ``ratings.dat`` (6,040 users, 3,706 items, 1,000,209 ratings,
   ``::``-separated, Zipf-like item popularity) written to a temporary folder, for the targets:
   raw load at least 3x faster than pandas, cached load under 0.5 s.

Rows: ``pandas.read_csv`` (ratings only, not indexed; the python engine for ``::``, the only one
that takes it), ``parse`` (our ratings file to a polars frame), ``raw load`` (parse + index +
validate: Interactions), ``cold load_dataset`` (raw load of ratings and items + writing the Parquet
cache), ``cached load_dataset`` (reading the cache), and for ``::`` files pandas' C engine on a
tab-separated copy, for scale. Each time is the best of ``--repeat`` runs.

    RECSYS_EVAL_DATA=../shared/datasets uv run python benchmarks/bench_load.py
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl

from recsys_eval.core import Interactions
from recsys_eval.data import (
    data_home,
    dataset_path,
    get_descriptor,
    list_datasets,
    load_dataset,
    presence,
)
from recsys_eval.data.home import derived_folder
from recsys_eval.data.movielens import read_ratings
from recsys_eval.data.sources import locate

ML1M = {"users": 6_040, "items": 3_706, "ratings": 1_000_209}


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def pandas_reader(desc) -> Callable[[Path], pd.DataFrame]:
    spec = desc.ratings
    kwargs = {"header": 0 if spec.header else None, "names": spec.columns, "encoding": spec.encoding}
    if len(spec.separator) > 1:
        kwargs.update(sep=spec.separator, engine="python")
    else:
        kwargs.update(sep=spec.separator)
    return lambda path: pd.read_csv(path, **kwargs)


def measure(name: str, home: Path, repeat: int) -> list[tuple[str, float]]:
    """Times of every row for dataset ``name`` in data home ``home``."""
    desc = get_descriptor(name)
    folder = dataset_path(desc, home, download=False)
    ratings_file = folder / desc.ratings.file
    source = locate(desc, home, download=False)
    cache = derived_folder(home, desc.name) / "parquet"

    def cold() -> None:
        shutil.rmtree(cache, ignore_errors=True)
        load_dataset(desc, home, download=False)

    read = pandas_reader(desc)
    rows = [
        ("pandas.read_csv", best(lambda: read(ratings_file), repeat)),
        ("parse (polars)", best(lambda: read_ratings(source), repeat)),
        ("raw load (Interactions)", best(lambda: Interactions.from_frame(read_ratings(source)), repeat)),
        ("cold load_dataset + cache", best(cold, repeat)),
        ("cached load_dataset", best(lambda: load_dataset(desc, home, download=False), repeat)),
    ]
    if len(desc.ratings.separator) > 1:  # pandas' fast C engine takes one-character separators only
        tab_copy = Path(tempfile.mkdtemp(prefix="bench-tab-")) / "ratings.tsv"
        tab_copy.write_bytes(ratings_file.read_bytes().replace(desc.ratings.separator.encode(), b"\t"))
        names = desc.ratings.columns
        c_engine = best(lambda: pd.read_csv(tab_copy, sep="\t", header=None, names=names), repeat)
        rows.append(("pandas C engine, tab copy", c_engine))
        shutil.rmtree(tab_copy.parent)
    size = ratings_file.stat().st_size
    print(f"\n{desc.name}: {ratings_file} ({size / 1e6:.1f} MB, {len(load_dataset(desc, home)):,} ratings)")
    pandas_time = rows[0][1]
    print(f"  {'':28s} {'seconds':>9s} {'pandas / this':>14s}")
    for label, seconds in rows:
        print(f"  {label:28s} {seconds:9.4f} {pandas_time / seconds:13.1f}x")
    return rows


def write_synthetic_ml1m(home: Path, seed: int) -> None:
    """A seeded ML-1M-size ratings.dat (and movies.dat) in ``home/ml-1m``: every user and item
    present, unique (user, item) pairs, Zipf-like item popularity, ratings 1-5, 2000-2003 times."""
    rng = np.random.default_rng(seed)
    n_users, n_items, n_ratings = ML1M["users"], ML1M["items"], ML1M["ratings"]
    base_u = np.concatenate([np.arange(n_users), rng.integers(0, n_users, n_items)])
    base_i = np.concatenate([rng.integers(0, n_items, n_users), np.arange(n_items)])
    popularity = 1.0 / np.arange(1, n_items + 1) ** 0.8
    extra = 2 * n_ratings
    users = np.concatenate([base_u, rng.integers(0, n_users, extra)])
    items = np.concatenate([base_i, rng.choice(n_items, extra, p=popularity / popularity.sum())])
    key = users.astype(np.int64) * n_items + items
    _, first = np.unique(key, return_index=True)
    first.sort()  # keep the base pairs (they come first), then the earliest draws
    chosen = first[:n_ratings]
    assert chosen.size == n_ratings
    order = rng.permutation(n_ratings)
    frame = pl.DataFrame(
        {
            "user": users[chosen][order] + 1,
            "item": items[chosen][order] + 1,
            "rating": rng.integers(1, 6, n_ratings),
            "timestamp": rng.integers(956_703_932, 1_046_454_590, n_ratings),
        }
    )
    folder = home / "ml-1m"
    folder.mkdir(parents=True)
    lines = frame.select(pl.format("{}::{}::{}::{}", "user", "item", "rating", "timestamp"))
    lines.write_csv(folder / "ratings.dat", include_header=False, quote_style="never")
    titles = pl.DataFrame({"line": [f"{i}::Movie {i} (1999)::Drama|Comedy" for i in range(1, n_items + 1)]})
    titles.write_csv(folder / "movies.dat", include_header=False, quote_style="never")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-load-") as tmp:
        os.environ["RECSYS_EVAL_CACHE"] = str(Path(tmp) / "derived")  # keep caches out of the way
        home = data_home()
        present = [d for d in list_datasets() if presence(d, home) != "absent"]
        if present:
            largest = max(present, key=lambda d: _ratings_bytes(d, home))
            measure(largest.name, home, args.repeat)
        else:
            print(f"no MovieLens dataset in the data home {home}")

        synthetic = Path(tmp) / "synthetic"
        write_synthetic_ml1m(synthetic, args.seed)
        rows = dict(measure("ml-1m", synthetic, args.repeat))
        data = load_dataset("ml-1m", synthetic)
        assert (len(data), data.n_users, data.n_items) == (ML1M["ratings"], ML1M["users"], ML1M["items"])
        raw_ratio = rows["pandas.read_csv"] / rows["raw load (Interactions)"]
        cached = rows["cached load_dataset"]
        print(
            f"\ntargets (synthetic ML-1M): raw load {raw_ratio:.1f}x faster than pandas (target >= 3x: "
            f"{'met' if raw_ratio >= 3 else 'NOT met'}); cached {cached:.3f} s (target < 0.5 s: "
            f"{'met' if cached < 0.5 else 'NOT met'})"
        )


def _ratings_bytes(desc, home: Path) -> int:
    source = locate(desc, home, download=False)
    if not source.is_archive:
        return (source.path / desc.ratings.file).stat().st_size
    import zipfile

    with zipfile.ZipFile(source.path) as zf:
        return zf.getinfo(source.member(desc.ratings.file)).file_size


if __name__ == "__main__":
    from peak import report_peak

    main()
    report_peak()
