"""What a built Targets looks like, and what a random recommender would score under it.

For a unit with target set size T and R relevant items, a recommender that ranks the targets in a
uniformly random order shows k' = min(k, T) of them, so (hypergeometric)

    E[hits@k] = k' R / T,   E[P@k] = k' R / (T k),   E[hit@k] = 1 - C(T - R, k') / C(T, k').

Under 1R+NN(n) (T = n + 1, R = 1) these are 1/(n+1) and k/(n+1) (docs/CONVENTIONS.md#random-recommender). They are the
floor any real recommender should beat, and show how much a protocol inflates or deflates metrics.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl
from scipy.special import gammaln

from recsys_eval.core.units import Targets
from recsys_eval.errors import ConfigError


def expected_random(sizes: np.ndarray, relevant: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per unit, E[P@k] and E[hit@k] of a uniformly random ranking of its T targets (R relevant)."""
    t = sizes.astype(np.float64)
    r = relevant.astype(np.float64)
    shown = np.minimum(k, t)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(t > 0, shown * r / np.maximum(t, 1) / k, 0.0)
        # log C(T-R, k') - log C(T, k'), finite only when T - R >= k'
        log_miss = (
            gammaln(t - r + 1) - gammaln(t - r - shown + 1) - gammaln(t + 1) + gammaln(t - shown + 1)
        )
        miss = np.where(t - r >= shown, np.exp(log_miss), 0.0)
    hit = np.where(r > 0, 1.0 - miss, 0.0)
    return precision, hit


def protocol_summary(targets: Targets, ks: Iterable[int] = (1, 5, 10, 20, 50, 100)) -> pl.DataFrame:
    """One row per cutoff k: units, users, target-set size (mean, min, max), mean relevant items per
    unit, and a random recommender's expected precision@k and hit@k.

    ``expected_precision``/``expected_hit`` are macro means over users (a user's value is the mean
    over its units, as under 1R); ``..._units`` are the micro means over units.
    """
    ks = [int(k) for k in ks]
    if any(k < 1 for k in ks):
        raise ConfigError(f"protocol summary: cutoffs k must be >= 1, got {ks}")
    sizes = np.asarray(targets.sizes, dtype=np.int64)
    relevant = targets.n_relevant
    _, user_of_unit = np.unique(targets.unit_user, return_inverse=True)
    n_users = int(user_of_unit.max()) + 1 if targets.n_units else 0
    units_per_user = np.bincount(user_of_unit, minlength=n_users)
    rows = []
    for k in ks:
        precision, hit = expected_random(sizes, relevant, k)
        rows.append(
            {
                "protocol": targets.protocol,
                "k": k,
                "units": targets.n_units,
                "users": n_users,
                "mean_size": float(sizes.mean()) if targets.n_units else None,
                "min_size": int(sizes.min()) if targets.n_units else None,
                "max_size": int(sizes.max()) if targets.n_units else None,
                "mean_relevant": float(relevant.mean()) if targets.n_units else None,
                "expected_precision": _macro(precision, user_of_unit, units_per_user),
                "expected_hit": _macro(hit, user_of_unit, units_per_user),
                "expected_precision_units": float(precision.mean()) if targets.n_units else None,
                "expected_hit_units": float(hit.mean()) if targets.n_units else None,
            }
        )
    schema = {
        "protocol": pl.String, "k": pl.Int32, "units": pl.Int64, "users": pl.Int64,
        "mean_size": pl.Float64, "min_size": pl.Int64, "max_size": pl.Int64,
        "mean_relevant": pl.Float64, "expected_precision": pl.Float64, "expected_hit": pl.Float64,
        "expected_precision_units": pl.Float64, "expected_hit_units": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def _macro(values: np.ndarray, user_of_unit: np.ndarray, units_per_user: np.ndarray) -> float | None:
    """Mean over users of each user's mean over its units."""
    if len(values) == 0:
        return None
    per_user = np.bincount(user_of_unit, weights=values, minlength=len(units_per_user))
    return float((per_user / units_per_user).mean())
