"""The summary printed at the end of a run: one table per protocol, best value per column marked.

Metric names are shown in the short forms papers use (``nDCG@10``, ``MAP@10``: the mean of ``ap``),
and a table too wide for the terminal is split into several, so that no number is ever cut.
"""

from __future__ import annotations

import polars as pl
from rich.console import Console
from rich.table import Table

from recsys_eval.measure.metrics import display_label
from recsys_eval.report.tables import summary_blocks

def print_summary(console: Console, summary: pl.DataFrame, *, digits: int = 4) -> None:
    """Systems as rows, ``metric@k`` as columns, one block per protocol; best in bold green."""
    folds = summary.get_column("fold").unique().to_list()
    fold = "all" if "all" in folds else folds[0]
    cell_width = digits + 5
    for block in summary_blocks(summary, fold=fold):
        name_width = max([len("system"), *map(len, block.rows)]) + 3
        per_table = max(1, (console.width - name_width) // cell_width)
        groups = [block.columns[i:i + per_table] for i in range(0, len(block.columns), per_table)]
        for part, columns in enumerate(groups):
            title = f"{block.protocol} (fold {fold})" + (f", part {part + 1}" if len(groups) > 1 else "")
            table = Table(title=title, title_justify="left")
            table.add_column("system", no_wrap=True)
            for column in columns:
                table.add_column(display_label(column), justify="right", no_wrap=True)
            for system, cells in block.rows.items():
                shown = []
                for column in columns:
                    cell = cells.get(column)
                    if cell is None or cell.mean is None or cell.mean != cell.mean:
                        shown.append("–")
                    else:
                        text = f"{cell.mean:.{digits}f}"
                        shown.append(f"[bold green]{text}[/]" if cell.best else text)
                table.add_row(system, *shown)
            console.print(table)
