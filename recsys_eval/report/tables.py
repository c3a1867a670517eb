"""Summary tables: systems as rows, ``metric@k`` as columns, one block per protocol.

The input is a run's summary (one row per system x protocol x fold x metric x k with ``mean`` and,
when present, ``lower``/``upper`` interval bounds), restricted to one fold (``"all"`` for the mean
of fold means). The best value of every column is marked (bold in Markdown and LaTeX), every value
within ``TIE_TOLERANCE`` (1e-9) of it too: a tie is shown as a tie. A system whose difference from
the baseline is significant after correction gets a mark (``*``) beside its value. LaTeX tables
wider than a page's column budget continue in a second table, never drop a column.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from recsys_eval.compare.agreement import TIE_TOLERANCE
from recsys_eval.measure.metrics import (
    AUXILIARY_METRICS,
    RATING_METRICS,
    MetricKey,
    display_label,
    lower_is_better,
)

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


def format_p(p: float | None) -> str:
    """A p-value as papers print it: ``< 0.001`` below 0.001, else three significant digits."""
    if p is None or p != p:
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:#.3g}"


def table_cutoff(ks: list[int], tuned: int | None = None) -> int | None:
    """The one cutoff a table shows when none is chosen: the tuning's (``tuned``) when the run
    measured it, else the smallest-but-one of the run's cutoffs (10 of 5, 10, 20; 5 of 1, 5, 10,
    20, 50: at k = 1 several metrics coincide, and the largest cutoffs are rarely the ones a paper
    leads with), the only one when there is one."""
    ks = sorted(set(ks))
    if tuned in ks:
        return tuned
    return ks[1] if len(ks) > 1 else (ks[0] if ks else None)


def default_columns(summary: pl.DataFrame, *, metrics: list[str] | None = None,
                    tuned: str | None = None) -> list[str]:
    """The labels a table shows when the config's ``[report] metrics`` chooses none: every metric
    the run measured (in the config's order, ``metrics``), each at one cutoff (:func:`table_cutoff`
    of the tuning metric ``tuned``, e.g. ``ndcg@10``), metrics without a cutoff as they are, rating
    metrics last (they fill the block of the ``ratings`` protocol, which has no ranking metric)."""
    pairs = summary.filter(~pl.col("metric").is_in(AUXILIARY_METRICS)).select("metric", "k").unique(
        maintain_order=True)
    measured = pairs.get_column("metric").unique(maintain_order=True).to_list()
    ordered = [m for m in metrics or [] if m in measured] + [m for m in measured if m not in (metrics or [])]
    ordered = [m for m in ordered if m not in RATING_METRICS] + [m for m in ordered if m in RATING_METRICS]
    k = table_cutoff(pairs.get_column("k").drop_nulls().to_list(), MetricKey.parse(tuned).k if tuned else None)
    labels = []
    for metric in ordered:
        ks = sorted(pairs.filter(pl.col("metric") == metric).get_column("k").drop_nulls().to_list())
        labels.append(MetricKey(metric, k if k in ks else table_cutoff(ks)).label if ks else metric)
    return labels


def main_label(columns: list[str], tuned: str | None = None) -> str:
    """The headline label (of the first screen, the figures and the significance focus): the tuning
    metric ``tuned`` when the run tuned (what the systems were chosen for), else the first nDCG
    column, else the first column."""
    if tuned:
        return MetricKey.parse(tuned).label
    keys = [MetricKey.parse(c) for c in columns]
    return next((key for key in keys if key.name == "ndcg"), keys[0]).label


def summary_blocks(
    summary: pl.DataFrame,
    *,
    fold: str,
    significance: pl.DataFrame | None = None,
    alpha: float = 0.05,
    columns: list[str] | None = None,
    protocols: list[str] | None = None,
    systems: list[str] | None = None,
) -> list[Block]:
    """Arrange a summary into one Block per protocol, marking bests and significant differences.

    ``significance`` has columns ``protocol, fold, metric, k, system, p_adjusted`` (one row per
    system tested against the baseline, for one chosen test). ``columns`` (``ndcg@10`` labels)
    chooses and orders the columns (default: every metric of the summary); ``protocols`` and
    ``systems`` give the order of blocks and rows (the config's, from the manifest), else the
    summary's. Auxiliary per-unit counts are never shown, nor a protocol none of the columns
    belong to (a table without columns is malformed Markdown and an error in LaTeX).
    """
    data = summary.filter((pl.col("fold") == fold) & ~pl.col("metric").is_in(AUXILIARY_METRICS))
    signif: set[tuple] = set()
    if significance is not None and significance.height:
        hits = significance.filter((pl.col("fold") == fold) & (pl.col("p_adjusted") < alpha))
        signif = {
            (r["protocol"], MetricKey(r["metric"], r["k"]).label, r["system"])
            for r in hits.iter_rows(named=True)
        }
    present = data.get_column("protocol").unique(maintain_order=True).to_list()
    order = [p for p in protocols if p in present] if protocols else present
    rank = {s: i for i, s in enumerate(systems or [])}
    blocks = []
    for protocol in order:
        part = data.filter(pl.col("protocol") == protocol).with_columns(MetricKey.label_column().alias("label"))
        shown = part.get_column("label").unique(maintain_order=True).to_list()
        if columns is not None:
            shown = [c for c in columns if c in set(shown)]
            part = part.filter(pl.col("label").is_in(shown))
        if not shown:
            continue
        best: dict[str, float] = {}
        for label in shown:
            col = part.filter(pl.col("label") == label)
            metric = col.get_column("metric")[0]
            values = col.get_column("mean").drop_nans().drop_nulls()
            if values.len():
                best[label] = values.min() if lower_is_better(metric) else values.max()
        rows: dict[str, dict[str, Cell]] = {}
        part = part.with_columns(pl.col("system").replace_strict(rank, default=len(rank)).alias("_order"))
        for r in part.sort("_order", maintain_order=True).iter_rows(named=True):
            mean = r["mean"]
            rows.setdefault(r["system"], {})[r["label"]] = Cell(
                mean=mean,
                lower=r.get("lower"),
                upper=r.get("upper"),
                best=mean is not None and r["label"] in best and abs(best[r["label"]] - mean) <= TIE_TOLERANCE,
                significant=(protocol, r["label"], r["system"]) in signif,
            )
        blocks.append(Block(protocol, shown, rows))
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


_LATEX_SPECIAL = str.maketrans({c: f"\\{c}" for c in "&%$#_{}"} | {
    "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"})
#: How captions name the multiple-testing corrections of ``recsys_eval.compare``.
CORRECTION_NAMES = {"holm": "Holm", "bonferroni": "Bonferroni", "bh": "Benjamini-Hochberg"}


def latex_escape(text: str) -> str:
    return text.replace("\\", r"\textbackslash{}").translate(_LATEX_SPECIAL)


def latex_caption(description: str, *, protocol: str, intervals: bool, test: str | None, correction: str,
                  alpha: float, baseline: str | None) -> str:
    """The caption of a protocol's table (LaTeX): the run's description, then what the marks mean.
    ``protocol`` may be the placeholder ``{protocol}``, which :func:`to_latex` fills per table."""
    text = f"{latex_escape(description.rstrip('.'))}. " if description else ""
    text += f"Protocol {protocol}; mean over users"
    text += ", 95\\% interval below each value. " if intervals else ". "
    text += "Bold: best per column."
    if test and baseline:
        corrected = (f"after {CORRECTION_NAMES[correction]} correction" if correction in CORRECTION_NAMES
                     else "without correction")
        text += (f" $\\dagger$: different from {latex_escape(baseline)} by a paired {latex_escape(test)} test at "
                 f"$\\alpha = {alpha}$ {corrected}.")
    return text


#: Columns of values per LaTeX table: a one-column table (``table``) holds six at ``\small`` in an
#: article's text width, a ``table*`` ten across a two-column page; more continue in the next table.
LATEX_COLUMNS = {False: 6, True: 10}


def column_parts(columns: list[str], size: int) -> list[list[str]]:
    """``columns`` in consecutive parts of at most ``size``, as even as possible (8 in 6 + 2 would
    leave a near-empty table: 4 + 4)."""
    n = max(1, -(-len(columns) // size))
    per = -(-len(columns) // n)
    return [columns[i:i + per] for i in range(0, len(columns), per)]


def to_latex(blocks: list[Block], *, digits: int = 3, caption: str = "", label: str = "",
             intervals: bool = False, wide: bool = False) -> str:
    """One booktabs table per protocol block, systems as rows, the block's columns with their paper
    labels (P@10, nDCG@10, MAP@10); best bold, significant differences from the baseline marked
    with a dagger. ``caption`` is LaTeX (see :func:`latex_caption`) in which the placeholder
    ``{protocol}`` names each block; ``wide`` writes ``table*`` for two-column papers; ``intervals``
    adds a row of ``[lower, upper]`` in script size under each system's values, so that the
    columns stay narrow. A block with more columns than :data:`LATEX_COLUMNS` continues in a
    second table (its caption says which part), and a table still wider than the text is scaled
    down to it (``\\usepackage{graphicx}``).
    """
    env = "table*" if wide else "table"
    out = []
    parts = [(block, part, i, len(split)) for block in blocks
             for split in [column_parts(block.columns, LATEX_COLUMNS[wide])] for i, part in enumerate(split, 1)]
    for n, (block, columns, part, of) in enumerate(parts, start=1):
        lines = [
            rf"\begin{{{env}}}[t]",
            r"\centering",
            r"\small",
            # shrunk to the text width only when wider (needs graphicx): every chosen column fits
            r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%",
            r"\begin{tabular}{@{}l" + "r" * len(columns) + "@{}}",
            r"\toprule",
            "System & " + " & ".join(latex_escape(display_label(c)) for c in columns) + r" \\",
            r"\midrule",
        ]
        for system, cells in block.rows.items():
            shown = [_cell_text(cells.get(col), digits, missing="--", bold=r"\textbf{{{}}}",
                                mark=r"$^{\dagger}$") for col in columns]
            lines.append(f"{latex_escape(system)} & " + " & ".join(shown) + r" \\")
            if intervals:
                bounds = [cells.get(col) for col in columns]
                lines.append(" & " + " & ".join(
                    rf"{{\scriptsize [{_fmt(c.lower, digits)}, {_fmt(c.upper, digits)}]}}"
                    if c is not None and c.lower is not None and c.lower == c.lower else "" for c in bounds
                ) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}}"]
        if caption:
            text = caption.replace("{protocol}", latex_escape(block.protocol))
            if of > 1:
                text += f" Part {part} of {of} of this protocol's columns."
            lines.append(rf"\caption{{{text}}}")
        if label:
            lines.append(rf"\label{{{label}-{n}}}" if len(parts) > 1 else rf"\label{{{label}}}")
        lines.append(rf"\end{{{env}}}")
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)
