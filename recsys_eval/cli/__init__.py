"""The ``recsys-eval`` command line.

Each command group lives in its own module of this package and registers itself on ``app``. Bad input
raises :class:`recsys_eval.errors.RecsysEvalError`; :func:`main` prints its message and exits with
status 1, so that a CLI user never sees a traceback for it. A failed Spark job that reaches it is
printed so too, as the recsys_eval error one of its tasks raised, else the line of Spark's message
that says what failed (:func:`recsys_eval.core.spark.job_error`).

Start-up stays fast (``recsys-eval --help`` imports neither polars, numpy, numba, scipy, implicit
nor matplotlib): command modules import what they use inside their command functions, and help is
formatted by click rather than by rich, whose Markdown renderer alone costs more than the rest.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

import typer

from recsys_eval import __version__
from recsys_eval.core.atomic import refused_write
from recsys_eval.errors import RecsysEvalError

app = typer.Typer(
    name="recsys-eval",
    help="Offline evaluation of recommender systems.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"recsys-eval {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Offline evaluation of recommender systems."""


def fail(message: str) -> None:
    """Print an error message for the user and exit with status 1."""
    from rich.console import Console

    Console(stderr=True).print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise SystemExit(1)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script."""
    # numpy asks the kernel for transparent huge pages for large arrays; under the usual defrag
    # setting ("madvise") a fault then waits for memory compaction when free memory is fragmented.
    # Measured on `evaluate` over the ML-25M-size files: 3.4 s of kernel time with, 1.3 s without
    # (wall 6.5-9.4 s vs 5.6-5.9 s). The command owns its process; a user's setting is kept.
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
    try:
        for module in pkgutil.iter_modules(__path__):  # every module here adds its commands to `app`
            if not module.name.startswith("_"):
                importlib.import_module(f"{__name__}.{module.name}")
        app(args=argv, prog_name="recsys-eval")
    except SystemExit as exc:  # typer ends every command so; Ctrl-C inside one becomes status 130
        if _interrupted(exc):
            _interrupt_handled()
        elif not exc.code and argv is None:
            _leave_without_teardown()
        raise
    except KeyboardInterrupt:
        _interrupt_handled()
        sys.exit(130)
    except RecsysEvalError as exc:
        fail(str(exc))
    except OSError as exc:  # unwritable folder, full disk, missing file given on the command line
        refused = refused_write(exc)
        fail(str(refused) if refused else f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))
    except Exception as exc:
        if _interrupted(exc):  # Ctrl-C inside a library import arrives wrapped (e.g. RuntimeError)
            _interrupt_handled()
            sys.exit(130)
        failed = _spark_failure(exc)
        if failed is not None:
            fail(str(failed))
        raise


def _spark_failure(exc: BaseException) -> RecsysEvalError | None:
    """A failed Spark job (PySpark's or the JVM's exception, once PySpark is loaded) as the
    RecsysEvalError it stands for; None for any other exception."""
    if "pyspark" not in sys.modules:
        return None
    from recsys_eval.core.spark import job_error, spark_failures

    return job_error(exc) if isinstance(exc, spark_failures()) else None


def _leave_without_teardown() -> None:
    """End the process now that its command succeeded, without the interpreter's teardown.

    A finished command has written, closed and renamed every file and drained its threads, so the
    teardown only frees memory that the kernel frees at exit anyway: 0.26 s of a 4 s ``evaluate`` at
    ML-25M size, 0.5 s after a small ``run``. Only for the console script itself (``argv`` None), and
    not once PySpark is loaded, whose JVM is stopped by an exit handler.
    """
    if "pyspark" in sys.modules:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken pipe: let the interpreter report it
        return
    os._exit(0)


def _interrupt_handled() -> None:
    """Say the command was interrupted, and make sure the process then ends with status 130.

    CPython marks its interpreter as ended by an unhandled Ctrl-C whenever a KeyboardInterrupt leaves
    code it runs from a string (``exec``/``eval``: scipy.stats builds its distributions so, namedtuple
    its constructors, both inside lazy imports), even when the exception is then handled. Under
    ``python -m recsys_eval.cli`` the interpreter reads that mark after our exit and kills itself
    with SIGINT instead of returning 130. Running any string resets the mark.
    """
    print("interrupted", file=sys.stderr)
    exec("pass")  # noqa: S102 -- resets the mark; see the docstring


def _interrupted(exc: BaseException | None) -> bool:
    """True when a KeyboardInterrupt is the cause or context of ``exc``."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False
