"""Apache Spark sessions for the Spark engine (the optional extra ``recsys-eval[spark]``).

:func:`spark_session` starts (or reuses) a session on a master URL: ``local[N]``, ``spark://host:port``
(standalone), ``yarn`` or ``k8s://...``. What can go wrong before any data is read is turned into a
:class:`SparkError` that says what to do: PySpark missing (install the extra), no Java runtime (install
one, e.g. Debian's ``openjdk-17-jre-headless``), a standalone master that does not answer (checked by
a TCP connection bounded by ``timeout`` seconds before the JVM is started, since Spark itself would
retry for minutes and then leave the application waiting).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
from typing import TYPE_CHECKING, Any

from recsys_eval.errors import RecsysEvalError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

INSTALL_HINT = "install the Spark extra: pip install 'recsys-eval[spark]' (or uv sync --extra spark)"
JAVA_HINT = (
    "Spark needs a Java runtime (17 or later): install one (Debian/Ubuntu: apt-get install "
    "openjdk-17-jre-headless) or set JAVA_HOME"
)
DEFAULT_MASTER = "local[2]"
DEFAULT_TIMEOUT = 30.0
_STANDALONE = re.compile(r"^spark://(?P<hosts>.+)$")
_LOCAL = re.compile(r"^local(\[(\d+|\*)(,\d+)?\])?$")


class SparkError(RecsysEvalError):
    """The Spark engine cannot run: PySpark or Java missing, a master out of reach, a failed job."""


def require_pyspark() -> None:
    """Raise a SparkError naming the extra to install when PySpark (or its Arrow support) is absent."""
    try:
        import pyarrow  # noqa: F401  (mapInArrow hands partitions over as Arrow batches)
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise SparkError(f"the Spark engine needs {exc.name}, which is not installed: {INSTALL_HINT}") from None


def java_executable() -> str:
    """The ``java`` Spark will start: ``$JAVA_HOME/bin/java``, else the one on PATH; a SparkError
    when there is none."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        if os.access(candidate, os.X_OK):
            return candidate
        raise SparkError(f"JAVA_HOME is {home!r} but {candidate!r} is not an executable; {JAVA_HINT}")
    found = shutil.which("java")
    if found is None:
        raise SparkError(f"no 'java' on PATH: {JAVA_HINT}")
    return found


def check_master(master: str, timeout: float = DEFAULT_TIMEOUT) -> None:
    """A malformed master URL, or a standalone master none of whose hosts accepts a TCP connection
    within ``timeout`` seconds, is a SparkError naming it."""
    if not isinstance(master, str) or not master.strip():
        raise SparkError(f"Spark master must be a URL such as 'local[2]', 'spark://host:7077' or 'yarn', got {master!r}")
    if master.startswith("local"):
        if not _LOCAL.match(master):
            raise SparkError(f"Spark master {master!r}: expected local, local[N] or local[*]")
        return
    standalone = _STANDALONE.match(master)
    if standalone is None:
        return  # yarn, k8s://, mesos://: resolved by Spark's own cluster manager client
    errors = []
    for address in standalone.group("hosts").split(","):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise SparkError(f"Spark master {master!r}: expected spark://host:port, got {address!r}")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except OSError as exc:
            errors.append(f"{address}: {exc.strerror or exc}")
    raise SparkError(
        f"Spark master {master!r} is unreachable within {timeout:g} s ({'; '.join(errors)}); "
        "check the URL and that the master is running"
    )


def spark_session(
    master: str = DEFAULT_MASTER,
    *,
    app_name: str = "recsys-eval",
    timeout: float = DEFAULT_TIMEOUT,
    conf: dict[str, Any] | None = None,
) -> SparkSession:
    """A Spark session on ``master`` (the active one when it already runs on that master).

    On a local master the executors run this very Python (``spark.pyspark.python``), so that they
    see the same recsys_eval and numba; on a cluster the Python on the executors is the cluster's
    (``PYSPARK_PYTHON``, or ``--archives`` of a packed environment, see docs/SPARK.md).
    ``timeout`` (seconds) bounds the wait for a standalone master and Spark's network timeouts.
    """
    require_pyspark()
    java_executable()
    check_master(master, timeout)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and active.sparkContext.master == master:
        return active
    settings: dict[str, Any] = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.network.timeout": f"{max(int(timeout), 10) * 4}s",  # must exceed the heartbeat
        "spark.executor.heartbeatInterval": f"{max(int(timeout), 10)}s",
    }
    if master.startswith("local") and "PYSPARK_PYTHON" not in os.environ:
        settings["spark.pyspark.python"] = sys.executable
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    try:
        session = builder.getOrCreate()
    except (*spark_failures(), OSError) as exc:  # no JVM, or the cluster refused the app
        raise SparkError(f"could not start a Spark session on {master!r}: {_first_line(exc)}") from None
    session.sparkContext.setLogLevel("ERROR")
    return session


def spark_failures() -> tuple[type[BaseException], ...]:
    """The exceptions a failed Spark job raises on the driver (PySpark's own and the JVM's)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return PySparkException, Py4JError


def task_threads(spark: SparkSession) -> int:
    """The cores a Spark task owns (``spark.task.cpus``): the numba threads it may use."""
    return int(spark.conf.get("spark.task.cpus", "1"))


#: ``monotonically_increasing_id`` puts a row's partition in its bits from 33 up, its place below.
PLACE_BITS = 33


def global_ranks(frame, *columns: str, name: str):
    """``frame`` with the column ``name``: every row's 0-based place (a long) in the order of
    ``columns``, which must order the rows totally for the places to be the same on every run.
    No task or driver holds the rows: Spark sorts them (range partitions, in order) and numbers
    each within its partition (``monotonically_increasing_id``: the partition in the bits from
    :data:`PLACE_BITS` up, the place below), checkpointed so that the count and the numbering read
    the same rows; the driver receives one count per partition and adds each partition's offset by
    a broadcast join."""
    from pyspark.sql import functions as F

    ordered = frame.orderBy(*columns).withColumn("_place", F.monotonically_increasing_id()).localCheckpoint()
    part = F.shiftright("_place", PLACE_BITS)
    offsets, total = [], 0
    for index, rows in sorted((int(p), int(n)) for p, n in ordered.groupBy(part.alias("_part")).count().collect()):
        offsets.append((index, total))
        total += rows
    starts = frame.sparkSession.createDataFrame(offsets or [(0, 0)], "_part long, _offset long")
    place = F.col("_place").bitwiseAND(F.lit((1 << PLACE_BITS) - 1))
    return (ordered.withColumn("_part", part).join(F.broadcast(starts), "_part")
            .withColumn(name, F.col("_offset") + place).drop("_part", "_offset", "_place"))


def ranked(frame, column: str, name: str):
    """The distinct values of ``column`` of a Spark DataFrame, each with its rank among them in
    sorted order (``name``, a long from 0; Spark sorts text by its UTF-8 bytes, as polars does):
    :func:`global_ranks` of the distinct values."""
    return global_ranks(frame.select(column).distinct(), column, name=name)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
