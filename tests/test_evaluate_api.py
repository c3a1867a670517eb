"""``recsys_eval.evaluate``: DataFrames (pandas or polars) or files in, a summary with intervals out;
checked against the per-unit path it stands for (load_run -> measure -> per-user means), against
scipy's t-interval, against one call per system, and, on TREC input, against trec_eval's averaging
(pytrec_eval) over every judged user."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import polars as pl
import pytest
from scipy import stats

import recsys_eval
from recsys_eval.data.runs import load_run, read_run
from recsys_eval.errors import ConfigError, DataError
from recsys_eval.measure import measure
from recsys_eval.measure.metrics import AUXILIARY_METRICS
from recsys_eval.pipeline.api import DEFAULT_METRICS

N_USERS, N_ITEMS = 40, 60


def _frames(seed: int = 3, depth: int = N_ITEMS) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Judgments (ratings 1..5, some users with none >= 4) and a run listing ``depth`` items per user."""
    rng = np.random.default_rng(seed)
    test = pl.DataFrame({"user": np.repeat(np.arange(N_USERS), 5), "item": rng.integers(0, N_ITEMS, 5 * N_USERS),
                         "rating": rng.integers(1, 6, 5 * N_USERS).astype(float)}).unique(["user", "item"])
    items = np.concatenate([rng.permutation(N_ITEMS)[:depth] for _ in range(N_USERS)])
    run = pl.DataFrame({"user": np.repeat(np.arange(N_USERS), depth), "item": items,
                        "score": rng.random(N_USERS * depth)})
    return test, run


def test_the_summary_is_the_per_unit_path_with_t_intervals():
    test, run = _frames()
    summary, per_unit = recsys_eval.evaluate(run, test, metrics=["ndcg", "recall", "auc"], k=[5, 10], threshold=4,
                                             system="als", per_unit=True)
    data = load_run(test, run, threshold=4)
    expected = measure(data.rankings, data.targets, metrics=["ndcg", "recall", "auc"], k=[5, 10], system="als",
                       fold="0", user_ids=data.user_ids)
    keys = ["metric", "k", "user"]
    assert per_unit.sort(keys).select(keys + ["value"]).equals(expected.sort(keys).select(keys + ["value"]))
    users = expected.filter(pl.col("value").is_not_nan()).group_by("metric", "k").agg(pl.col("value"))
    for metric, k, values in users.iter_rows():
        row = summary.filter((pl.col("metric") == metric) & pl.col("k").eq_missing(k)).row(0, named=True)
        values = np.asarray(values)
        low, high = stats.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=stats.sem(values))
        assert row["system"] == "als" and row["users_counted"] == len(values)
        assert row["users_left_out"] == N_USERS - len(values) and row["rule"] == "user mean"
        assert (row["mean"], row["lower"], row["upper"]) == pytest.approx((values.mean(), low, high), rel=1e-12)
    assert summary.get_column("undefined").unique().to_list() == ["skip"]


def test_pandas_in_with_its_own_column_names_gives_pandas_out_with_the_same_values():
    test, run = _frames()
    theirs = {"user": "user_id", "item": "movie_id", "score": "prediction", "rating": "stars"}
    pd_run = run.rename({v: k for v, k in [("user", "user_id"), ("item", "movie_id"), ("score", "prediction")]})
    pd_test = test.rename({"user": "user_id", "item": "movie_id", "rating": "stars"})
    out = recsys_eval.evaluate(pd_run.to_pandas(), pd_test.to_pandas(), columns=theirs, metrics=["ap"], k=[10],
                               threshold=4)
    assert isinstance(out, pd.DataFrame)
    same = recsys_eval.evaluate(run, test, metrics=["ap"], k=[10], threshold=4)
    assert out["mean"].tolist() == same.get_column("mean").to_list()


def test_a_system_column_is_scored_per_system_as_separate_calls_would():
    test, run = _frames()
    _, other = _frames(seed=9)
    both = pl.concat([run.with_columns(system=pl.lit("a")), other.with_columns(system=pl.lit("b"))])
    together = recsys_eval.evaluate(both, test, metrics=["ndcg", "hit"], k=[10], threshold=4)
    alone = pl.concat([recsys_eval.evaluate(run, test, metrics=["ndcg", "hit"], k=[10], threshold=4, system="a"),
                       recsys_eval.evaluate(other, test, metrics=["ndcg", "hit"], k=[10], threshold=4, system="b")])
    assert together.equals(alone)
    with pytest.raises(ConfigError, match="system='x' labels a run of one system, but RUN has a 'system' column"):
        recsys_eval.evaluate(both, test, system="x")


def test_a_run_file_of_two_systems_is_refused_naming_them_not_as_repeated_pairs(tmp_path):
    _, run = _frames(depth=5)
    both = pl.concat([run.with_columns(system=pl.lit("als")), run.with_columns(system=pl.lit("bpr"))])
    both.write_csv(tmp_path / "run.csv")
    with pytest.raises(DataError, match=r"run.csv: column 'system' holds 2 systems \('als', 'bpr'\); a run is one "
                                        r"system's ranked lists.*recsys_eval.evaluate"):
        read_run(tmp_path / "run.csv")


def test_a_metric_the_run_depth_truncates_is_warned_of_and_a_full_list_is_not():
    test, run = _frames(depth=10)
    with pytest.warns(UserWarning, match=r"AUC reads every candidate's place.*at most 10 items per user"):
        recsys_eval.evaluate(run, test, metrics=["auc"], k=[10], threshold=4)
    with pytest.warns(UserWarning, match=r"nDCG@20 reads the top 20, but the run lists at most 10"):
        recsys_eval.evaluate(run, test, metrics=["ndcg"], k=[10, 20], threshold=4)
    test, full = _frames()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        recsys_eval.evaluate(full, test, metrics=["auc", "ndcg"], k=[10, 20], threshold=4)


def test_trec_input_averages_as_trec_eval_does_and_says_so(tmp_path):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    test, run = _frames(depth=20)
    grade = (pl.col("rating") >= 4).cast(pl.Int64) * pl.col("rating").cast(pl.Int64)  # 0: judged non-relevant
    qrels = test.with_columns(grade.alias("grade"))
    assert qrels.group_by("user").agg(pl.col("grade").max()).filter(pl.col("grade") == 0).height > 0
    (tmp_path / "test.qrels").write_text("".join(f"{u} 0 {i} {g}\n" for u, i, _, g in qrels.iter_rows()))
    (tmp_path / "run.trec").write_text("".join(f"{u} Q0 {i} 0 {s!r} sys\n" for u, i, s in run.iter_rows()))
    with pytest.warns(UserWarning, match="count as zero in the means"):
        ours = recsys_eval.evaluate(tmp_path / "run.trec", tmp_path / "test.qrels", metrics=["recall", "ndcg", "ap"],
                                    k=[10])
    judged = {str(u): {} for u in qrels.get_column("user").unique()}
    for u, i, _, g in qrels.iter_rows():
        judged[str(u)][str(i)] = g
    listed = {str(u): {} for u in run.get_column("user").unique()}
    for u, i, s in run.iter_rows():
        listed[str(u)][str(i)] = s
    theirs = pytrec_eval.RelevanceEvaluator(judged, {"recall_10", "ndcg_cut_10", "map_cut_10"}).evaluate(listed)
    for ours_name, name in (("recall", "recall_10"), ("ndcg", "ndcg_cut_10"), ("ap", "map_cut_10")):
        row = ours.filter(pl.col("metric") == ours_name).row(0, named=True)
        assert row["undefined"] == "zero" and row["users_left_out"] == 0 and row["users_counted"] == len(judged)
        assert row["mean"] == pytest.approx(np.mean([q[name] for q in theirs.values()]), abs=1e-12)
    # the same judgments as CSV keep the documented default: users without a relevant item left out
    qrels.select("user", "item", pl.col("grade").alias("rating")).write_csv(tmp_path / "test.csv")
    csv = recsys_eval.evaluate(tmp_path / "run.trec", tmp_path / "test.csv", metrics=["recall"], k=[10], threshold=1)
    assert csv.get_column("undefined").to_list() == ["skip"] and csv.get_column("users_left_out")[0] > 0


@pytest.mark.parametrize("kind", ["polars", "pandas"])
def test_one_call_with_no_options_gives_every_default_metric_with_its_t_interval(kind):
    test, run = _frames()
    if kind == "pandas":
        summary = pl.from_pandas(recsys_eval.evaluate(run.to_pandas(), test.to_pandas()))
    else:
        summary = recsys_eval.evaluate(run, test)
    data = load_run(test, run)  # no threshold: every judged item is relevant
    expected = measure(data.rankings, data.targets, metrics=list(DEFAULT_METRICS), k=[1, 5, 10],
                       fold="0", user_ids=data.user_ids)
    per_key = expected.filter(pl.col("value").is_not_nan() & ~pl.col("metric").is_in(AUXILIARY_METRICS)).group_by(
        "metric", "k").agg(pl.col("value"))
    keys = set(summary.select("metric", "k").iter_rows())
    # the 7 cutoff metrics at k = 1, 5, 10 and AUC per user, and F1 of the pooled counts at each k
    assert keys == set(per_key.select("metric", "k").iter_rows()) | {("f1_pooled", k) for k in (1, 5, 10)}
    assert per_key.height == 7 * 3 + 1
    assert summary.get_column("system").unique().to_list() == ["system"]
    for metric, k, values in per_key.iter_rows():
        row = summary.filter((pl.col("metric") == metric) & pl.col("k").eq_missing(k)).row(0, named=True)
        values = np.asarray(values)
        low, high = stats.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=stats.sem(values))
        assert (row["mean"], row["lower"], row["upper"]) == pytest.approx((values.mean(), low, high), rel=1e-12)
