"""Every public entry of the Python API answers bad input with a RecsysEvalError whose message names
what is at fault (never a KeyError, AttributeError, IndexError or a silent wrong answer), and takes
pandas DataFrames wherever it takes a polars one."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import recsys_eval.compare as C
import recsys_eval.measure as M
import recsys_eval.recommend as R
import recsys_eval.targets as T
from recsys_eval.data.synthetic import synthetic_interactions
from recsys_eval.errors import RecsysEvalError
from recsys_eval.split import make_split


@pytest.fixture(scope="module")
def run():
    data = synthetic_interactions(200, 80, 6000, seed=1)
    split = make_split(data, "holdout", fraction=0.2, per_user=True, seed=1)
    targets = T.build_targets(split, "AI+AR+NN10", seed=1)
    popular = R.make_recommender("popular").fit(split.train)
    random = R.make_recommender("random", seed=3).fit(split.train)
    per_unit = pl.concat([
        M.measure(R.rank_targets(model, targets), targets, metrics=["ndcg", "precision"], k=[5], system=name)
        for name, model in (("popular", popular), ("random", random))
    ])
    return split, targets, popular, per_unit


CASES = {
    "unfitted model ranks": (
        lambda s, t, m, pu: R.rank_targets(R.make_recommender("popular"), t), "not fitted: call fit"),
    "unfitted model top k": (
        lambda s, t, m, pu: R.recommend_top_k(R.make_recommender("als"), s.train, np.arange(3), 5), "not fitted"),
    "model fitted on other items": (
        lambda s, t, m, pu: R.rank_targets(m, T.build_targets(
            make_split(synthetic_interactions(100, 90, 3000, seed=2), "holdout", fraction=0.2, seed=0),
            "AI+AR+NN5")), "fitted on 80 items but the targets index 90"),
    "user index out of range": (
        lambda s, t, m, pu: R.recommend_top_k(m, s.train, np.array([0, 10**6]), 5), r"integers in 0\.\.199"),
    "user indices not integers": (
        lambda s, t, m, pu: R.recommend_top_k(m, s.train, np.array([0.5]), 5), "float64 values"),
    "threshold not a number": (lambda s, t, m, pu: T.build_targets(s, "AI+AR+NN5", threshold="4"), "'4'"),
    "curve units out of range": (lambda s, t, m, pu: M.roc_points(R.rank_targets(m, t), t, units=[10**6]),
                                 r"0\.\.199"),
    "per-unit values as text": (
        lambda s, t, m, pu: M.summarize(pu.with_columns(pl.col("value").cast(pl.Utf8))), "'value' is String"),
    "p-value above 1": (lambda s, t, m, pu: C.adjust_pvalues(np.array([0.1, 2.0])), r"\[0, 1\].*2\.0"),
    "not a table": (lambda s, t, m, pu: M.summarize({"value": [1.0]}), "expected a polars or a pandas DataFrame"),
    "per-user frame without users": (lambda s, t, m, pu: C.paired_tests(pu.drop("user")), "missing columns"),
    "unknown metric": (lambda s, t, m, pu: M.measure(R.rank_targets(m, t), t, metrics=["ndgc"], k=[5]),
                       "did you mean 'ndcg'"),
    "fractional cutoff": (lambda s, t, m, pu: M.measure(R.rank_targets(m, t), t, metrics=["ndcg"], k=[2.5]),
                          "2.5"),
    "your scores of the wrong length": (lambda s, t, m, pu: R.rank_targets(np.ones(3), t),
                                        "one number per listed target item"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_raises_a_clear_recsys_eval_error(run, case):
    call, message = CASES[case]
    with pytest.raises(RecsysEvalError, match=message):
        call(*run)


def test_pandas_tables_give_the_same_answers_as_polars(run):
    _, _, _, per_unit = run
    pandas = per_unit.to_pandas()
    assert M.summarize(pandas).equals(M.summarize(per_unit))
    per_user = C.per_user(per_unit)
    assert C.confidence_intervals(per_user.to_pandas()).equals(C.confidence_intervals(per_user))
    assert C.paired_tests(per_user.to_pandas(), baseline="popular").equals(
        C.paired_tests(per_user, baseline="popular"))
    predictions = pl.DataFrame({"user": [1, 1, 2], "item": [1, 2, 1], "rating": [4.0, 2.0, 5.0],
                                "prediction": [3.5, 2.5, 4.0]})
    assert M.rating_metrics(predictions.to_pandas()).equals(M.rating_metrics(predictions))
