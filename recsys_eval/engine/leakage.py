"""The leakage audit of folds Spark wrote (docs/CONVENTIONS.md#leakage): the counts of
:mod:`recsys_eval.split.leakage` made by Spark jobs over the written sides, so that the driver
reads no row of them.

Per fold, with T0 the earliest test timestamp and tau_u user u's earliest: a user's test rows
and tau_u (a group by user of the test side), its train rows, those after T0 and those after
tau_u (the train side joined to tau by user: a user without a test row has no tau and never
leaks), and its test rows whose item was first trained on after tau_u (the test side joined to
each item's first train time; an item never trained on is not a future item). The fold's row is
made of their sums, by :func:`recsys_eval.split.leakage.fold_row`; the per-user table, in user
order (the raw ids' sorted order, which is the index's), is written by Spark into the split's
scratch (``<scratch>/_leakage/<fold>/``, :class:`~recsys_eval.engine.inputs.SplitScratch`) and
streamed into the results folder's file, never held whole by the driver.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from recsys_eval.split.leakage import DEFAULT_THRESHOLD, LeakageAudit, check_threshold, flagged, fold_row

if TYPE_CHECKING:
    from recsys_eval.engine.inputs import WrittenSplit

#: The per-user tables' folder in the split's scratch, beside the folds' and the index's.
LEAKAGE = "_leakage"


def leakage_audit_on_spark(splits: list[WrittenSplit], threshold: float = DEFAULT_THRESHOLD) -> LeakageAudit:
    """The audit of written folds (see the module), its per-user table a lazy scan of the files
    Spark wrote."""
    check_threshold(threshold)
    folds, users = [], []
    for split in splits:
        row, written = _fold_counts(split)
        folds.append(row)
        users.append(pl.scan_parquet(written / "*.parquet"))
    return LeakageAudit(flagged(pl.concat(folds), threshold), pl.concat(users), threshold)


def _fold_counts(split: WrittenSplit) -> tuple[pl.DataFrame, Path]:
    """A fold's row of the audit, and the local folder of the per-user table Spark wrote."""
    from pyspark.sql import functions as F

    from recsys_eval.engine.inputs import in_order

    train = split.train.spark_rows().select("user", "item", F.col("timestamp").cast("long").alias("t"))
    test = split.test.spark_rows().select("user", "item", F.col("timestamp").cast("long").alias("t"))
    start = test.agg(F.min("t")).first()[0]
    tau = test.groupBy("user").agg(F.min("t").alias("tau"), F.count("*").alias("n_test"))
    first_seen = train.groupBy("item").agg(F.min("t").alias("first"))
    future = (test.join(first_seen, on="item").join(tau, on="user").filter(F.col("first") > F.col("tau"))
              .groupBy("user").agg(F.count("*").alias("future")))
    trained = (train.join(tau.select("user", "tau"), on="user", how="left")
               .groupBy("user").agg(F.count("*").alias("n_train"),
                                    F.sum((F.col("t") > F.lit(start)).cast("long")).alias("after_start"),
                                    F.sum(F.coalesce(F.col("t") > F.col("tau"), F.lit(False)).cast("long"))
                                    .alias("after_user")))
    totals = trained.agg(F.sum("after_start"), F.sum("after_user")).first()
    users = (tau.join(trained, on="user", how="left").join(future, on="user", how="left")
             .fillna(0, subset=["n_train", "after_start", "after_user", "future"]))
    counts = users.agg(F.count("*"), F.sum("future"), F.sum((F.col("after_user") > 0).cast("long"))).first()
    row = fold_row(split.name, int(start), len(split.train), len(split.test), int(counts[0]), int(totals[0] or 0),
                   int(totals[1] or 0), int(counts[1] or 0), int(counts[2] or 0))
    index = split.test.index
    written = f"{LEAKAGE}/{split.name}"
    (in_order(users, "user").select(
        F.lit(split.name).alias("fold"), "user", F.col("tau").alias("test_start"), "n_train", "n_test",
        F.col("after_start").alias("n_train_after_test_start"), F.col("after_user").alias("n_train_after_user_test"),
        F.col("future").alias("n_test_future_items"), (F.col("after_user") > 0).alias("leaking"))
     .write.mode("overwrite").parquet(index.scratch.at(written)))
    return row, index.scratch.fetched(index.spark(), written)
