"""Build Rankings and Targets from plain Python lists, for the tests."""

from __future__ import annotations

import numpy as np

from recsys_eval.core.units import Rankings, Targets


def targets_of(units: list[dict[int, float]], n_items: int, n_candidates: list[int] | None = None,
               protocol: str = "test") -> Targets:
    """One dict item -> gain per unit (listed items; with n_candidates: full ranking)."""
    items, gains, sizes = [], [], []
    for unit in units:
        pairs = sorted(unit.items())
        items += [i for i, _ in pairs]
        gains += [g for _, g in pairs]
        sizes.append(len(pairs))
    return Targets(
        unit_user=np.arange(len(units), dtype=np.int32),
        offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        items=np.asarray(items, dtype=np.int32),
        gain=np.asarray(gains, dtype=np.float32),
        n_items=n_items,
        protocol=protocol,
        all_candidates=n_candidates is not None,
        n_candidates=None if n_candidates is None else np.asarray(n_candidates, dtype=np.int64),
    )


def rankings_of(lists: list[list[int]], scores: list[list[float]] | None = None) -> Rankings:
    """One ranked item list per unit (best first), with optional scores."""
    sizes = [len(x) for x in lists]
    flat = [i for x in lists for i in x]
    return Rankings(
        unit_user=np.arange(len(lists), dtype=np.int32),
        offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        items=np.asarray(flat, dtype=np.int32),
        scores=None if scores is None else np.asarray([s for x in scores for s in x], dtype=np.float64),
    )


def values(frame, metric: str, k: int | None = None) -> list[float]:
    """The per-unit values of one metric at one cutoff, in unit order."""
    import polars as pl

    rows = frame.filter(pl.col("metric") == metric)
    rows = rows.filter(pl.col("k").is_null() if k is None else pl.col("k") == k)
    return rows.sort("unit").get_column("value").to_list()
