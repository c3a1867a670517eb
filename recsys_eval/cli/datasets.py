"""``recsys-eval datasets``: list the known datasets, describe one, fetch one."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from typing import TYPE_CHECKING

import typer

from recsys_eval.cli import app

if TYPE_CHECKING:
    from rich.console import Console

datasets_app = typer.Typer(
    name="datasets",
    help="MovieLens datasets: list them, describe one, fetch one.",
    no_args_is_help=True,
)
app.add_typer(datasets_app, name="datasets")

_DATA_HOME = typer.Option(
    None, "--data-home", help="Data home folder (default: $RECSYS_EVAL_DATA, else the per-user cache)."
)
_JSON = typer.Option(False, "--json", help="Print JSON for scripts instead of tables.")


def _console() -> Console:
    from rich.console import Console

    return Console(highlight=False)


def _print_json(value: object) -> None:
    typer.echo(json.dumps(value, indent=2))


def _size(n_bytes: int | None) -> str:
    if n_bytes is None:
        return "?"
    for unit in ("B", "KB", "MB", "GB"):
        if n_bytes < 1000 or unit == "GB":
            return f"{n_bytes:.0f} {unit}" if unit == "B" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1000
    return ""


@datasets_app.command("list")
def list_command(data_home_: Path | None = _DATA_HOME, as_json: bool = _JSON) -> None:
    """List the known datasets: size, and whether each is in the data home."""
    from rich.table import Table

    from recsys_eval.data import data_home, list_datasets, presence

    home = data_home(data_home_)
    rows = []
    for desc in list_datasets():
        counts = desc.counts
        rows.append(
            {
                "name": desc.name,
                "title": desc.title,
                "archive_bytes": desc.archive.size,
                "ratings": counts.ratings if counts else None,
                "users": counts.users if counts else None,
                "items": counts.items if counts else None,
                "in_data_home": presence(desc, home),
            }
        )
    if as_json:
        _print_json({"data_home": str(home), "datasets": rows})
        return
    table = Table(title=f"Datasets (data home: {home})")
    for column in ("name", "archive", "ratings", "users", "items", "in data home"):
        table.add_column(column, justify="left" if column in ("name", "in data home") else "right")
    for row in rows:
        table.add_row(
            row["name"],
            _size(row["archive_bytes"]),
            *(f"{row[k]:,}" if row[k] is not None else "?" for k in ("ratings", "users", "items")),
            row["in_data_home"],
        )
    _console().print(table)


@datasets_app.command("info")
def info_command(
    name: str = typer.Argument(..., help="Dataset name, e.g. ml-100k (see `datasets list`)."),
    data_home_: Path | None = _DATA_HOME,
    threshold: float | None = typer.Option(None, "--threshold", help="Keep ratings >= this value."),
    binarize: bool = typer.Option(False, "--binarize", help="With --threshold: set kept ratings to 1."),
    min_user: int = typer.Option(0, "--min-user", min=0, help="Drop users with fewer interactions."),
    min_item: int = typer.Option(0, "--min-item", min=0, help="Drop items with fewer interactions."),
    core: int | None = typer.Option(None, "--k-core", min=1, help="Keep the k-core (iterative)."),
    no_download: bool = typer.Option(False, "--no-download", help="Fail rather than download."),
    as_json: bool = _JSON,
) -> None:
    """Describe a dataset: sizes, density, ratings, time span, count quantiles.

    Preparation steps run in the order threshold, min counts, k-core; each prints what it removed.
    """
    from recsys_eval.data import (
        apply_threshold,
        data_home,
        get_descriptor,
        k_core,
        load_dataset,
        min_counts,
        describe,
    )

    desc = get_descriptor(name)
    if binarize and threshold is None:
        raise typer.BadParameter("--binarize needs --threshold")
    data = load_dataset(desc, data_home(data_home_), download=not no_download)
    steps = []
    if threshold is not None:
        data, removed = apply_threshold(data, threshold, binarize=binarize)
        steps.append(removed)
    if min_user > 1 or min_item > 1:
        data, removed = min_counts(data, min_user=max(min_user, 1), min_item=max(min_item, 1))
        steps.append(removed)
    if core is not None:
        data, removed = k_core(data, core)
        steps.append(removed)
    summary = {"dataset": desc.name, **describe(data), "steps": [dataclasses.asdict(s) for s in steps]}
    if as_json:
        _print_json(summary)
    else:
        _print_info(desc.title, summary)


def _print_info(title: str, s: dict) -> None:
    from rich.table import Table

    console = _console()
    if s["steps"]:
        steps = Table(title="Preparation: removed")
        for column in ("step", "interactions", "users", "items"):
            steps.add_column(column, justify="left" if column == "step" else "right")
        for step in s["steps"]:
            steps.add_row(
                step["step"], f"{step['interactions']:,}", f"{step['users']:,}", f"{step['items']:,}"
            )
        console.print(steps)
    main = Table(title=f"{title} ({s['dataset']})", show_header=False)
    main.add_column("figure")
    main.add_column("value", justify="right")
    main.add_row("interactions", f"{s['interactions']:,}")
    main.add_row("users", f"{s['users']:,}")
    main.add_row("items", f"{s['items']:,}")
    main.add_row("density", f"{s['density']:.4%}")
    if s["ratings"]:
        r = s["ratings"]
        main.add_row("ratings", f"{r['min']:g} to {r['max']:g}, mean {r['mean']:.3f}")
    if s["time"]:
        t = s["time"]
        main.add_row("time span", f"{t['first'][:10]} to {t['last'][:10]} ({t['days']:,} days)")
    console.print(main)
    if s["ratings"] and "distribution" in s["ratings"]:
        dist = Table(title="Rating distribution")
        for column in ("rating", "count", "share"):
            dist.add_column(column, justify="right")
        for row in s["ratings"]["distribution"]:
            dist.add_row(f"{row['rating']:g}", f"{row['count']:,}", f"{row['share']:.1%}")
        console.print(dist)
    quant = Table(title="Interactions per user and per item")
    keys = list(s["user_counts"])
    quant.add_column("")
    for key in keys:
        quant.add_column(key, justify="right")
    for label, stats in (("per user", s["user_counts"]), ("per item", s["item_counts"])):
        quant.add_row(label, *(f"{stats[k]:,.1f}" if k == "mean" else f"{stats[k]:,.0f}" for k in keys))
    console.print(quant)


@datasets_app.command("fetch")
def fetch_command(
    name: str = typer.Argument(..., help="Dataset name, e.g. ml-1m (see `datasets list`)."),
    data_home_: Path | None = _DATA_HOME,
    as_json: bool = _JSON,
) -> None:
    """Download the official archive into the data home, verify it and extract it."""
    from recsys_eval.data import data_home, fetch_dataset, get_descriptor

    desc = get_descriptor(name)
    folder = fetch_dataset(desc, data_home(data_home_))
    if as_json:
        _print_json({"dataset": desc.name, "folder": str(folder)})
    else:
        _console().print(f"{desc.name}: {folder}")
