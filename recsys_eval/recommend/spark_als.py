"""``spark_als``: Spark ML's ALS fitted on Spark, its factors scored and broadcast like implicit's.

Spark ML's ALS with implicit preferences (Hu, Koren & Volinsky 2008) on the binary train matrix
(every interaction a preference of 1, as for implicit's models), fitted on the active Spark session
(the Spark engine's; with the local engine, a ``local[2]`` session started for it). Its input is a
Spark DataFrame of the train's ``(user, item)`` indices: on the Spark engine the rows the executors
read from the written split (:func:`trains_on_spark`: the driver sends no train row), else the
driver's train frame. Either way the pairs are put in one order first, hashed by user into
:data:`BLOCKS` partitions (as many as ALS's user and item blocks) and sorted within them: ALS sums each
user's and each item's terms in the order their rows reach its blocks, so the same pairs in that
order give the same factors to the bit (on one machine; across executors Spark fetches the blocks
in an order of its own).

The item factors come back to the driver as a dense float32 matrix (an item absent from train
keeps a zero row, so it scores 0); the user factors stay a Spark DataFrame (:attr:`SparkALS.user_frame`),
collected into a dense matrix the same way only when this process scores users itself (the local
engine): the Spark engine joins each user's row to the user's partition and broadcasts the item
factors alone (:mod:`recsys_eval.engine.factors`). From there the model is a
:class:`recsys_eval.recommend.implicit_models.FactorModel`: score = user factors . item factors,
full rankings tile-wise.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from recsys_eval.core import Interactions
from recsys_eval.core.spark import spark_session
from recsys_eval.recommend.implicit_models import FactorModel

#: Spark ML's ALS's default number of user blocks and of item blocks, and of the partitions its
#: input is put in order in.
BLOCKS = 10
#: Train sides whose rows Spark holds: (the driver's Interactions, a Spark DataFrame of its
#: ``user, item`` indices), set by :func:`trains_on_spark` while the Spark engine fits a fold.
_ON_SPARK: list[tuple[Interactions, Any]] = []


@contextmanager
def trains_on_spark(trains: list[tuple[Interactions, Any]]) -> Iterator[None]:
    """Within: a SparkALS fitted on one of ``trains``' Interactions (the very object) reads its
    pairs from the Spark DataFrame paired with it instead of sending the driver's frame to Spark."""
    start = len(_ON_SPARK)
    _ON_SPARK.extend(trains)
    try:
        yield
    finally:
        del _ON_SPARK[start:]


class SparkALS(FactorModel):
    """Spark ML's ALS; parameters ``factors`` (rank, default 10), ``iterations`` (10),
    ``regularization`` (0.1) and ``alpha`` (1.0), Spark ML's defaults, and its defaults' user and
    item :data:`BLOCKS`."""

    def __init__(self, params: dict | None = None, *, seed: int = 0) -> None:
        self.params = dict(params or {})
        self.seed = int(seed) % 2**31  # Spark ML takes a Java long; keep it positive and portable
        self.model = None
        self.user_frame = None  # the fitted user factors, (id, features), on Spark
        self._user_factors: np.ndarray | None = None

    def fit(self, train: Interactions) -> SparkALS:
        """Fit on ``train``: its rows on Spark when the engine holds them (:func:`trains_on_spark`),
        else its frame sent from this process."""
        from pyspark.sql import SparkSession

        pairs = next((rows for side, rows in _ON_SPARK if side is train), None)
        if pairs is None:
            spark = SparkSession.getActiveSession() or spark_session()  # the engine's, else local[2]
            pairs = spark.createDataFrame(train.frame.select("user", "item").to_arrow())
        return self.fit_pairs(pairs, train.n_users, train.n_items)

    def fit_pairs(self, pairs, n_users: int, n_items: int) -> SparkALS:
        """Fit on a Spark DataFrame of the train's ``user, item`` indices (int), put in one order
        first (see the module), over ``n_users`` users and ``n_items`` items."""
        from pyspark.ml.recommendation import ALS
        from pyspark.sql import functions as F

        p = self.params
        rank, blocks = p.get("factors", 10), BLOCKS
        als = ALS(rank=rank, maxIter=p.get("iterations", 10), regParam=p.get("regularization", 0.1),
                  alpha=p.get("alpha", 1.0), implicitPrefs=True, seed=self.seed, userCol="user",
                  itemCol="item", ratingCol="rating", numUserBlocks=blocks, numItemBlocks=blocks)
        ordered = (pairs.select(F.col("user").cast("int"), F.col("item").cast("int"), F.lit(1.0).cast("float")
                                .alias("rating"))
                   .repartition(blocks, "user").sortWithinPartitions("user", "item"))
        fitted = als.fit(ordered)
        self.n_items, self.n_users, self.rank = n_items, n_users, rank
        self.user_frame, self._user_factors = fitted.userFactors, None
        self.item_factors = factor_matrix(fitted.itemFactors, n_items, rank)
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

