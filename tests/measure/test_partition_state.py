"""PartitionState: chunks of a partition's users reduced and merged give the summary of the whole
table bit for bit (hypothesis tables with NaN, f1 and run rows), with the partition's constant
system, protocol and fold held once rather than on every user row."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_eval.core.results import PER_UNIT_SCHEMA
from recsys_eval.measure.aggregate import PartitionState, fold_summary, grouped


def per_unit_table(seed: int, n_users: int, labels: list[tuple[str, str, str]], max_units: int = 3) -> pl.DataFrame:
    """Per-unit rows of the given (system, protocol, fold) partitions, users in order with
    1..max_units units each (one: an AR table, whose user values are its unit values), metrics with NaN values, f1 with its n_relevant rows, and a run row."""
    rng = np.random.default_rng(seed)
    frames = []
    for system, protocol, fold in labels:
        units = rng.integers(1, max_units + 1, n_users)
        user = np.repeat(np.arange(n_users), units)
        unit = np.arange(len(user))
        n_rel = rng.integers(0, 4, len(user)).astype(np.float64)
        for metric, k in (("ndcg", 5), ("ndcg", 10), ("recall", 5), ("f1", 5), ("n_relevant", None)):
            value = rng.random(len(user)) if metric != "n_relevant" else n_rel
            if metric == "recall":
                value[n_rel == 0] = np.nan
            if metric == "f1":
                hits = np.minimum(rng.integers(0, 6, len(user)), n_rel)
                value = np.where(n_rel > 0, 2 * hits / (k + n_rel), np.nan)
            frames.append(pl.DataFrame({
                "system": system, "protocol": protocol, "fold": fold, "user": user, "unit": unit,
                "metric": metric, "k": k, "value": value}, schema=PER_UNIT_SCHEMA))
        frames.append(pl.DataFrame({"system": [system], "protocol": [protocol], "fold": [fold], "user": [None],
                                    "unit": [None], "metric": ["catalog_coverage"], "k": [10],
                                    "value": [rng.random()]}, schema=PER_UNIT_SCHEMA))
    return pl.concat(frames)


def chunks_of(table: pl.DataFrame, bounds: list[int]) -> list[pl.DataFrame]:
    """The table's rows of users [bounds[i], bounds[i + 1]) (run rows with the last chunk)."""
    user = pl.col("user")
    parts = [table.filter((user >= lo) & (user < hi)) for lo, hi in zip(bounds, bounds[1:])]
    parts[-1] = pl.concat([parts[-1], table.filter(user.is_null())])
    return parts


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n_users=st.integers(2, 40), cuts=st.lists(st.integers(1, 39), max_size=4),
       undefined=st.sampled_from(["skip", "zero"]), max_units=st.sampled_from([1, 3]))
def test_merged_chunks_summarise_like_the_whole_partition(seed, n_users, cuts, undefined, max_units):
    table = per_unit_table(seed, n_users, [("als", "AI+1R+NN100", "f0")], max_units)
    bounds = sorted({0, n_users, *[c for c in cuts if c < n_users]})
    states = [PartitionState.of(part, undefined=undefined) for part in chunks_of(table, bounds)]
    merged = PartitionState.merge(states)
    assert merged.labels == {"system": "als", "protocol": "AI+1R+NN100", "fold": "f0"}
    assert not {"system", "protocol", "fold"} & set(merged.users.columns)  # held once, not per row
    assert not {"system", "protocol", "fold"} & set(merged.f_users.columns)
    # reference: the same rows beside another partition, so the keys stay columns (the general path)
    other = per_unit_table(seed + 1, 3, [("pop", "AI+1R+NN100", "f0")])
    reference = fold_summary(pl.concat([table, other]), undefined=undefined).filter(pl.col("system") == "als")
    summary = merged.summary(undefined)
    assert summary.equals(reference)
    assert merged.user_values().columns[:4] == ["system", "protocol", "fold", "user"]
    # and the obvious computation: per-user means of the units, then the mean over users
    ndcg = table.filter((pl.col("metric") == "ndcg") & (pl.col("k") == 5))
    expected = ndcg.group_by("user").agg(pl.col("value").mean()).get_column("value").mean()
    got = summary.filter((pl.col("metric") == "ndcg") & (pl.col("k") == 5)).get_column("mean").item()
    assert np.isclose(got, expected, rtol=1e-12)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), n_users=st.integers(1, 20))
def test_tables_mixing_partitions_keep_their_key_columns(seed, n_users):
    labels = [("als", "AI+AR+AN", "f0"), ("pop", "AI+AR+AN", "f0"), ("als", "AI+AR+AN", "f1")]
    table = per_unit_table(seed, n_users, labels)
    state = PartitionState.of(table)
    assert state.labels is None and "system" in state.users.columns
    parts = [PartitionState.of(per_unit_table(seed, n_users, [lab])) for lab in labels]
    merged = PartitionState.merge(parts)  # chunks of different partitions: labels back as columns
    whole = pl.concat([per_unit_table(seed, n_users, [lab]) for lab in labels])
    assert merged.labels is None
    assert merged.summary("skip").equals(fold_summary(whole))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n_rows=st.integers(1, 60), shuffle=st.booleans(),
       users_sorted=st.booleans())
def test_grouped_makes_every_key_tuple_one_run(seed, n_rows, shuffle, users_sorted):
    """grouped(): each key tuple one contiguous run (the table's order kept when it already was),
    and sums over its runs equal polars' group_by, whatever the input order."""
    rng = np.random.default_rng(seed)
    frame = pl.DataFrame({
        "metric": rng.choice(["ndcg", "ap", "rr"], n_rows), "k": rng.choice([5, 10], n_rows).astype(np.int32),
        "user": rng.integers(0, 6, n_rows), "value": rng.random(n_rows),
    })
    if not shuffle:  # runs as measure() writes them: metric blocks, users within each
        frame = frame.sort(["metric", "k", "user"], descending=[False, False, not users_sorted])
    keys = ["metric", "k", "user"]
    out, starts = grouped(frame, keys, then="value")
    heads = out[starts].select(keys)
    assert heads.height == frame.select(keys).n_unique()  # one run per tuple
    if not shuffle:
        assert out.equals(frame)  # already contiguous: the order is kept
    sums = np.add.reduceat(out.get_column("value").to_numpy(), starts)
    expected = frame.group_by(keys).agg(pl.col("value").sum())
    got = heads.with_columns(pl.Series("got", sums)).join(expected, on=keys)
    assert got.height == heads.height
    assert np.allclose(got.get_column("got"), got.get_column("value"), rtol=1e-12)


def test_a_partition_mixing_systems_or_with_a_null_label_is_refused_naming_them(tmp_path):
    from recsys_eval.core.results import ResultsFolder, partition_labels
    from recsys_eval.errors import DataError

    table = per_unit_table(1, 4, [("als", "AI+AR+AN", "f0"), ("pop", "AI+AR+AN", "f0")])
    one = table.filter(pl.col("system") == "als")
    assert partition_labels(one) == {"fold": "f0", "system": "als", "protocol": "AI+AR+AN"}
    folder = ResultsFolder.create(tmp_path, "t", "hash", resume=False)
    folder.set_layout(["f0"], ["als", "pop"], ["AI+AR+AN"])
    assert folder.write_partition(one).is_file()
    with pytest.raises(DataError, match=r"2 \(fold, system, protocol\) combinations.*'pop'"):
        folder.write_partition(table)
    with pytest.raises(DataError, match=r"none of them null.*None"):
        folder.write_partition(one.with_columns(pl.lit(None, pl.String).alias("fold")))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n_users=st.integers(2, 40), cuts=st.lists(st.integers(1, 39), max_size=4),
       undefined=st.sampled_from(["skip", "zero"]), order=st.randoms(use_true_random=False))
def test_summary_states_merge_in_any_order_to_the_same_bits(seed, n_users, cuts, undefined, order):
    """SummaryState: the chunks' exact sums, merged in any order (a Spark job's partitions arrive
    as their tasks end), give the whole partition's summary and t-interval moments bit for bit;
    each mean is the exact mean of the users' values, rounded once."""
    from fractions import Fraction

    from recsys_eval.measure.aggregate import SummaryState

    table = per_unit_table(seed, n_users, [("als", "AI+1R+NN100", "f0")])
    bounds = sorted({0, n_users, *[c for c in cuts if c < n_users]})
    states = [PartitionState.of(part, undefined=undefined).reduced() for part in chunks_of(table, bounds)]
    order.shuffle(states)
    merged = SummaryState.merge(states)
    whole = PartitionState.of(table, undefined=undefined)
    assert merged.summary(undefined).equals(whole.summary(undefined))
    assert merged.moments().equals(whole.reduced().moments())
    users = whole.user_values().filter((pl.col("metric") == "recall") & pl.col("value").is_not_nan())
    got = merged.summary(undefined).filter(pl.col("metric") == "recall").get_column("mean").item()
    if users.height == 0:  # no user with a defined recall (possible with 2 users): no mean
        assert got is None
        return
    exact = sum(map(Fraction, users.get_column("value").to_list())) / users.height
    assert got == float(exact)
