"""The summary printed at the end of a run: one compact table per protocol that fits the terminal.

Protocols and systems come in the config's order (the manifest's), columns are a chosen set of
``metric@k`` labels (the config's ``[report] metrics``, default the main metrics at the two largest
cutoffs, :func:`recsys_eval.report.tables.default_columns`) in the paper labels of
:func:`recsys_eval.measure.metrics.display_label` (``nDCG@10``, ``MAP@10``). Columns that would not
fit the terminal are left out and named, never cut: every value is in ``summary.csv``.
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
                  columns: list[str] | None = None, digits: int = 4) -> None:
    """Systems as rows and the chosen ``metric@k`` as columns, one table per protocol; best in bold."""
    manifest = manifest or Manifest()
    folds = summary.get_column("fold").unique().to_list()
    fold = "all" if "all" in folds else folds[0]
    chosen = columns or default_columns(summary)
    blocks = summary_blocks(summary, fold=fold, columns=chosen, protocols=manifest.protocols or None,
                            systems=manifest.systems or None)
    for block in blocks:
        values = {system: [_cell(cells.get(column), digits) for column in block.columns]
                  for system, cells in block.rows.items()}
        shown = len(block.columns)
        # as many columns as fit, measured as rich will draw them (padding, separators, edges) at
        # a width that does not squeeze them
        unbounded = console.options.update_width(10_000)
        while shown and console.measure(_table(block, fold, values, shown), options=unbounded).maximum > console.width:
            shown -= 1
        table = _table(block, fold, values, shown)
        console.print(table)
        if shown < len(block.columns):
            left = ", ".join(display_label(c) for c in block.columns[shown:])
            console.print(f"  not shown at this width: {left} (all values in summary.csv)", highlight=False)


def _cell(cell, digits: int) -> str:
    if cell is None or cell.mean is None or cell.mean != cell.mean:
        return "–"
    text = f"{cell.mean:.{digits}f}"
    return f"[bold]{text}[/]" if cell.best else text


def _table(block, fold: str, values: dict[str, list[str]], shown: int) -> Table:
    """The block's table with its first ``shown`` columns."""
    table = Table(title=f"{block.protocol} (fold {fold})", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False, collapse_padding=True)
    table.add_column("system", no_wrap=True)
    for column in block.columns[:shown]:
        table.add_column(display_label(column), justify="right", no_wrap=True)
    for system, row in values.items():
        table.add_row(system, *row[:shown])
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
