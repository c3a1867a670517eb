"""Engines that run an evaluation beyond one process.

``recsys_eval.core.spark`` runs ``evaluate`` and one fold of an experiment on Apache Spark
(the optional extra ``recsys-eval[spark]``), partitioned by user, with the same kernels and the
same per-unit values as the local engine. Nothing here is imported by the local engine, and
nothing imports pyspark until a Spark session is asked for.
"""
