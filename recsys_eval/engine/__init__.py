"""Engines that run an evaluation beyond one process.

``runs`` runs ``evaluate`` and ``fold`` one fold of an experiment (a
:class:`~recsys_eval.pipeline.plan.FoldPlan`) on Apache Spark (the optional extra
``recsys-eval[spark]``; sessions from :mod:`recsys_eval.core.spark`), partitioned by user, with the same kernels and the
same per-unit values as the local engine; ``factors`` sends a factor model's user rows to their
users' partitions, and ``split`` draws the per-user splits on Spark. Nothing here is imported by the local engine, and
nothing imports pyspark until a Spark session is asked for.
"""
