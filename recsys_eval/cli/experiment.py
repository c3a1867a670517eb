"""``recsys-eval run``, ``validate`` and ``init``: experiments from TOML configs."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from recsys_eval.cli import app
from recsys_eval.core import atomic
from recsys_eval.errors import ConfigError

STARTER = Path(__file__).resolve().parents[1] / "experiment" / "starter.toml"


def flag(*names: str, help: str) -> bool:
    """A boolean option shown as a plain flag: typer's help would print ``<bool>`` beside it, as if
    it took a value, unless the metavar is empty."""
    return typer.Option(False, *names, metavar="", help=help)


SET_HELP = "Override a config key, e.g. --set metrics.k=[5,10] --set recommenders.0.params.factors=32 (repeatable)."


def _load(config: Path, overrides: list[str] | None):
    """The config with its ``--set`` overrides; the config's folder goes first on the import path,
    so that a plugin module beside the config (``name = "mymodels:MyRecommender"``) imports."""
    from recsys_eval.pipeline.config import load_config

    folder = str(config.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return load_config(config, overrides)


@app.command()
def run(
    config: Path = typer.Argument(..., help="The experiment config (TOML)."),
    out: Path = typer.Option(None, "--out", help="Results root (default: the config's output.folder)."),
    resume: bool = flag("--resume", help="Reuse the folds an interrupted run finished."),
    quiet: bool = flag("--quiet", "-q", help="No progress bars or tables."),
    no_report: bool = flag("--no-report", help="Skip the analysis and report."),
    memory: str = typer.Option(None, "--memory", help="Memory budget, e.g. 4GB (default: the config's run.memory)."),
    engine: str = typer.Option(None, "--engine", help="local or spark (default: the config's [engine] name)."),
    overrides: list[str] = typer.Option(None, "--set", help=SET_HELP),
) -> None:
    """Run an experiment: load, split, fit, build targets, rank, measure, compare, report.

    The results go to results/<name>/<UTC time>/, and results/<name>/latest points at the newest.
    """
    from rich.console import Console

    from recsys_eval.core.kernel_cache import announce_compilation
    from recsys_eval.core.results import ResultsFolder
    from recsys_eval.pipeline.config import read_config_text
    from recsys_eval.experiment.runner import run_experiment
    from recsys_eval.experiment.summary_table import print_datasets, print_summary
    from recsys_eval.report.choice import report_choice

    parsed = _load(config, overrides)
    console = Console()
    if not quiet:
        announce_compilation(lambda message: console.print(message, style="dim", highlight=False))
    options = [f"--set {o}" for o in overrides or []]
    if no_report:
        parsed = parsed.model_copy(update={"output": parsed.output.model_copy(update={"report": False})})
        options.append("--no-report")
    if memory is not None:
        from recsys_eval.core.memory import parse_size

        parse_size(memory)
        parsed = parsed.model_copy(update={"run": parsed.run.model_copy(update={"memory": memory})})
        options.append(f"--memory {memory}")
    if engine is not None:
        from recsys_eval.errors import check_choice

        check_choice("engine", engine, ("local", "spark"))
        parsed = parsed.model_copy(update={"engine": parsed.engine.model_copy(update={"name": engine})})
        options.append(f"--engine {engine}")
    # config.toml is the resolved config; the file as written and these options are saved beside it
    try:
        outcome = run_experiment(parsed, read_config_text(config), options, out_root=out, resume=resume, quiet=quiet,
                                 console=console)
    except KeyboardInterrupt:
        console.print(f"interrupted: the folds finished so far are kept; resume with: {_resume_command(config, out, overrides)}",
                      highlight=False, soft_wrap=True)
        raise
    at_uri = isinstance(outcome.folder, str)  # a results folder at a URI (recsys_eval.engine.remote)
    if not at_uri:
        ResultsFolder(outcome.folder).link_latest()
    if not quiet and outcome.datasets:
        print_datasets(console, outcome.folder, outcome.datasets, columns=parsed.report.metrics)
    elif not quiet and not at_uri:
        from recsys_eval.report.overview import print_first_screen

        choice = report_choice(outcome.folder, outcome.summary)
        print_summary(console, outcome.summary, manifest=ResultsFolder(outcome.folder).manifest,
                      columns=choice.columns)
        print_first_screen(console, outcome.folder, outcome.summary, choice.headline)
    console.print(f"results: {outcome.folder}", highlight=False, markup=False, soft_wrap=True)
    if parsed.output.report:
        console.print(f"report: {outcome.folder / 'report.html'}", highlight=False, markup=False, soft_wrap=True)


def _resume_command(config: Path, out: Path | None, overrides: list[str] | None) -> str:
    """The command that reruns ``config`` reusing the folds an interrupted run finished (the same
    ``--out`` and ``--set`` overrides: the resumed config must hash the same)."""
    import shlex

    words = ["recsys-eval", "run", str(config), "--resume"] + (["--out", str(out)] if out else [])
    words += [w for o in overrides or [] for w in ("--set", o)]
    return shlex.join(words)


@app.command()
def validate(
    config: Path = typer.Argument(..., help="The experiment config (TOML)."),
    overrides: list[str] = typer.Option(None, "--set", help=SET_HELP),
) -> None:
    """Check a config (keys, types and every name in it) without running it."""
    from recsys_eval.experiment.checks import check_names

    parsed = _load(config, overrides)
    check_names(parsed)
    typer.echo(
        f"{config}: valid ({len(parsed.recommenders)} recommenders, {len(parsed.protocols)} protocols, "
        f"metrics {', '.join(parsed.metrics.names)} at k = {', '.join(map(str, parsed.metrics.k))})"
    )
    if parsed.engine.name == "spark" and parsed.datasets is None:
        from recsys_eval.engine.inputs import inputs_note

        typer.echo(inputs_note(parsed))


@app.command()
def init(
    path: Path = typer.Argument(Path("experiment.toml"), help="Where to write the starter config."),
    force: bool = flag("--force", help="Overwrite an existing file."),
) -> None:
    """Write a commented starter config."""
    if path.exists() and not force:
        raise ConfigError(f"{path} exists; choose another path or pass --force")
    atomic.write_text(path, STARTER.read_text(encoding="utf-8"))
    typer.echo(f"wrote {path}; run it with: recsys-eval run {path}")
