import numpy as np
import polars as pl
import pytest


def user_frame(values: dict[str, np.ndarray], *, protocol="AI+AR+AN", fold="0", metric="ndcg", k=10) -> pl.DataFrame:
    """A per-user frame for one protocol x fold x metric x k: users 0..n-1 per system (NaN allowed)."""
    parts = []
    for system, vals in values.items():
        vals = np.asarray(vals, dtype=np.float64)
        parts.append(
            pl.DataFrame(
                {
                    "system": system,
                    "protocol": protocol,
                    "fold": fold,
                    "user": np.arange(vals.size, dtype=np.int64),
                    "metric": metric,
                    "k": pl.Series([k] * vals.size, dtype=pl.Int32),
                    "value": vals,
                }
            )
        )
    return pl.concat(parts)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
