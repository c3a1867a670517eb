"""``recsys-eval audit``: the leakage audit of a config's splits, without running any recommender."""

from __future__ import annotations

from pathlib import Path

import typer

from recsys_eval.cli import app
from recsys_eval.cli.experiment import SET_HELP, _load
from recsys_eval.errors import ConfigError, DataError

#: How the printed table names the shares (docs/CONVENTIONS.md#leakage).
SHARE_TITLES = {
    "share_after_test_start": "train after T0",
    "share_after_user_test": "train after own test",
    "share_future_items": "items trained later",
    "share_users_leaking": "users leaking",
}


@app.command()
def audit(
    config: Path = typer.Argument(..., help="The experiment config (TOML)."),
    users: Path = typer.Option(None, "--users", help="Write the per-user table to this CSV file."),
    threshold: float = typer.Option(None, "--threshold", help="Flag a share above this (default 0.01)."),
    overrides: list[str] = typer.Option(None, "--set", help=SET_HELP),
) -> None:
    """Leakage audit (Ji et al., TOIS 2023): load, prepare and split as `run` does, then report per
    fold the shares of training data from after the test time. No recommender is fitted."""
    from rich.console import Console

    from recsys_eval.experiment.runner import load_and_split
    from recsys_eval.pipeline.progress import Progress
    from recsys_eval.pipeline.timings import Timings
    from recsys_eval.split.leakage import DEFAULT_THRESHOLD, leakage_audit

    parsed = _load(config, overrides)
    if parsed.datasets is not None:
        raise ConfigError(f"{config}: audit one dataset at a time; this config lists [[datasets]]")
    console = Console()
    with Progress(console, quiet=True) as progress:
        _, splits, _, _ = load_and_split(parsed, progress, Timings())
    if not all(s.train.has_timestamp and s.test.has_timestamp for s in splits):
        raise DataError(f"{config}: the dataset has no timestamps, so the audit cannot order interactions in time")
    result = leakage_audit(splits, DEFAULT_THRESHOLD if threshold is None else threshold)
    _print(console, result, f"{parsed.split.method} split")
    if users is not None:
        from recsys_eval.core import atomic

        atomic.write_csv(result.users, users)
        console.print(f"wrote {users}", highlight=False)


def _print(console, result, title: str) -> None:
    from rich import box
    from rich.table import Table

    table = Table(title=f"Leakage audit ({title}; threshold {result.threshold:g})", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("fold", "T0 (UTC)", *SHARE_TITLES.values()):
        table.add_column(column, justify="left" if column == "fold" else "right", no_wrap=column == "fold")
    for row in result.folds.iter_rows(named=True):
        cells = [f"[bold red]{row[s]:.4f}[/]" if s in row["flagged"] else f"{row[s]:.4f}" for s in SHARE_TITLES]
        table.add_row(row["fold"], _date(row["test_start"]), *cells)
    console.print(table)
    console.print("T0: the fold's first test time; shares of training rows after T0 and after the user's first "
                  "test time, of test rows whose item was first trained on after it, of test users with later "
                  "training (docs/CONVENTIONS.md#leakage)", highlight=False, style="dim")
    flagged = result.folds.filter(result.folds["flagged"].list.len() > 0).height
    console.print(f"{flagged} of {result.folds.height} fold(s) leak above the threshold" if flagged
                  else "no leakage above the threshold", highlight=False)


def _date(seconds: int | None) -> str:
    from datetime import datetime, timezone

    return "–" if seconds is None else datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d")
