"""Summary tables: systems as rows, ``metric@k`` as columns, one block per protocol.

The input is a run's summary (one row per system x protocol x fold x metric x k with ``mean`` and,
when present, ``lower``/``upper`` interval bounds), restricted to one fold (``"all"`` for the mean
of fold means). The best value of every column is marked (bold in Markdown and LaTeX); a system whose
difference from the baseline is significant after correction gets a mark (``*``) beside its value.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from recsys_eval.measure.metrics import display_label, lower_is_better


def metric_label(metric: str, k: int | None) -> str:
    """``ndcg@10``; MAP and MRR are the means of ``ap`` and ``rr``."""
    return metric if k is None else f"{metric}@{k}"


def label_filter(label: str) -> pl.Expr:
    """Rows of ``metric@k`` (or of a metric without a cutoff): the inverse of :func:`metric_label`."""
    metric, _, k = label.partition("@")
    return (pl.col("metric") == metric) & (pl.col("k") == int(k) if k else pl.col("k").is_null())


@dataclass(frozen=True)
class Cell:
    mean: float
    lower: float | None
    upper: float | None
    best: bool
    significant: bool


@dataclass(frozen=True)
class Block:
    """One protocol's table."""

    protocol: str
    columns: list[str]
    rows: dict[str, dict[str, Cell]]


def summary_blocks(
    summary: pl.DataFrame,
    *,
    fold: str,
    significance: pl.DataFrame | None = None,
    alpha: float = 0.05,
) -> list[Block]:
    """Arrange a summary into one Block per protocol, marking bests and significant differences.

    ``significance`` has columns ``protocol, fold, metric, k, system, p_adjusted`` (one row per
    system tested against the baseline, for one chosen test).
    """
    data = summary.filter(pl.col("fold") == fold)
    signif: set[tuple] = set()
    if significance is not None and significance.height:
        hits = significance.filter((pl.col("fold") == fold) & (pl.col("p_adjusted") < alpha))
        signif = {
            (r["protocol"], metric_label(r["metric"], r["k"]), r["system"])
            for r in hits.iter_rows(named=True)
        }
    blocks = []
    for protocol in data.get_column("protocol").unique(maintain_order=True):
        part = data.filter(pl.col("protocol") == protocol).with_columns(
            pl.struct("metric", "k")
            .map_elements(lambda s: metric_label(s["metric"], s["k"]), return_dtype=pl.String)
            .alias("label")
        )
        columns = part.get_column("label").unique(maintain_order=True).to_list()
        best: dict[str, float] = {}
        for label in columns:
            col = part.filter(pl.col("label") == label)
            metric = col.get_column("metric")[0]
            values = col.get_column("mean").drop_nans().drop_nulls()
            if values.len():
                best[label] = values.min() if lower_is_better(metric) else values.max()
        rows: dict[str, dict[str, Cell]] = {}
        for r in part.iter_rows(named=True):
            mean = r["mean"]
            rows.setdefault(r["system"], {})[r["label"]] = Cell(
                mean=mean,
                lower=r.get("lower"),
                upper=r.get("upper"),
                best=mean is not None and best.get(r["label"]) == mean,
                significant=(protocol, r["label"], r["system"]) in signif,
            )
        blocks.append(Block(protocol, columns, rows))
    return blocks


def _fmt(value: float | None, digits: int) -> str:
    if value is None or value != value:  # None or NaN
        return "–"
    return f"{value:.{digits}f}"


def _cell_text(cell: Cell | None, digits: int, *, missing: str, bold: str, mark: str,
               interval: str | None = None) -> str:
    """A summary cell as text: the mean (``bold`` pattern when best), ``mark`` when significant,
    and the ``interval`` pattern filled with the bounds when given and known."""
    if cell is None:
        return missing
    text = _fmt(cell.mean, digits)
    if cell.best:
        text = bold.format(text)
    if cell.significant:
        text += mark
    if interval and cell.lower is not None and cell.lower == cell.lower:
        text += interval.format(_fmt(cell.lower, digits), _fmt(cell.upper, digits))
    return text


def to_markdown(blocks: list[Block], *, digits: int = 4, intervals: bool = True) -> str:
    """Pipe tables, one per protocol; best value bold, ``*`` for significant vs the baseline."""
    out = []
    for block in blocks:
        out.append(f"**{block.protocol}**\n")
        out.append("| system | " + " | ".join(map(display_label, block.columns)) + " |")
        out.append("|---|" + "---:|" * len(block.columns))
        for system, cells in block.rows.items():
            shown = [_cell_text(cells.get(col), digits, missing="–", bold="**{}**", mark="\\*",
                                interval=" ({}–{})" if intervals else None) for col in block.columns]
            out.append(f"| {system} | " + " | ".join(shown) + " |")
        out.append("")
    return "\n".join(out)


_LATEX_SPECIAL = str.maketrans({c: f"\\{c}" for c in "&%$#_{}"} | {"~": r"\textasciitilde{}",
                                                                     "^": r"\textasciicircum{}"})


def latex_escape(text: str) -> str:
    return text.replace("\\", r"\textbackslash{}").translate(_LATEX_SPECIAL)


def to_latex(blocks: list[Block], *, digits: int = 4, caption: str = "", label: str = "") -> str:
    """A booktabs table: one column group per protocol block stacked vertically, best bold,
    significant differences from the baseline marked with a dagger."""
    columns = list(dict.fromkeys(c for b in blocks for c in b.columns))
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\begin{tabular}{l" + "r" * len(columns) + "}",
        r"\toprule",
        "System & " + " & ".join(latex_escape(display_label(c)) for c in columns) + r" \\",
    ]
    for block in blocks:
        lines.append(r"\midrule")
        lines.append(
            rf"\multicolumn{{{len(columns) + 1}}}{{l}}{{\textit{{{latex_escape(block.protocol)}}}}} \\"
        )
        for system, cells in block.rows.items():
            shown = [_cell_text(cells.get(col), digits, missing="--", bold=r"\textbf{{{}}}",
                                mark=r"$^{\dagger}$") for col in columns]
            lines.append(f"{latex_escape(system)} & " + " & ".join(shown) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"
