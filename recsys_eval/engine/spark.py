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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


# -- experiments: one fold on Spark ---------------------------------------------------------------

# Recommenders whose fitted model is small enough to broadcast to every executor: item scores,
# a seed, factors, item neighbourhoods. Why the others cannot: what each needs at scoring time.
BROADCASTABLE = ("random", "popular", "als", "bpr", "lmf", "item_knn", "spark_als")
_NOT_BROADCASTABLE = {
    "user_knn": "it scores a user from its neighbours' train rows, i.e. the whole train matrix",
    "bias": "it predicts ratings (rating metrics are computed by the local engine)",
    "user_knn_rating": "it predicts ratings from its neighbours' train rows (local engine only)",
}


def check_spark_support(name: str) -> None:
    """Raise a ConfigError when the recommender ``name`` (as a config names it) cannot run on the
    Spark engine, saying why; meant for config validation, before anything is fitted."""
    from recsys_eval.errors import ConfigError, closest

    if name in BROADCASTABLE:
        return
    if ":" in name:
        reason = "a plugin's model is not known to be picklable and small enough to broadcast"
    elif name in _NOT_BROADCASTABLE:
        reason = _NOT_BROADCASTABLE[name]
    else:
        raise ConfigError(f"unknown recommender {name!r} for the Spark engine: {closest(name, BROADCASTABLE)}")
    raise ConfigError(
        f"recommender {name!r} cannot run on the Spark engine: {reason}; the Spark engine runs "
        f"{', '.join(BROADCASTABLE)} (or use the local engine)"
    )


def check_spark_protocol(name: str, *, design: str = "standard", sampling: str = "uniform") -> None:
    """Raise a ConfigError for a protocol the Spark engine does not build per user partition: target
    sets that depend on other users' data (TI candidates: every user's test items; popularity
    sampling and the percentile and uniform-test designs: item counts over all train users)."""
    from recsys_eval.errors import ConfigError
    from recsys_eval.targets import Protocol

    parsed = Protocol.parse(name)
    reason = None
    if parsed.candidates == "TI":
        reason = "TI candidates are the test items of every user"
    elif sampling != "uniform":
        reason = f"{sampling} sampling weighs items by their counts over every train user"
    elif design != "standard":
        reason = f"the {design} design moves or bins items by counts over every user"
    if reason:
        raise ConfigError(
            f"protocol {name!r} ({design}, {sampling} sampling) cannot run on the Spark engine yet: "
            f"{reason}, not only the partition's; use AI or UT candidates with uniform sampling, "
            "or the local engine"
        )


def broadcastable(model):
    """The part of a fitted recommender the executors need, to broadcast: the library object is
    dropped (factors, item counts, similarities kept); item kNN leaves its train matrix behind (a
    task reads its users' rows from its own partition). A ConfigError for any other model."""
    import copy

    from recsys_eval.errors import ConfigError
    from recsys_eval.recommend.baselines import PopularRecommender, RandomRecommender
    from recsys_eval.recommend.implicit_models import FactorModel, ItemKNN

    if isinstance(model, RandomRecommender | PopularRecommender):
        return model
    if isinstance(model, FactorModel | ItemKNN):
        light = copy.copy(model)
        light.model = None
        if isinstance(model, ItemKNN):
            light.user_items = None
        return light
    raise ConfigError(f"{type(model).__name__} cannot be broadcast to Spark executors; "
                      f"the Spark engine runs {', '.join(BROADCASTABLE)}")


def evaluate_fold_spark(
    spark: SparkSession,
    split,
    models: dict,
    protocols,
    *,
    threshold: float | None = None,
    metrics=("precision", "recall", "ap", "ndcg", "rr", "hit", "auc"),
    k=(1, 5, 10),
    gain: str = "graded",
    ties: str = "first",
    depth: int | None = None,
    chunk_size: int = 2048,
    partitions: int | None = None,
    extra=None,
):
    """Per-unit results of one fold on Spark: every user partition builds its users' targets, ranks
    them with every model and measures them on the executors.

    Contract (what the runner passes and gets):

    - ``split``: the fold (a :class:`recsys_eval.core.Split`); its ``name`` is the ``fold`` column.
    - ``models``: system name (the ``system`` column) -> a recommender fitted on ``split.train`` on
      the driver (or on Spark, ``spark_als``), one of :data:`BROADCASTABLE` (see
      :func:`check_spark_support`); broadcast once to every executor.
    - ``protocols``: :class:`recsys_eval.engine.partitions.FoldProtocol` entries (label, protocol
      name, the targets seed the local runner derives for it, fresh_negatives), standard design,
      AI or UT candidates, uniform sampling (see :func:`check_spark_protocol`).
    - ``threshold, metrics, k, gain, ties``: as for :func:`recsys_eval.measure.measure` (ranking
      metrics; rating and beyond-accuracy metrics stay with the local engine); ``depth``: the length
      of full rankings (default the largest k); ``chunk_size``: units per scoring call, as locally.
    - ``extra``: optional ``f(rankings, targets, per_unit) -> rows`` run on the executors for every
      system and protocol of a chunk (e.g. the sampled rank of 1R+NN units), a picklable function.

    Returns the per-unit table (system, protocol, fold, user, unit, metric, k, value) equal to the
    local runner's for the same seeds (targets are counter-based per user, rankings and kernels
    are the local ones), in the order of ``models``, ``protocols``, metrics, k, unit.
    """
    import numpy as np
    import polars as pl

    from recsys_eval.engine.partitions import (
        FoldMeasure,
        MeasureOptions,
        arrow_task,
        empty_per_unit,
    )
    from recsys_eval.engine.runs import job_error, per_unit_schema
    from recsys_eval.errors import DataError
    from recsys_eval.measure.names import (
        N_RELEVANT,
        RANKING_METRICS,
        check_cutoffs,
        check_metrics,
    )
    from recsys_eval.targets import Protocol
    from recsys_eval.targets.relevance import qrels

    names = check_metrics(list(metrics), RANKING_METRICS + (N_RELEVANT,))
    cutoffs = check_cutoffs(list(k))
    protocols = tuple(protocols)
    for p in protocols:
        check_spark_protocol(p.name)
    judged = qrels(split, threshold)
    n_rel = judged.relevant_counts()
    first_unit = {}
    for p in protocols:
        parsed = Protocol.parse(p.name)
        if parsed.relevant == "1R" and not n_rel.any():
            raise DataError(f"split {split.name!r}: protocol {parsed.name} needs relevant test items, "
                            f"and none reaches the threshold {threshold}")
        units = n_rel if parsed.relevant == "1R" else (judged.counts() > 0).astype(np.int64)
        first_unit[p.label] = np.concatenate([[0], np.cumsum(units)[:-1]]).astype(np.int64)
    context = spark.sparkContext
    light = {name: broadcastable(model) for name, model in models.items()}
    template = split.train.with_frame(split.train.frame.clear())
    spec = FoldMeasure(
        template=template, fold=split.name, protocols=protocols, first_unit=context.broadcast(first_unit),
        models=context.broadcast(light), threshold=threshold,
        options=MeasureOptions(tuple(names), tuple(cutoffs), gain, ties), depth=depth or max(cutoffs), chunk_size=chunk_size, extra=extra,
    )
    rows = _fold_rows(split)
    frame = spark.createDataFrame(rows.to_arrow())
    n_parts = partitions or 4 * context.defaultParallelism
    ordered = frame.repartition(n_parts, "user").sortWithinPartitions("user")
    schema = per_unit_schema(text_users=not template.user_ids.dtype.is_integer())
    try:
        table = ordered.mapInArrow(arrow_task(spec, task_threads(spark), key="user"), schema).toArrow()
    except spark_failures() as exc:
        raise job_error(exc) from None
    per_unit = pl.from_arrow(table) if table.num_rows else empty_per_unit(template.user_ids.dtype)
    order = {
        "system": list(models), "protocol": [p.label for p in protocols],
        "metric": list(dict.fromkeys([*names, N_RELEVANT, "rr"])),
    }
    ranks = [pl.col(c).replace_strict(v, list(range(len(v))), default=len(v)).alias(f"_{c}")
             for c, v in order.items()]
    return per_unit.with_columns(ranks).sort(["_system", "_protocol", "_metric", "k", "unit"], nulls_last=False) \
        .drop("_system", "_protocol", "_metric")


def _fold_rows(split):
    """The fold's train and test rows as one table: user and item indices, rating, test flag."""
    import polars as pl

    frames = []
    for side, data in ((False, split.train), (True, split.test)):
        frame = data.frame.select("user", "item", *(["rating"] if data.has_rating else []))
        frames.append(frame.with_columns(pl.lit(side).alias("test")))
    return pl.concat(frames, how="diagonal_relaxed")

