"""A run's results folder at a URI (``hdfs://``, ``s3a://``, ``file://``: any file system Spark's
Hadoop client reaches), for ``run --engine spark`` (docs/SPARK.md).

Python on an executor cannot write through Hadoop's file systems, and a driver that wrote every
per-unit row would hold the per-unit table; so the fold's job hands its per-unit rows to Spark's
own writer, which writes them into the folder at the URI in the results' layout
(:meth:`recsys_eval.engine.fold.SparkFold._tables`), while the driver stages everything else (the
config, summary, side tables, run-level rows, timings, log) in a local work folder as a run does.
When the run is complete, the staged files are copied into the folder at the URI and the manifest
is written last: a folder there without ``manifest.json`` is an interrupted run, which
:meth:`~recsys_eval.core.results.ResultsFolder.open` refuses as incomplete. A run that fails (an
error or an interrupt leaves it) removes its staging folder and its folder at the URI
(:meth:`RemoteFolder.discard`): ``--resume`` is refused at a URI, so nothing could finish them;
only a run killed outright leaves them.

What reads the per-unit files back on the driver is refused at the start, each with the way
around it: ``--resume`` (it inspects the work folder's per-unit files), the analysis and report
(``[output] report``: run ``recsys-eval report`` on a copy of the folder), the MLflow tracking
(it logs the local folder), a study over several datasets (its cross-dataset tables read the
datasets' folders) and the local engine (its process writes every file itself).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from contextlib import suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from recsys_eval.core.results import MANIFEST
from recsys_eval.errors import ConfigError

if TYPE_CHECKING:
    from recsys_eval.engine.runs import HadoopFolder
    from recsys_eval.pipeline.config import ExperimentConfig
    from recsys_eval.pipeline.sink import RunSink

#: The name of a run's local staging folder (in the system's temporary folder) starts so.
STAGING_PREFIX = "recsys-eval-staging-"


class RemoteFolder:
    """The folder at a URI a run's results go to (``folder``, a :class:`HadoopFolder`), made
    complete by :meth:`publish` from the local work folder under ``staging``."""

    def __init__(self, folder: HadoopFolder, staging: Path) -> None:
        self.folder, self.staging = folder, staging

    def publish(self, staged: Path) -> str:
        """Copy the files of the complete local folder ``staged`` into the folder at the URI, file
        by file (a folder copied onto one that exists would land inside it), the manifest last
        (what makes it complete); the staging folder is removed. Returns the folder's URI."""
        files = sorted(p.relative_to(staged) for p in staged.rglob("*") if p.is_file())
        for name in files:
            if name.name != MANIFEST and not any(part.startswith(".") for part in name.parts):
                self.folder.copy_in(staged / name, name.as_posix())
        self.folder.copy_in(staged / MANIFEST, MANIFEST)
        shutil.rmtree(self.staging, ignore_errors=True)
        return self.folder.uri

    def discard(self) -> None:
        """Remove what a failed run leaves, which no run can resume: the local staging folder and
        the folder at the URI (the per-unit files Spark wrote, the files copied so far). A removal
        that fails in turn is let be: the run's own error is the one to report."""
        from recsys_eval.core.spark import spark_failures

        shutil.rmtree(self.staging, ignore_errors=True)
        with suppress(*spark_failures(), OSError):
            self.folder.delete()


def check_remote_run(config: ExperimentConfig, root: str, *, resume: bool) -> None:
    """A ConfigError naming each part of a run that cannot write its results folder at the URI
    ``root``, and the way around it."""
    problems = []
    if config.engine.name != "spark":
        problems.append("the local engine writes every file from its own process: use --engine spark, "
                        "or a local results folder")
    if resume:
        problems.append("--resume reads an interrupted run's work folder: rerun without it (a Spark run redoes "
                        "its folds whole), or use a local results folder")
    if config.output.report:
        problems.append("the analysis and report read the per-unit files on the driver: set [output] "
                        "report = false (or --no-report), then run `recsys-eval report` on a copy of the folder")
    if config.track.mlflow is not None:
        problems.append("MLflow tracking logs a local results folder: leave [track] out")
    if config.datasets is not None:
        problems.append("a study over several datasets makes its cross-dataset tables from the datasets' "
                        "folders on the driver: run one dataset at a time, or use a local results folder")
    if problems:
        raise ConfigError(f"results folder {root!r} is at a URI, which a run writes on the Spark engine alone; "
                          + "; ".join(problems))


def remote_sink(root: str, config: ExperimentConfig, original: str, overrides: Sequence[str] = ()) -> RunSink:
    """The sink of a run whose results go to ``<root>/<experiment>/<UTC time>/`` at the URI
    ``root`` (a config :func:`check_remote_run` passed): a local work folder in the system's
    temporary folder, and the folder at the URI (a name not taken, as the local run's), which
    Spark writes the per-unit files into."""
    from recsys_eval.core.spark import spark_session
    from recsys_eval.core.uris import uri
    from recsys_eval.engine.runs import HadoopFolder
    from recsys_eval.pipeline.sink import RunSink

    spark = spark_session(config.engine.master)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = f"{uri(root).rstrip('/')}/{config.name}/{stamp}"
    folder = next(f for f in (HadoopFolder(spark, base if n == 1 else f"{base}-{n}") for n in range(1, 1000))
                  if not f.exists())
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX))
    try:
        sink = RunSink.create(staging, config, original, overrides, resume=False)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    sink.remote = RemoteFolder(folder, staging)
    return sink
