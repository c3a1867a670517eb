import polars as pl
import pytest
from scipy import stats

from recsys_eval.compare import (
    ordering_agreement,
    pair_agreement,
    protocol_agreement,
    swapped_pairs,
)
from recsys_eval.errors import ConfigError, DataError


def summary(rows):
    return pl.DataFrame(rows, schema=["system", "protocol", "metric", "k", "mean"], orient="row").with_columns(
        pl.col("k").cast(pl.Int32)
    )


FULL = {"pop": 0.30, "knn": 0.20, "mf": 0.25, "random": 0.01}
SAMPLED = {"pop": 0.50, "knn": 0.70, "mf": 0.60, "random": 0.10}


def test_kendall_tau_and_swaps_between_protocols():
    rows = [(s, "AI+AR+AN", "ndcg", 10, v) for s, v in FULL.items()]
    rows += [(s, "AI+1R+NN", "ndcg", 10, v) for s, v in SAMPLED.items()]
    rows += [(s, "AI+AR+AN", "ndcg", 5, 1.0) for s in FULL]  # another cutoff, ignored
    result = protocol_agreement(summary(rows), metric="ndcg", k=10).row(0, named=True)
    assert (result["metric"], result["k"], result["n_systems"]) == ("ndcg", 10, 4)
    assert (result["protocol_a"], result["protocol_b"]) == ("AI+1R+NN", "AI+AR+AN")
    systems = sorted(FULL)
    ref = stats.kendalltau([SAMPLED[s] for s in systems], [FULL[s] for s in systems])
    assert (result["tau"], result["p_value"]) == pytest.approx((ref.statistic, ref.pvalue))
    # sampled order knn > mf > pop > random, full order pop > mf > knn > random: three pairs flip
    assert sorted(result["swaps"]) == ["knn vs mf", "knn vs pop", "mf vs pop"]
    assert result["tau"] == pytest.approx((3 - 3) / 6)


def test_fold_means_are_averaged_and_metrics_without_cutoff_are_matched():
    rows = pl.DataFrame(
        {"system": ["a", "a", "b", "b", "a", "b"], "protocol": ["p", "p", "p", "p", "q", "q"],
         "fold": ["0", "1", "0", "1", "0", "0"], "metric": ["auc"] * 6,
         "k": pl.Series([None] * 6, dtype=pl.Int32), "mean": [0.9, 0.5, 0.6, 0.6, 0.1, 0.2]}
    )
    # under p: a = 0.7 > b = 0.6; under q: b ahead
    assert protocol_agreement(rows, metric="auc", k=None)["swaps"].to_list() == [["a vs b"]]


def test_errors():
    one_system = summary([("a", "p", "ndcg", 10, 0.1), ("a", "q", "ndcg", 10, 0.2)])
    with pytest.raises(ConfigError, match="at least two systems"):
        protocol_agreement(one_system, metric="ndcg", k=10)
    one_protocol = summary([("a", "p", "ndcg", 10, 0.1), ("b", "p", "ndcg", 10, 0.2)])
    with pytest.raises(ConfigError, match="at least two protocols"):
        protocol_agreement(one_protocol, metric="ndcg", k=10)
    with pytest.raises(DataError, match="no rows for metric 'recall'"):
        protocol_agreement(one_protocol, metric="recall", k=10)


def test_pair_agreement_and_ordering_agreement():
    assert swapped_pairs(FULL, FULL) == []
    assert pair_agreement(FULL, SAMPLED) == pytest.approx(3 / 6)
    corrected = {"pop": 0.31, "knn": 0.19, "mf": 0.26, "random": 0.02}
    assert ordering_agreement(FULL, SAMPLED, corrected) == {"sampled": 0.5, "corrected": 1.0}


def test_means_within_the_tie_tolerance_are_ties_never_swaps():
    from recsys_eval.compare.agreement import TIE_TOLERANCE, order

    first = {"a": 0.3, "b": 0.3 + TIE_TOLERANCE / 2, "c": 0.1}
    second = {"a": 0.3 + TIE_TOLERANCE / 3, "b": 0.3, "c": 0.1}  # a and b exchange places by noise only
    assert order(0.3, 0.3 + TIE_TOLERANCE / 2) == 0 and order(0.3, 0.3 + 2 * TIE_TOLERANCE) == -1
    assert swapped_pairs(first, second) == []
    assert pair_agreement(first, second) == 1.0
    assert swapped_pairs(first, {"a": 0.3, "b": 0.2, "c": 0.1}) == []  # tied under first: not a swap
    assert swapped_pairs({"a": 0.3, "b": 0.2}, {"a": 0.2, "b": 0.3}) == [("a", "b")]

