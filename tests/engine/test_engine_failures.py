"""A failed Spark job reaches the CLI user as one line: the recsys_eval error a task raised, else
the line of Spark's message that says what failed; neither the driver's log of the failed task
nor a Python traceback is printed, nor, failing or not, Spark's start-up warnings. The messages parsed here are the shapes PySpark 4 gives (a
Python worker's error, a JVM error through py4j)."""

from __future__ import annotations

import re
import subprocess
import sys

import polars as pl
import pytest
from spark_support import spark_missing

from recsys_eval.core.spark import SparkError, job_error
from recsys_eval.errors import ConfigError, DataError, RecsysEvalError

WORKER = """An exception was thrown from the Python worker:
Traceback (most recent call last):
  File "/venv/lib/python3.12/site-packages/pyspark/worker.py", line 1960, in process
    serializer.dump_stream(out_iter, outfile)
  File "/work/recsys_eval/engine/partitions.py", line 280, in task
    frame = measure_chunk(chunk)
  File "/work/recsys_eval/data/runs.py", line 90, in read_table
    raise DataError(f"{name}: column 'score': value {value!r} is not a number")
recsys_eval.errors.DataError: RUN run.csv: column 'score': value 'high' is not a number (row 7)
"""
JVM = """An error occurred while calling o70.collectToPython.
: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///d/part-0.parquet.  SQLSTATE: KD001
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(QueryExecutionErrors.scala:920)
\tat org.apache.spark.sql.execution.datasources.FileScanRDD$$anon$1.hasNext(FileScanRDD.scala:153)
Caused by: java.lang.RuntimeException: corrupted file: the footer index is not within the file: -1701273940
\t... 30 more
"""


#: The CLI runs in its own process, whose JVM's log is its stderr: no session in this one.
local_spark = [pytest.mark.spark, pytest.mark.skipif(spark_missing() is not None, reason=f"{spark_missing()}")]


class _Failed(Exception):
    """Stands for PySpark's exception: job_error reads its message alone."""


@pytest.mark.parametrize(("kind", "cls"), [("DataError", DataError), ("ConfigError", ConfigError),
                                           ("SparkError", SparkError), ("NewError", RecsysEvalError)])
def test_a_tasks_recsys_eval_error_is_given_back_with_its_class_and_message(kind, cls):
    error = job_error(_Failed(WORKER.replace("errors.DataError", f"errors.{kind}")))
    assert type(error) is cls
    assert str(error) == "RUN run.csv: column 'score': value 'high' is not a number (row 7)"


def test_another_failure_is_the_line_saying_what_failed():
    assert str(job_error(_Failed(JVM))) == ("the Spark job failed: SparkException: [FAILED_READ_FILE.NO_HINT] "
                                             "Encountered error while reading file file:///d/part-0.parquet.  "
                                             "SQLSTATE: KD001")
    python = WORKER.replace("recsys_eval.errors.DataError", "ZeroDivisionError").replace(
        "RUN run.csv: column 'score': value 'high' is not a number (row 7)", "division by zero")
    assert str(job_error(_Failed(python))) == "the Spark job failed: ZeroDivisionError: division by zero"
    assert str(job_error(_Failed("Job aborted due to stage failure: Task 0 in stage 1.0 failed 4 times"))) == (
        "the Spark job failed: Job aborted due to stage failure: Task 0 in stage 1.0 failed 4 times")
    assert str(job_error(_Failed(""))) == "the Spark job failed: _Failed"


def test_a_cancelled_tasks_worker_ends_quietly():
    """The worker daemon of a local master (recsys_eval.core.spark_daemon) ends a worker whose
    socket the JVM closed with PySpark's status, 1, and prints nothing (the race that closes it,
    a task cancelled as it flushes, cannot be provoked at will)."""
    pytest.importorskip("pyspark")
    script = ("import recsys_eval.core.spark_daemon as daemon\n"
              "def closed(sock, authenticated): raise BrokenPipeError(32, 'Broken pipe')\n"
              "daemon._pyspark_worker = closed\n"
              "daemon.quiet_worker(None, False)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (1, "")


#: A command whose Spark job's task raises a DataError that no call site turns into one, after an
#: error of a logger that also logs a writing task's failure.
UNWRAPPED = """
from recsys_eval.cli import app, main
from recsys_eval.core.spark import spark_session
from recsys_eval.errors import DataError


@app.command("failing-job")
def failing_job() -> None:
    def task(batches):
        for batch in batches:
            raise DataError("partition check: user 7 has a negative rating -2.0")
            yield batch

    spark = spark_session("local[2]")
    logs = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager
    logs.getLogger("org.apache.spark.util.Utils").error("Uncaught exception in thread kept")  # not a task's
    spark.range(8).repartition(2).mapInArrow(task, "id long").collect()


main()
"""


#: What the JVM itself prints at its start (Spark 4 adds the vector module): no logger's line.
JVM_NOTE = "WARNING: Using incubator modules: jdk.incubator.vector"


def _printed(done: subprocess.CompletedProcess) -> list[str]:
    """The lines of ``done``'s stderr, but the JVM's own note."""
    return [line for line in done.stderr.strip().splitlines() if line != JVM_NOTE]


def _one_error_line(done: subprocess.CompletedProcess, message: str) -> None:
    """Status 1, and stderr's one error line, its last, is ``message`` (a pattern): no traceback,
    no task log, no start-up warning of Spark's."""
    lines = _printed(done)
    assert done.returncode == 1, done.stderr
    assert re.fullmatch(f"error: {message}", lines[-1]), done.stderr
    assert sum(line.startswith("error") for line in lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and "ERROR Executor" not in done.stderr, done.stderr
    assert "ERROR TaskSetManager" not in done.stderr, done.stderr
    assert not [line for line in lines if " WARN " in line or "Warning" in line or "log level" in line], done.stderr


@local_spark[0]
@local_spark[1]
def test_an_unwrapped_jobs_task_error_is_one_line():
    done = subprocess.run([sys.executable, "-c", UNWRAPPED, "failing-job"], capture_output=True, text=True, check=False,
                          timeout=600)
    _one_error_line(done, re.escape("partition check: user 7 has a negative rating -2.0"))
    assert "ERROR Utils: Uncaught exception in thread kept" in done.stderr  # the other errors are logged


def _evaluate_on_spark(tmp_path, bad: bool) -> subprocess.CompletedProcess:
    """``recsys-eval evaluate --engine spark`` in its own process, on 300 users' test and run
    files; with a bad score past the rows the driver checks when ``bad`` (a partition's task finds it)."""
    users = 300
    pl.DataFrame({"user": range(users), "item": [1] * users, "rating": [4.0] * users}).write_csv(tmp_path / "test.csv")
    scores = [str(0.5 + i % 7) for i in range(5 * users)]
    if bad:
        scores[-3] = "high"
    pl.DataFrame({"user": [u for u in range(users) for _ in range(5)], "item": list(range(5)) * users,
                  "score": scores}).write_csv(tmp_path / "run.csv")
    return subprocess.run([sys.executable, "-m", "recsys_eval.cli", "evaluate", "--engine", "spark",
                           "--master", "local[2]", "--test", str(tmp_path / "test.csv"), "--run",
                           str(tmp_path / "run.csv"), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600, check=False)


@local_spark[0]
@local_spark[1]
def test_a_spark_command_prints_its_output_alone(tmp_path):
    # Spark's start-up warnings (a loopback host name, the native Hadoop library, a Spark UI port),
    # its log profile and level notes, PySpark's pandas notice from the driver and the workers:
    # none on stderr (core/spark_log4j2.properties, core/spark.py)
    done = _evaluate_on_spark(tmp_path, bad=False)
    assert done.returncode == 0 and _printed(done) == [], done.stderr
    assert (tmp_path / "out" / "summary.csv").is_file()


@local_spark[0]
@local_spark[1]
def test_evaluate_on_spark_with_a_bad_value_past_the_sample_is_one_line(tmp_path):
    done = _evaluate_on_spark(tmp_path, bad=True)
    _one_error_line(done, r"RUN \S+run\.csv: column 'score' is not numeric \(first at row \d+: 'high'\); "
                          "expected numbers")
