"""Do two protocols (or a sampled and a full ranking) order the systems alike? (docs/CONVENTIONS.md#comparing-systems)

Kendall's tau between the system orderings two protocols produce for one metric, and the pairs of
systems whose order flips. Higher values rank first; two values within :data:`TIE_TOLERANCE` of each
other are a tie (a difference of floating-point noise orders nothing), and a tie is never a swap.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from itertools import combinations

import numpy as np
import polars as pl
from scipy import stats

from recsys_eval.errors import ConfigError, DataError
from recsys_eval.measure.metrics import MetricKey

#: Two means closer than this are equal: for the best value of a table, the winner of a protocol, a
#: system's rank and the swaps between protocols (a 1e-12 difference is summation order, not a result).
TIE_TOLERANCE = 1e-9


def order(a: float, b: float) -> int:
    """1 when ``a`` is above ``b`` by more than :data:`TIE_TOLERANCE`, -1 when below, 0 when tied."""
    return 0 if abs(a - b) <= TIE_TOLERANCE else (1 if a > b else -1)


def swapped_pairs(first: Mapping[str, float], second: Mapping[str, float]) -> list[tuple[str, str]]:
    """System pairs (a, b), a ahead of b under ``first``, that ``second`` orders the other way; a
    pair tied (within :data:`TIE_TOLERANCE`) under either is not swapped."""
    systems = sorted(set(first) & set(second))
    a, b = (np.array([values[s] for s in systems], dtype=np.float64) for values in (first, second))
    i, j = np.triu_indices(len(systems), 1)  # the pairs of combinations(systems, 2), in its order
    swapped = np.flatnonzero(_orders(a[i], a[j]) * _orders(b[i], b[j]) < 0)
    return [(systems[i[p]], systems[j[p]]) if a[i[p]] > a[j[p]] else (systems[j[p]], systems[i[p]]) for p in swapped]


def _orders(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`order` of each pair (a[i], b[i])."""
    return np.where(np.abs(a - b) <= TIE_TOLERANCE, 0, np.where(a > b, 1, -1))


def pair_agreement(reference: Mapping[str, float], other: Mapping[str, float]) -> float:
    """Share of system pairs that ``other`` orders as ``reference`` does (same :func:`order`: ahead,
    behind or tied)."""
    systems = sorted(set(reference) & set(other))
    pairs = list(combinations(systems, 2))
    if not pairs:
        raise DataError(f"ordering agreement needs at least two systems in common; got {systems}")
    same = [order(reference[a], reference[b]) == order(other[a], other[b]) for a, b in pairs]
    return float(np.mean(same))


def protocol_agreement(summary_frame: pl.DataFrame, *, metric: str, k: int | None) -> pl.DataFrame:
    """Kendall's tau (tau-b, ``scipy.stats.kendalltau``) between the system orderings of every pair of
    protocols for one metric and cutoff, over the systems both protocols measured.

    ``summary_frame`` has columns system, protocol, metric, k, mean (fold optional: with several
    folds a protocol's value is the mean of its fold means). Columns of the result: metric, k,
    protocol_a, protocol_b, tau, p_value, n_systems, swaps ("A vs B": A ahead under protocol_a, behind under
    protocol_b).
    """
    missing = [c for c in ("system", "protocol", "metric", "k", "mean") if c not in summary_frame.columns]
    if missing:
        raise DataError(f"summary table: missing columns {missing} for protocol agreement")
    k_filter = pl.col("k").is_null() if k is None else pl.col("k") == k
    rows = summary_frame.filter((pl.col("metric") == metric) & k_filter)
    if rows.is_empty():
        found = summary_frame.select("metric", "k").unique().sort(["metric", "k"]).rows()
        raise DataError(f"summary table: no rows for metric {metric!r} at k {k!r}; it holds {found}")
    values = rows.group_by(["protocol", "system"]).agg(pl.col("mean").fill_nan(None).mean()).drop_nulls("mean")
    by_protocol = {
        p: dict(zip(g["system"], g["mean"], strict=True))
        for (p,), g in values.partition_by("protocol", as_dict=True).items()
    }
    systems = sorted(values["system"].unique())
    if len(systems) < 2:
        raise ConfigError(f"protocol agreement needs at least two systems with a value for {MetricKey(metric, k).label}; got {systems}")
    if len(by_protocol) < 2:
        raise ConfigError(f"protocol agreement needs at least two protocols; the summary holds {sorted(by_protocol)}")
    pairs = list(combinations(sorted(by_protocol), 2))
    commons = [sorted(set(by_protocol[pa]) & set(by_protocol[pb])) for pa, pb in pairs]
    taus = _kendall_taus([[by_protocol[p][s] for s in common] for (p, _), common in zip(pairs, commons, strict=True)],
                         [[by_protocol[p][s] for s in common] for (_, p), common in zip(pairs, commons, strict=True)])
    out = [(pa, pb, tau, p_value, len(common), [f"{a} vs {b}" for a, b in swapped_pairs(by_protocol[pa], by_protocol[pb])])
           for (pa, pb), common, (tau, p_value) in zip(pairs, commons, taus, strict=True)]
    return pl.DataFrame(
        out,
        schema={"protocol_a": pl.String, "protocol_b": pl.String, "tau": pl.Float64, "p_value": pl.Float64,
                "n_systems": pl.Int64, "swaps": pl.List(pl.String)},
        orient="row",
    ).select(pl.lit(metric).alias("metric"), pl.lit(k, dtype=pl.Int32).alias("k"), pl.all())


def ordering_agreement(
    full: Mapping[str, float], sampled: Mapping[str, float], corrected: Mapping[str, float]
) -> dict[str, float]:
    """Share of system pairs the sampled and the corrected values order like the full ranking."""
    return {"sampled": pair_agreement(full, sampled), "corrected": pair_agreement(full, corrected)}


def _kendall_taus(firsts: list[list[float]], seconds: list[list[float]]) -> list[tuple[float, float]]:
    """(tau-b, p-value) of ``scipy.stats.kendalltau`` for each pair of value lists, NaN for fewer
    than two values; the pairs of one length in one call (``axis=1``: the same test of each row,
    its argument checks paid once)."""
    result = [(np.nan, np.nan)] * len(firsts)
    by_length: dict[int, list[int]] = {}
    for at, values in enumerate(firsts):
        if len(values) >= 2:
            by_length.setdefault(len(values), []).append(at)
    for rows in by_length.values():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tested = stats.kendalltau(np.array([firsts[r] for r in rows]), np.array([seconds[r] for r in rows]), axis=1)
        for r, tau, p_value in zip(rows, np.atleast_1d(tested.statistic), np.atleast_1d(tested.pvalue), strict=True):
            result[r] = (float(tau), float(p_value))
    return result
