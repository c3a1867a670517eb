"""Apache Spark sessions for the Spark engine (the optional extra ``recsys-eval[spark]``).

:func:`spark_session` starts (or reuses) a session on a master URL: ``local[N]``, ``spark://host:port``
(standalone), ``yarn`` or ``k8s://...``. What can go wrong before any data is read is turned into a
:class:`SparkError` that says what to do: PySpark missing (install the extra), no Java runtime (install
one, e.g. Debian's ``openjdk-17-jre-headless``), a standalone master that does not answer (checked by
a TCP connection bounded by ``timeout`` seconds before the JVM is started, since Spark itself would
retry for minutes and then leave the application waiting).

A Spark job that fails reaches the driver as PySpark's or the JVM's exception, whose message is
Spark's and the worker's tracebacks: :func:`job_error` turns it into one RecsysEvalError, the error
a task raised for bad input (a partition's DataError) when it carries one. The callers of the
Python API get it from the jobs that read their input; the CLI turns every other Spark failure
that reaches it into one line by the same function.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
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
#: The log4j configuration the driver's JVM starts with: errors only (the file says why).
LOG_CONFIG = Path(__file__).with_name("spark_log4j2.properties")
#: PySpark's notice, on every import of its pandas helpers, that pandas 3 is not yet fully supported:
#: the engine hands Spark Arrow batches, never pandas frames, so it is not printed (driver and workers).
_PANDAS_NOTICE = "PySpark does not yet fully support pandas"
#: A recsys_eval error a Python worker raised, as its traceback's last line names it.
_ERROR = re.compile(r"recsys_eval\.\w+(?:\.\w+)*\.(\w+Error): (.*)")
#: What is no message: py4j's header, a Python or Java traceback's frames.
_NOISE = re.compile(r"^(An error occurred while calling |An exception was thrown from the Python worker|"
                    r"Traceback \(most recent call last\)|File \"|at |\.\.\. \d+ more|Caused by: )")
#: A Python or Java exception's line (py4j puts ``: `` before the Java one), ``package.Class: message``.
_EXCEPTION_LINE = re.compile(r"^(?:: )?(?:[A-Za-z_$][\w$]*\.)*([A-Za-z_$][\w$]*(?:Error|Exception)): ?(.*)$")


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
    see the same recsys_eval and numba, and their Python workers' daemon is PySpark's without the
    traceback of a cancelled task's worker (:mod:`recsys_eval.core.spark_daemon`); on a cluster the Python on the executors is the cluster's
    (``PYSPARK_PYTHON``, or ``--archives`` of a packed environment, see docs/SPARK.md).
    ``timeout`` (seconds) bounds the wait for a standalone master and Spark's network timeouts.
    The driver's JVM, when this call starts it, logs errors alone (:data:`LOG_CONFIG`), and
    PySpark's pandas notice is not printed (:data:`_PANDAS_NOTICE`): a command's output is its own.
    """
    require_pyspark()
    java_executable()
    check_master(master, timeout)
    warnings.filterwarnings("ignore", message=_PANDAS_NOTICE, category=FutureWarning)
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
    if master.startswith("local"):  # its workers' stderr is this process's: see the module
        settings["spark.python.daemon.module"] = "recsys_eval.core.spark_daemon"
        settings["spark.executorEnv.PYTHONWARNINGS"] = f"ignore:{_PANDAS_NOTICE}:FutureWarning"
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    try:
        with _log_config():
            session = builder.getOrCreate()
    except (*spark_failures(), OSError) as exc:  # no JVM, or the cluster refused the app
        raise SparkError(f"could not start a Spark session on {master!r}: {_cause(str(exc)) or type(exc).__name__}"
                         ) from None
    session.sparkContext.setLogLevel("ERROR")
    _quiet_task_failures(session)
    return session


@contextmanager
def _log_config() -> Iterator[None]:
    """The environment a driver JVM started now inherits names :data:`LOG_CONFIG` (log4j reads
    ``LOG4J_CONFIGURATION_FILE``), unless the user set it: passed so, and not as
    ``spark.driver.extraJavaOptions``, it leaves the Java options of the user's Spark config
    alone. This process's environment is as it was afterwards."""
    if "LOG4J_CONFIGURATION_FILE" in os.environ:
        yield
        return
    os.environ["LOG4J_CONFIGURATION_FILE"] = LOG_CONFIG.as_uri()
    try:
        yield
    finally:
        del os.environ["LOG4J_CONFIGURATION_FILE"]


#: The driver's log4j loggers that print a failed task's error, and whatever they print only so.
_TASK_FAILURE_LOGS = {
    "org.apache.spark.executor.Executor": None,  # "Exception in task 8.0 in stage 77.0" + the worker's traceback
    "org.apache.spark.scheduler.TaskSetManager": None,  # "Task 8 in stage 77.0 failed 1 times; aborting job"
    "org.apache.spark.sql.execution.datasources.FileFormatWriter": None,  # "Aborting job ..." + the traceback
    "org.apache.spark.util.Utils": "Aborting task",  # the writing task's, + the traceback; not its other errors
}


def _quiet_task_failures(session: SparkSession) -> None:
    """Silence what the driver's JVM logs (on the process's stderr) of a failed task: the task's
    error, the Python worker's whole traceback in it, then that the job is aborted. The job's
    failure then reaches the driver's Python as an exception carrying that error, which the
    callers make one RecsysEvalError (:func:`job_error`) and the CLI prints as one line: the log
    lines only repeat it, as a traceback before the message. The loggers of
    :data:`_TASK_FAILURE_LOGS` are turned off, or for one that logs other errors too (``Utils``),
    the message of a failed task alone is dropped (a log4j ``RegexFilter``); every other error
    is still logged. On a local master the executors log in the driver's JVM; a cluster's
    executors keep their logs, where a failed task's traceback is looked for."""
    jvm = session.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    core = log4j.core
    result = getattr(core, "Filter$Result")
    context = log4j.LogManager.getContext(False)
    for name, message in _TASK_FAILURE_LOGS.items():
        if message is None:
            core.config.Configurator.setLevel(name, log4j.Level.OFF)
            continue
        core.config.Configurator.setLevel(name, context.getRootLogger().getLevel())  # a config of its own
        config = context.getConfiguration().getLoggerConfig(name)
        if config.getFilter() is None:  # not yet: a session started again in this JVM
            config.addFilter(core.filter.RegexFilter.createFilter(f"^{message}.*", None, False, result.DENY,
                                                                  result.NEUTRAL))
    context.updateLoggers()


def spark_failures() -> tuple[type[BaseException], ...]:
    """The exceptions a failed Spark job raises on the driver (PySpark's own and the JVM's)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return PySparkException, Py4JError


def job_error(exc: BaseException) -> RecsysEvalError:
    """A failed Spark job as a RecsysEvalError: the recsys_eval error a task raised (bad data found
    in a partition), of its class and with its message, when Spark's message carries one (the last
    one it names: a worker's traceback ends with the error raised); else a SparkError with the
    line of Spark's message that says what failed (:func:`_cause`)."""
    text = str(exc)
    found = _ERROR.findall(text)
    if found:
        kind, message = found[-1]
        return _error_classes().get(kind, RecsysEvalError)(message.strip())
    return SparkError(f"the Spark job failed: {_cause(text) or type(exc).__name__}")


def _error_classes() -> dict[str, type[RecsysEvalError]]:
    """RecsysEvalError and every class derived from it, by name."""
    found, todo = {}, [RecsysEvalError]
    while todo:
        cls = todo.pop()
        found[cls.__name__] = cls
        todo += cls.__subclasses__()
    return found


def _cause(text: str) -> str:
    """The line of a Spark failure's message that says what failed, its exception's class named
    without its package. A task's Python error: its traceback's last exception line
    (``ValueError: ...``). A JVM error: py4j's first line only names the call (``An error occurred
    while calling o123.collectToPython.``), the next is the Java exception's (``SparkException: Job
    aborted due to stage failure: ...``)."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not _NOISE.match(line.strip())]
    if "Traceback (most recent call last)" in text:
        lines = [line for line in lines if _EXCEPTION_LINE.match(line)][-1:] or lines
    if not lines:
        return ""
    found = _EXCEPTION_LINE.match(lines[0])
    return f"{found.group(1)}: {found.group(2)}" if found else lines[0].removeprefix(": ")


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
