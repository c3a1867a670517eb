"""Why local Spark cannot run here, for the tests that skip without it: one check (the spark extra,
then Java) for the engine tests and the registry's Spark-backed recommender."""

from __future__ import annotations

from recsys_eval.core.spark import SparkError, java_executable, require_pyspark


def spark_missing() -> str | None:
    """What local Spark lacks (the SparkError's message, naming what to install), or None."""
    try:
        require_pyspark()
        java_executable()
    except SparkError as exc:
        return str(exc)
    return None
