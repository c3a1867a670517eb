"""One experiment fold on Spark gives the local runner's per-unit values for the same seeds."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from recsys_eval.core import Interactions
from recsys_eval.engine.partitions import FoldProtocol
from recsys_eval.engine.spark import (
    broadcastable,
    check_spark_protocol,
    check_spark_support,
    evaluate_fold_spark,
)
from recsys_eval.errors import ConfigError
from recsys_eval.measure import measure
from recsys_eval.recommend import make_recommender, rank_targets, recommend_top_k
from recsys_eval.split import make_split
from recsys_eval.targets import build_targets

METRICS = ["precision", "recall", "ap", "ndcg", "rr", "hit", "auc"]
K = [1, 5, 10]
KEYS = ["system", "protocol", "fold", "user", "unit", "metric", "k"]
PROTOCOLS = (
    FoldProtocol("AI+AR+AN", "AI+AR+AN", seed=11),
    FoldProtocol("AI+1R+NN10", "AI+1R+NN10", seed=12),
    FoldProtocol("UT+AR+AN", "UT+AR+AN", seed=13),
    FoldProtocol("AI+1R+NN5 fresh", "AI+1R+NN5", seed=14, fresh_negatives=True),
)


@pytest.fixture(scope="module")
def split():
    rng = np.random.default_rng(7)
    n_users, n_items = 60, 40
    pairs = {(int(u), int(i)) for u, i in zip(rng.integers(0, n_users, 900), rng.zipf(1.6, 900) % n_items,
                                               strict=True)}
    frame = pl.DataFrame(sorted(pairs), schema=["user", "item"], orient="row").with_columns(
        pl.Series("rating", rng.integers(1, 6, len(pairs)).astype(np.float32)),
        (pl.col("user") * 1000 + 5).alias("user"),  # raw ids that are not the index
    )
    return make_split(Interactions.from_frame(frame), "holdout", fraction=0.3, per_user=True, seed=3)


def _models(split):
    return {
        "popular": make_recommender("popular").fit(split.train),
        "als": make_recommender("als", {"factors": 8, "iterations": 3}, seed=5, threads=1).fit(split.train),
        "item_knn": make_recommender("item_knn", {"k": 10}, threads=1).fit(split.train),
    }


def _local(split, models, threshold):
    """The local runner's path: targets of the fold, ranked by each model, measured."""
    frames = []
    for system, model in models.items():
        for p in PROTOCOLS:
            targets = build_targets(split, p.name, threshold=threshold, seed=p.seed,
                                    fresh_negatives=p.fresh_negatives)
            rankings = (recommend_top_k(model, split.train, targets.unit_user, max(K), candidates=targets.candidates)
                        if targets.all_candidates else rank_targets(model, targets))
            frames.append(measure(rankings, targets, metrics=METRICS, k=K, system=system, protocol=p.label,
                                  fold=split.name, user_ids=split.train.user_ids))
    return pl.concat(frames)


def _assert_same(local, spark):
    assert spark.height == local.height and spark.columns == local.columns
    joined = local.join(spark, on=KEYS, how="full", nulls_equal=True, suffix="_spark")
    a, b = joined.get_column("value").to_numpy(), joined.get_column("value_spark").to_numpy()
    assert np.array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_allclose(a[~np.isnan(a)], b[~np.isnan(b)], rtol=0, atol=1e-12)


@pytest.mark.spark
@pytest.mark.parametrize("partitions", [1, 4])
def test_fold_equals_local_runner(spark, split, partitions):
    models = _models(split)
    threshold = 4.0  # users whose test ratings are all below: AR units without relevant items
    local = _local(split, models, threshold)
    got = evaluate_fold_spark(spark, split, models, PROTOCOLS, threshold=threshold, metrics=METRICS, k=K,
                              partitions=partitions)
    _assert_same(local, got)
    assert set(got.get_column("protocol")) == {p.label for p in PROTOCOLS}
    assert got.get_column("value").is_nan().any()  # undefined values stay NaN


@pytest.mark.spark
def test_spark_als_fits_on_spark_and_ranks_like_a_factor_model(spark, split):
    from recsys_eval.engine.spark_als import SparkALS

    model = SparkALS({"factors": 4, "iterations": 3}, seed=1).fit(split.train)
    assert model.user_factors.shape == (split.n_users, 4) and model.item_factors.shape == (split.n_items, 4)
    assert np.abs(model.item_factors).sum() > 0
    users, items = np.array([0, 1, 2]), np.array([3, 4, 5])
    np.testing.assert_allclose(model.score(users, items),
                               (model.user_factors[users] * model.item_factors[items]).sum(1), rtol=1e-5)
    protocols = PROTOCOLS[:2]
    got = evaluate_fold_spark(spark, split, {"spark_als": model}, protocols, metrics=METRICS, k=K, partitions=3)
    frames = []
    for p in protocols:
        targets = build_targets(split, p.name, seed=p.seed)
        rankings = (recommend_top_k(model, split.train, targets.unit_user, max(K)) if targets.all_candidates
                    else rank_targets(model, targets))
        frames.append(measure(rankings, targets, metrics=METRICS, k=K, system="spark_als", protocol=p.label,
                              fold=split.name, user_ids=split.train.user_ids))
    _assert_same(pl.concat(frames), got)


def test_support_is_checked_by_name():
    for name in ("popular", "random", "als", "bpr", "lmf", "item_knn", "spark_als"):
        check_spark_support(name)
    with pytest.raises(ConfigError, match="'user_knn' cannot run on the Spark engine: it scores a user"):
        check_spark_support("user_knn")
    with pytest.raises(ConfigError, match="'bias' cannot run on the Spark engine: it predicts ratings"):
        check_spark_support("bias")
    with pytest.raises(ConfigError, match="'my.mod:Model' cannot run on the Spark engine: a plugin"):
        check_spark_support("my.mod:Model")
    with pytest.raises(ConfigError, match="unknown recommender 'alss'.*did you mean 'als'"):
        check_spark_support("alss")


def test_protocols_that_need_other_users_are_refused():
    check_spark_protocol("UT+1R+NN20")
    with pytest.raises(ConfigError, match="TI candidates are the test items of every user"):
        check_spark_protocol("TI+AR+AN")
    with pytest.raises(ConfigError, match="popularity sampling"):
        check_spark_protocol("AI+1R+NN", sampling="popularity")
    with pytest.raises(ConfigError, match="percentiles design"):
        check_spark_protocol("AI+AR+AN", design="percentiles")


def test_broadcast_copies_drop_the_library_object(split):
    models = _models(split)
    light = broadcastable(models["als"])
    assert light.model is None and light.user_factors is models["als"].user_factors
    assert models["als"].model is not None  # the fitted model itself is untouched
    assert broadcastable(models["item_knn"]).user_items is None
    with pytest.raises(ConfigError, match="UserKNN cannot be broadcast"):
        broadcastable(make_recommender("user_knn").fit(split.train))
