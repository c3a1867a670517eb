"""The summary printed at the end of a run: compact tables per protocol that fit the terminal.

Protocols and systems come in the config's order (the manifest's), columns are a chosen set of
``metric@k`` labels (the config's ``[report] metrics``, default every metric measured at one cutoff,
:func:`recsys_eval.report.tables.default_columns`) in the paper labels of
:func:`recsys_eval.measure.metrics.display_label` (``nDCG@10``, ``MAP@10``). Columns that would not
fit the terminal continue in a second table, headed "continued": every column asked for is shown.
"""
from __future__ import annotations

from pathlib import Path

import polars as pl
from rich import box
from rich.console import Console
from rich.table import Table

from recsys_eval.core.results import Manifest
from recsys_eval.measure.metrics import display_label
from recsys_eval.report.tables import default_columns, summary_blocks


def print_summary(console: Console, summary: pl.DataFrame, *, manifest: Manifest | None = None,
                  columns: list[str] | None = None, tuned: str | None = None, digits: int = 4) -> None:
    """Systems as rows and the chosen ``metric@k`` as columns, one table per protocol (continued in
    as many more as the terminal's width needs); best in bold."""
    manifest = manifest or Manifest()
    folds = summary.get_column("fold").unique().to_list()
    fold = "all" if "all" in folds else folds[0]
    chosen = columns or default_columns(summary, metrics=manifest.metrics or None, tuned=tuned)
    blocks = summary_blocks(summary, fold=fold, columns=chosen, protocols=manifest.protocols or None,
                            systems=manifest.systems or None)
    for block in blocks:
        values = {system: [_cell(cells.get(column), digits) for column in block.columns]
                  for system, cells in block.rows.items()}
        # as many columns per table as fit, measured as rich will draw them (padding, separators,
        # edges) at a width that does not squeeze them; the rest continue in the next table
        unbounded = console.options.update_width(10_000)
        start = 0
        while start < len(block.columns):
            end = len(block.columns)
            while end > start + 1 and console.measure(_table(block, fold, values, start, end),
                                                      options=unbounded).maximum > console.width:
                end -= 1
            console.print(_table(block, fold, values, start, end))
            start = end


def _cell(cell, digits: int) -> str:
    if cell is None or cell.mean is None or cell.mean != cell.mean:
        return "–"
    text = f"{cell.mean:.{digits}f}"
    return f"[bold]{text}[/]" if cell.best else text


def _table(block, fold: str, values: dict[str, list[str]], start: int, end: int) -> Table:
    """The block's table with its columns ``start`` to ``end`` (a continuation when ``start`` > 0)."""
    title = f"{block.protocol} (fold {fold}{', continued' if start else ''})"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("system", no_wrap=True)
    for column in block.columns[start:end]:
        table.add_column(display_label(column), justify="right", no_wrap=True)
    for system, row in values.items():
        table.add_row(system, *row[start:end])
    return table


def print_datasets(console: Console, study: Path, folders: dict[str, Path], *, columns: list[str] | None = None) -> None:
    """A study over several datasets: each dataset's tables under its name, then the systems' mean
    ranks over datasets, Friedman's test and its warnings (recsys_eval.report.datasets)."""
    from recsys_eval.core.results import ResultsFolder
    from recsys_eval.report.datasets import study_warnings

    for name, folder in folders.items():
        results = ResultsFolder(folder)
        console.rule(f"dataset {name}")
        print_summary(console, results.table("summary"), manifest=results.manifest, columns=columns)
        console.print(f"results: {folder}", highlight=False)
    cross = ResultsFolder(study)
    ranks, friedman = cross.table("ranks"), cross.table("friedman")
    console.rule(f"over {len(folders)} datasets: {cross.manifest.ranked_by.get('metric')}")
    console.print(", ".join(f"{s} {r:.2f}" for s, r in ranks.select("system", "mean_rank").iter_rows()),
                  highlight=False)
    row = friedman.row(0, named=True)
    console.print(f"Friedman chi2 = {row['chi2']:.3f} (p = {row['chi2_p']:.3g}), F_F = {row['f']:.3f} "
                  f"(p = {row['f_p']:.3g})", highlight=False)
    for warning in study_warnings(friedman):
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
