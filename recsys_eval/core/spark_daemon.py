"""PySpark's Python worker daemon (``pyspark.daemon``), which a local master starts as
``spark.python.daemon.module`` (:func:`recsys_eval.core.spark.spark_session`), with one change: a
worker whose socket the JVM closed before the worker's last flush (the task was cancelled: another
task failed and the job was aborted) ends with status 1, as PySpark's does, without printing the
``BrokenPipeError`` traceback on the way. On a local master the daemon's stderr is the driver
process's, where that traceback, of a task nobody waits for, came before the CLI's one-line error
whenever the machine was slow enough for the race.

Imports nothing that starts a thread (the daemon forks its workers): recsys_eval's package and
``pyspark.daemon`` alone.
"""

from __future__ import annotations

import os

from pyspark import daemon

_pyspark_worker = daemon.worker


def quiet_worker(sock, authenticated: bool) -> int:
    """PySpark's ``worker``; a socket the JVM closed ends the forked worker at once, quietly."""
    try:
        return _pyspark_worker(sock, authenticated)
    except (BrokenPipeError, ConnectionResetError):  # nobody is left to read an error
        os._exit(1)


if __name__ == "__main__":
    daemon.worker = quiet_worker  # the daemon's children look it up when forked
    daemon.manager()
