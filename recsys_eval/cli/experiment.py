"""``recsys-eval run``, ``validate`` and ``init``: experiments from TOML configs."""

from __future__ import annotations

from pathlib import Path

import typer

from recsys_eval.cli import app
from recsys_eval.core import atomic
from recsys_eval.errors import ConfigError

STARTER = Path(__file__).resolve().parents[1] / "experiment" / "starter.toml"


@app.command()
def run(
    config: Path = typer.Argument(..., help="The experiment config (TOML)."),
    out: Path = typer.Option(None, "--out", help="Results root (default: the config's output.folder)."),
    resume: bool = typer.Option(False, "--resume", help="Reuse the folds an interrupted run finished."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars or tables."),
    no_report: bool = typer.Option(False, "--no-report", help="Skip the analysis and report."),
    memory: str = typer.Option(None, "--memory", help="Memory budget, e.g. 4GB (default: the config's run.memory)."),
    engine: str = typer.Option(None, "--engine", help="local or spark (default: the config's [engine] name)."),
) -> None:
    """Run an experiment: load, split, fit, build targets, rank, measure, compare, report."""
    from rich.console import Console

    from recsys_eval.core.kernel_cache import announce_compilation
    from recsys_eval.experiment.config import load_config, read_config_text
    from recsys_eval.experiment.runner import run_experiment
    from recsys_eval.experiment.summary_table import print_summary

    parsed = load_config(config)
    console = Console()
    if not quiet:
        announce_compilation(lambda message: console.print(message, style="dim", highlight=False))
    if no_report:
        parsed = parsed.model_copy(update={"output": parsed.output.model_copy(update={"report": False})})
    if memory is not None:
        from recsys_eval.core.memory import parse_size

        parse_size(memory)
        parsed = parsed.model_copy(update={"run": parsed.run.model_copy(update={"memory": memory})})
    if engine is not None:
        from recsys_eval.errors import check_choice

        check_choice("engine", engine, ("local", "spark"))
        parsed = parsed.model_copy(update={"engine": parsed.engine.model_copy(update={"name": engine})})
    console = Console()
    outcome = run_experiment(
        parsed, read_config_text(config), out_root=out, resume=resume, quiet=quiet,
        console=console,
    )
    if not quiet:
        print_summary(console, outcome.summary)
    console.print(f"results: {outcome.folder}", highlight=False)


@app.command()
def validate(config: Path = typer.Argument(..., help="The experiment config (TOML).")) -> None:
    """Check a config (keys, types and every name in it) without running it."""
    from recsys_eval.experiment.checks import check_names
    from recsys_eval.experiment.config import load_config

    parsed = load_config(config)
    check_names(parsed)
    typer.echo(
        f"{config}: valid ({len(parsed.recommenders)} recommenders, {len(parsed.protocols)} protocols, "
        f"metrics {', '.join(parsed.metrics.names)} at k = {', '.join(map(str, parsed.metrics.k))})"
    )


@app.command()
def init(
    path: Path = typer.Argument(Path("experiment.toml"), help="Where to write the starter config."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
) -> None:
    """Write a commented starter config."""
    if path.exists() and not force:
        raise ConfigError(f"{path} exists; choose another path or pass --force")
    atomic.write_text(path, STARTER.read_text(encoding="utf-8"))
    typer.echo(f"wrote {path}; run it with: recsys-eval run {path}")
