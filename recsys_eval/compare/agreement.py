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
    return [
        (a, b) if first[a] > first[b] else (b, a)
        for a, b in combinations(systems, 2)
        if order(first[a], first[b]) * order(second[a], second[b]) < 0
    ]


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
    out = []
    for pa, pb in combinations(sorted(by_protocol), 2):
        common = sorted(set(by_protocol[pa]) & set(by_protocol[pb]))
        tau, p_value = np.nan, np.nan
        if len(common) >= 2:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = stats.kendalltau([by_protocol[pa][s] for s in common], [by_protocol[pb][s] for s in common])
            tau, p_value = float(result.statistic), float(result.pvalue)
        swaps = [f"{a} vs {b}" for a, b in swapped_pairs(by_protocol[pa], by_protocol[pb])]
        out.append((pa, pb, tau, p_value, len(common), swaps))
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
