"""Bootstrap intervals as Spark jobs over per-unit files (recsys_eval.engine.stats) equal the local
engine's to the last bit, on several partition counts, with integer and text user ids."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from recsys_eval.compare.bootstrap import bootstrap_columns
from recsys_eval.compare.frames import PER_USER_COLUMNS, partitions
from recsys_eval.core.results import PER_UNIT_SCHEMA
from recsys_eval.measure.aggregate import PartitionState

SEEDS = {("0", "AI+AR+AN"): 11, ("0", "AI+1R+NN20"): 12}


def _per_unit(text_ids: bool) -> pl.DataFrame:
    """Two systems x two protocols over 60 users with gaps in their ids (blocks of 5 of unequal
    sizes): one unit per user under AR, one to three under 1R; NaN values; a metric without k; f1
    with the relevant counts a run writes beside it (an auxiliary metric, not summarised)."""
    rng = np.random.default_rng(0)
    users = np.sort(rng.choice(400, 60, replace=False))
    rows = []
    for protocol, units in (("AI+AR+AN", np.ones(60, dtype=int)), ("AI+1R+NN20", rng.integers(1, 4, 60))):
        user = np.repeat(users, units)
        unit = np.arange(len(user))
        for system in ("als", "popular"):
            for metric, k in (("ndcg", 5), ("ndcg", 10), ("rr", None), ("f1", 5), ("n_relevant", None)):
                value = rng.random(len(user))
                value[rng.random(len(user)) < 0.15] = np.nan
                if metric == "n_relevant":
                    value = np.full(len(user), 3.0)
                rows.append(pl.DataFrame({
                    "system": system, "protocol": protocol, "fold": "0",
                    "user": [f"u{u:04d}" for u in user] if text_ids else user, "unit": unit,
                    "metric": metric, "k": pl.Series([k] * len(user), dtype=pl.Int32), "value": value}))
    frame = pl.concat(rows)
    return frame.with_columns(pl.col("user").cast(pl.String if text_ids else pl.Int64)).select(
        [c for c in PER_UNIT_SCHEMA])


def _local(per_unit: pl.DataFrame, n_resamples: int, block_users: int) -> pl.DataFrame:
    """The local engine's intervals, one (system, protocol, fold) at a time, as a run makes them."""
    rows = []
    for (system, protocol, fold), part in per_unit.partition_by(["system", "protocol", "fold"], as_dict=True).items():
        [users] = partitions(PartitionState.of(part).user_values().select(PER_USER_COLUMNS))
        mean, lower, upper = bootstrap_columns(users.values, users.users.to_numpy(), n_resamples=n_resamples,
                                               seed=SEEDS[(fold, protocol)], level=0.95, method="bca",
                                               block_users=block_users)
        for (_, metric, k), values in zip(users.columns.iter_rows(), zip(mean, lower, upper, strict=True),
                                          strict=True):
            rows.append((system, protocol, fold, metric, k, *values))
    return pl.DataFrame(rows, orient="row", schema={
        "system": pl.String, "protocol": pl.String, "fold": pl.String, "metric": pl.String, "k": pl.Int32,
        "mean": pl.Float64, "lower": pl.Float64, "upper": pl.Float64})


@pytest.mark.spark
@pytest.mark.parametrize(("text_ids", "n_parts"), [(False, 1), (False, 3), (True, 4)])
def test_bootstrap_on_spark_equals_local(spark, tmp_path, text_ids, n_parts):
    from recsys_eval.engine.stats import bootstrap_intervals

    per_unit = _per_unit(text_ids)
    files = []
    for i, chunk in enumerate(per_unit.partition_by(["system", "protocol"])):  # files of whole users, as a run writes
        for j, users in enumerate(np.array_split(chunk.get_column("user").unique().sort().to_numpy(), 2)):
            path = tmp_path / f"s{i}-{j}.parquet"
            chunk.filter(pl.col("user").is_in(users.tolist())).write_parquet(path)
            files.append(str(path))
    got = bootstrap_intervals(spark, files, undefined="skip", n_resamples=60, seeds=SEEDS, partitions=n_parts,
                              block_users=5)
    keys = ["system", "protocol", "fold", "metric", "k"]
    expected = _local(per_unit, 60, 5).sort(keys, nulls_last=True)
    got = got.sort(keys, nulls_last=True)
    assert got.height == expected.height == 2 * 2 * 4  # ndcg@5, ndcg@10, rr, f1@5
    assert got.equals(expected)  # every bit, NaN-free: each column has defined users
    assert (got.get_column("lower") < got.get_column("upper")).all()
