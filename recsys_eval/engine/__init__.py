"""Engines that run an evaluation beyond one process.

``runs`` runs ``evaluate`` and ``fold`` one fold of an experiment (a
:class:`~recsys_eval.pipeline.plan.FoldPlan`) on Apache Spark (the optional extra
``recsys-eval[spark]``; sessions from :mod:`recsys_eval.core.spark`), partitioned by user, with the same kernels and the
same per-unit values as the local engine; ``factors`` sends a factor model's user rows to their
users' partitions, ``split`` draws the per-user splits on Spark, and ``stats`` and ``paired`` make
the summary's bootstrap intervals and the analysis's paired tests as Spark jobs over the per-unit
files. Nothing here is imported by the local engine (the CLI's ``compare`` and ``report`` import
``paired``, which is light, to see whether a folder was run on Spark), and
nothing imports pyspark until a Spark session is asked for.
"""
