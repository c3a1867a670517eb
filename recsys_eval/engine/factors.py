"""Factor models on Spark: the item factors broadcast, each user's factor row joined to its partition.

A factor model scores ``user_factors[u] . item_factors[i]``. Every task needs all the item factors
(it ranks every item), but only its own users' rows of the user factors: broadcasting the whole
model would copy n_users x n_factors floats to every executor (100M users x 64 factors x 4 B =
25.6 GB each). So the executors get the item side alone (:func:`item_side`, broadcast), and the user
factors travel as rows of a Spark DataFrame ``(user, factor_model, factors)`` (:func:`user_factor_rows`;
``spark_als``'s never leave Spark) added to the fold's rows before they are partitioned by user:
a user's factor rows land in the user's partition, sorted beside its interactions, and a task
builds a :class:`PartitionFactors` of its chunk's users (:func:`take_user_factors`).

The bias predictor's user biases (:class:`~recsys_eval.recommend.rating.BiasPredictor`, one float64
per user) travel the same way, as rows ``(user, factor_model, user_bias)``: the broadcast model keeps
the global mean and the item biases, and a task gives it its users' biases
(:func:`with_user_biases`).

Scores are the whole model's to the bit: the same float32 rows are multiplied by the same item
factors (:meth:`PartitionFactors.factor_rows` maps a user index to its row), each score a
fixed-order sum that no tile or partition changes (:mod:`recsys_eval.recommend.factor_scores`).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from recsys_eval.core import Interactions
from recsys_eval.errors import ConfigError
from recsys_eval.recommend.implicit_models import FactorModel

#: The columns the user factor rows add to a fold's rows: which factor model (an index into the
#: task's ``factor_keys``) and the user's factors (a list of float32), or its bias (a float64).
MODEL, FACTORS, BIAS = "factor_model", "factors", "user_bias"


def has_user_rows(model) -> bool:
    """Whether a fitted model's per-user part travels as rows to its users' partitions (factor
    models' user factors, the bias predictor's user biases) instead of being broadcast."""
    from recsys_eval.recommend.rating import BiasPredictor

    return isinstance(model, FactorModel | BiasPredictor)


class PartitionFactors(FactorModel):
    """A factor model as a Spark task sees it: every item's factors, and the factor rows of some
    users (``users``, ascending, row r of ``user_factors`` holding ``users[r]``); a user without a
    row scores 0 everywhere, as ``spark_als`` scores a user absent from train. It scores as a
    :class:`~recsys_eval.recommend.implicit_models.FactorModel` through :meth:`factor_rows`."""

    def __init__(self, item_factors: np.ndarray, item_factors_t: np.ndarray,
                 users: np.ndarray | None = None, user_factors: np.ndarray | None = None) -> None:
        self.model = None  # no library object: nothing to fit or fold in
        self.item_factors, self._item_factors_t = item_factors, item_factors_t
        self.n_items = len(item_factors)
        width = item_factors.shape[1]
        self.users = np.zeros(0, np.int64) if users is None else np.asarray(users, np.int64)
        rows = np.zeros((0, width), np.float32) if user_factors is None else user_factors
        if len(rows) != len(self.users) or rows.shape[1:] != (width,):
            raise ValueError(f"{len(self.users)} users but user factors of shape {rows.shape}, "
                             f"expected ({len(self.users)}, {width})")
        if len(self.users) > 1 and np.any(np.diff(self.users) <= 0):
            raise ValueError("the users of partition factors must be distinct and ascending")
        # one zero row after the users' rows, for the users without one
        self.user_factors = np.ascontiguousarray(np.vstack([rows, np.zeros((1, width), np.float32)]),
                                                 dtype=np.float32)

    def with_users(self, users: np.ndarray, user_factors: np.ndarray) -> PartitionFactors:
        """The same item side with the factor rows of ``users`` (any order, distinct)."""
        order = np.argsort(users, kind="stable")
        return PartitionFactors(self.item_factors, self._item_factors_t, np.asarray(users)[order],
                                np.asarray(user_factors, np.float32)[order])

    def fit(self, train: Interactions) -> PartitionFactors:
        raise ConfigError("partition factors are read off a fitted factor model; fit the model itself")

    def factor_rows(self, users: np.ndarray) -> np.ndarray:
        """Row of ``user_factors`` of every user index: its own, or the zero row (the last)."""
        users = np.asarray(users, np.int64)
        rows = np.searchsorted(self.users, users)
        found = rows < len(self.users)
        found[found] = self.users[rows[found]] == users[found]
        return np.where(found, rows, len(self.users))


def item_side(model: FactorModel) -> PartitionFactors:
    """What every executor needs of a fitted factor model: its item factors (and no user row)."""
    return PartitionFactors(model.item_factors, model._item_factors_t)


def user_factor_rows(spark, model, index: int, user_type):
    """The user factors of ``model`` as a Spark DataFrame ``(user, factor_model, factors)`` (a bias
    predictor's biases: ``(user, factor_model, user_bias)``), one row per user index,
    ``factor_model`` = ``index`` and ``user`` cast to ``user_type`` (the fold's rows').
    ``spark_als``'s are its fitted DataFrame, never collected; a model fitted on the driver
    (implicit's, the bias predictor) has its matrix sent once, as rows, instead of once to every
    executor."""
    from pyspark.sql import functions as F

    from recsys_eval.recommend.rating import BiasPredictor
    from recsys_eval.recommend.spark_als import SparkALS

    if isinstance(model, BiasPredictor):
        import pyarrow as pa

        biases = pa.table({"user": pa.array(np.arange(len(model.user_bias), dtype=np.int64)),
                           BIAS: pa.array(np.asarray(model.user_bias, np.float64))})
        return spark.createDataFrame(biases).select(F.col("user").cast(user_type).alias("user"),
                                                    F.lit(index).cast("int").alias(MODEL), F.col(BIAS))
    if isinstance(model, SparkALS):
        frame = model.user_frame.select(F.col("id").alias("user"), F.col("features").alias(FACTORS))
    else:
        frame = spark.createDataFrame(_factor_table(model.user_factors))
    return frame.select(F.col("user").cast(user_type).alias("user"), F.lit(index).cast("int").alias(MODEL),
                        F.col(FACTORS).cast("array<float>").alias(FACTORS))


def _factor_table(user_factors: np.ndarray):
    """A (users, width) matrix as an Arrow table ``(user, factors)``: row u's factors as a list, in
    record batches small enough for a list's 32-bit offsets."""
    import pyarrow as pa

    n, width = user_factors.shape
    flat = np.ascontiguousarray(user_factors, np.float32).ravel()
    step = max(1, (2**31 - 1) // max(width, 1))
    batches = []
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        offsets = pa.array(np.arange(hi - lo + 1, dtype=np.int32) * np.int32(width))
        lists = pa.ListArray.from_arrays(offsets, pa.array(flat[lo * width:hi * width]))
        batches.append(pa.record_batch({"user": pa.array(np.arange(lo, hi, dtype=np.int64)), FACTORS: lists}))
    return pa.Table.from_batches(batches) if batches else pa.table(
        {"user": pa.array([], pa.int64()), FACTORS: pa.array([], pa.list_(pa.float32()))})


def take_user_factors(chunk: pl.DataFrame, keys: tuple) -> tuple[pl.DataFrame, dict]:
    """A chunk of a fold's rows split into its interaction rows (the factor columns dropped) and,
    per model of ``keys`` (indexed by ``factor_model``; on a Spark fold, the (system, train side)
    it was fitted for: a uniform test's model has user factors of its own), its users' factor rows
    as ``(users, (n, width) float32 matrix)``, or a bias predictor's as ``(users, float64 biases)``."""
    if MODEL not in chunk.columns:
        return chunk, {}
    is_factor = pl.col(MODEL).is_not_null()
    rows = chunk.filter(~is_factor).drop(MODEL, FACTORS, BIAS, strict=False)
    out = {}
    for (index,), part in chunk.filter(is_factor).partition_by(MODEL, as_dict=True).items():
        users = part.get_column("user").to_numpy()
        if BIAS in part.columns and not part.get_column(BIAS).has_nulls():  # a bias predictor's rows
            out[keys[index]] = (users, part.get_column(BIAS).to_numpy())
            continue
        flat = part.get_column(FACTORS).explode().to_numpy().astype(np.float32, copy=False)
        out[keys[index]] = (users, flat.reshape(len(users), -1))
    return rows, out


def with_user_biases(model, users: np.ndarray, biases: np.ndarray):
    """A broadcast bias predictor (its user biases dropped) made whole for the users ``users``
    (indices) with their ``biases``: an array over the indices up to the largest, 0 elsewhere (as
    the fitted model has for a user without train ratings)."""
    import copy

    ready = copy.copy(model)
    users = np.asarray(users, np.int64)
    ready.user_bias = np.zeros(int(users.max()) + 1 if len(users) else 0)
    ready.user_bias[users] = biases
    return ready
