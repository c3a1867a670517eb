"""Figures that describe a set of interactions: sizes, density, ratings, time span, count quantiles."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import polars as pl

from recsys_eval.core.interactions import Interactions

QUANTILES = {"min": 0.0, "q05": 0.05, "q25": 0.25, "median": 0.5, "q75": 0.75, "q95": 0.95, "max": 1.0}
MAX_DISTRIBUTION = 20  # rating values listed one by one up to this many distinct values


def _count_stats(counts: np.ndarray) -> dict[str, float]:
    """Quantiles (linear interpolation) and mean of the non-zero counts."""
    counts = counts[counts > 0]
    if counts.size == 0:
        return {name: 0.0 for name in [*QUANTILES, "mean"]}
    values = np.quantile(counts, list(QUANTILES.values()))
    return {
        **{name: float(v) for name, v in zip(QUANTILES, values, strict=True)},
        "mean": float(counts.mean()),
    }


def _iso(seconds: int) -> str:
    return datetime.fromtimestamp(int(seconds), tz=UTC).isoformat().replace("+00:00", "Z")


def describe(data: Interactions) -> dict:
    """A JSON-ready description of ``data``.

    Users and items count those with at least one interaction (the index may be larger: a prepared
    subset keeps the index of the whole dataset); density = interactions / (users x items).
    """
    user_counts, item_counts = data.user_counts(), data.item_counts()
    users, items = int(np.count_nonzero(user_counts)), int(np.count_nonzero(item_counts))
    out: dict = {
        "source": data.source,
        "interactions": len(data),
        "users": users,
        "items": items,
        "index_users": data.n_users,
        "index_items": data.n_items,
        "density": len(data) / (users * items) if users and items else 0.0,
        "ratings": None,
        "time": None,
        "user_counts": _count_stats(user_counts),
        "item_counts": _count_stats(item_counts),
    }
    if data.has_rating and len(data):
        ratings = data.frame.get_column("rating")
        stats = {"min": float(ratings.min()), "max": float(ratings.max()), "mean": float(ratings.mean())}
        counts = ratings.value_counts(sort=False).sort("rating")
        if counts.height <= MAX_DISTRIBUTION:
            stats["distribution"] = [
                {"rating": float(r), "count": int(c), "share": int(c) / len(data)}
                for r, c in counts.select("rating", pl.col("count")).iter_rows()
            ]
        out["ratings"] = stats
    if data.has_timestamp and len(data):
        times = data.frame.get_column("timestamp")
        first, last = int(times.min()), int(times.max())
        out["time"] = {"first": _iso(first), "last": _iso(last), "days": round((last - first) / 86400, 1)}
    return out
