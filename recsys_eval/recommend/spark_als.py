"""``spark_als``: Spark ML's ALS fitted on Spark, its factors scored and broadcast like implicit's.

Spark ML's ALS with implicit preferences (Hu, Koren & Volinsky 2008) on the binary train matrix
(every interaction a preference of 1, as for implicit's models), fitted on the active Spark session
(the Spark engine's; with the local engine, a ``local[2]`` session started for it).
The item factors come back to the driver as a dense float32 matrix (an item absent from train
keeps a zero row, so it scores 0); the user factors stay a Spark DataFrame (:attr:`SparkALS.user_frame`),
collected into a dense matrix the same way only when this process scores users itself (the local
engine): the Spark engine joins each user's row to the user's partition and broadcasts the item
factors alone (:mod:`recsys_eval.engine.factors`). From there the model is a
:class:`recsys_eval.recommend.implicit_models.FactorModel`: score = user factors . item factors,
full rankings tile-wise.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from recsys_eval.core import Interactions
from recsys_eval.core.spark import spark_session
from recsys_eval.recommend.implicit_models import FactorModel


class SparkALS(FactorModel):
    """Spark ML's ALS; parameters ``factors`` (rank, default 10), ``iterations`` (10),
    ``regularization`` (0.1) and ``alpha`` (1.0), Spark ML's defaults."""

    def __init__(self, params: dict | None = None, *, seed: int = 0) -> None:
        self.params = dict(params or {})
        self.seed = int(seed) % 2**31  # Spark ML takes a Java long; keep it positive and portable
        self.model = None
        self.user_frame = None  # the fitted user factors, (id, features), on Spark
        self._user_factors: np.ndarray | None = None

    def fit(self, train: Interactions) -> SparkALS:
        from pyspark.ml.recommendation import ALS
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession() or spark_session()  # the engine's, else local[2]
        p = self.params
        rank = p.get("factors", 10)
        als = ALS(rank=rank, maxIter=p.get("iterations", 10), regParam=p.get("regularization", 0.1),
                  alpha=p.get("alpha", 1.0), implicitPrefs=True, seed=self.seed, userCol="user",
                  itemCol="item", ratingCol="rating")
        pairs = train.frame.select("user", "item", pl.lit(1.0, pl.Float32).alias("rating"))
        fitted = als.fit(spark.createDataFrame(pairs.to_arrow()))
        self.n_items, self.n_users, self.rank = train.n_items, train.n_users, rank
        self.user_frame, self._user_factors = fitted.userFactors, None
        self.item_factors = factor_matrix(fitted.itemFactors, train.n_items, rank)
        self._item_factors_t = np.ascontiguousarray(self.item_factors.T)
        return self

    @property
    def user_factors(self) -> np.ndarray:
        """The dense (users, rank) user factors, collected from :attr:`user_frame` on first use."""
        if self._user_factors is None:
            self._user_factors = factor_matrix(self.user_frame, self.n_users, self.rank)
        return self._user_factors

    @user_factors.setter
    def user_factors(self, value: np.ndarray) -> None:
        self._user_factors = value


def factor_matrix(frame, rows: int, rank: int) -> np.ndarray:
    """Spark ML's ``(id, features)`` factors as a dense float32 (rows, rank) matrix."""
    table = frame.toArrow()
    out = np.zeros((rows, rank), dtype=np.float32)
    ids = table.column("id").to_numpy()
    features = table.column("features").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    out[ids] = features.reshape(len(ids), rank)
    return out

