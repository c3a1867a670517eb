"""The summary printed at the end of a run: one table per protocol, best value per column marked."""

from __future__ import annotations

import polars as pl
from rich.console import Console
from rich.table import Table

from recsys_eval.report.tables import summary_blocks


def print_summary(console: Console, summary: pl.DataFrame, *, digits: int = 4) -> None:
    """Systems as rows, ``metric@k`` as columns, one block per protocol; best in bold green."""
    folds = summary.get_column("fold").unique().to_list()
    fold = "all" if "all" in folds else folds[0]
    for block in summary_blocks(summary, fold=fold):
        table = Table(title=f"{block.protocol} (fold {fold})", title_justify="left")
        table.add_column("system")
        for column in block.columns:
            table.add_column(column, justify="right")
        for system, cells in block.rows.items():
            shown = []
            for column in block.columns:
                cell = cells.get(column)
                if cell is None or cell.mean is None or cell.mean != cell.mean:
                    shown.append("–")
                else:
                    text = f"{cell.mean:.{digits}f}"
                    shown.append(f"[bold green]{text}[/]" if cell.best else text)
            table.add_row(system, *shown)
        console.print(table)
