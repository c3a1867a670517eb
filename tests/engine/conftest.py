"""A Spark session shared by the engine tests (local[2]); they skip, saying why, without Java or
PySpark, and are selected with ``-m spark``."""

from __future__ import annotations

import pytest
from spark_support import spark_missing


def pytest_configure(config):
    config.addinivalue_line("markers", "spark: needs a Java runtime and the spark extra (local Spark)")
    config.addinivalue_line("filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning")


@pytest.fixture(scope="session")
def spark():
    reason = spark_missing()
    if reason:
        pytest.skip(f"Spark tests skipped: {reason}")
    from recsys_eval.core.spark import spark_session

    session = spark_session("local[2]", conf={"spark.sql.shuffle.partitions": "4",
                                              "spark.default.parallelism": "2"})
    yield session
    session.stop()
