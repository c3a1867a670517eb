"""The report of a results folder: ``report.md``, a self-contained ``report.html`` and ``tables.tex``.

Sections appear when the run has the data for them: the config, the data and split statistics, the
summary tables with confidence intervals and significance against the baseline, and the figures
(metric against k, systems with intervals, protocol agreement, ranks across protocols, sampled vs
corrected vs full, popularity bins, learning curves). The HTML page embeds its figures as base64 PNG
and loads nothing from the network.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from recsys_eval.core import atomic
from recsys_eval.core.results import MANIFEST, ResultsFolder
from recsys_eval.measure.metrics import AUXILIARY_METRICS
from recsys_eval.report import figures
from recsys_eval.report.tables import (
    label_filter,
    metric_label,
    summary_blocks,
    to_latex,
    to_markdown,
)

CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .8em 0 1.4em; font-size: .9em; }
th, td { padding: .25em .6em; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { border-bottom: 2px solid #444; }
td.best { font-weight: bold; }
.ci { color: #777; font-size: .85em; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; font-size: .85em; }
figure { margin: 1em 0; } figure img { max-width: 100%; }
figcaption { color: #555; font-size: .9em; }
.note { color: #555; font-size: .9em; }
"""


@dataclass
class Section:
    """A report section: a title, Markdown text, HTML text and its figures."""

    id: str
    title: str
    markdown: str = ""
    html: str = ""
    figures: list[tuple[str, str]] = field(default_factory=list)  # (caption, base64 PNG)


def _read(folder: Path, name: str) -> pl.DataFrame | None:
    """A table of the results folder by name (``summary``, ``paired_tests``...), None if absent."""
    return ResultsFolder(folder).table(name)


def _html_table(frame: pl.DataFrame, digits: int = 4) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = []
    for row in frame.iter_rows():
        cells = []
        for v in row:
            text = f"{v:.{digits}g}" if isinstance(v, float) else ("–" if v is None else str(v))
            cells.append(f"<td>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _md_table(frame: pl.DataFrame, digits: int = 4) -> str:
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    for row in frame.iter_rows():
        cells = [f"{v:.{digits}g}" if isinstance(v, float) else ("–" if v is None else str(v)) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _blocks_html(blocks, digits: int = 4) -> str:
    parts = []
    for block in blocks:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in block.columns)
        rows = []
        for system, cells in block.rows.items():
            tds = [f"<td>{html.escape(system)}</td>"]
            for col in block.columns:
                cell = cells.get(col)
                if cell is None or cell.mean is None:
                    tds.append("<td>–</td>")
                    continue
                text = f"{cell.mean:.{digits}f}" + ("*" if cell.significant else "")
                if cell.lower is not None and cell.lower == cell.lower:
                    text += f' <span class="ci">({cell.lower:.{digits}f}–{cell.upper:.{digits}f})</span>'
                tds.append(f'<td class="{"best" if cell.best else ""}">{text}</td>')
            rows.append("<tr>" + "".join(tds) + "</tr>")
        parts.append(
            f"<h3>{html.escape(block.protocol)}</h3><table><thead><tr><th>system</th>{head}</tr>"
            f"</thead><tbody>{''.join(rows)}</tbody></table>"
        )
    return "".join(parts)


def build_sections(folder: Path) -> list[Section]:
    """Collect every section the results folder has data for."""
    sections: list[Section] = []
    manifest = ResultsFolder(folder).manifest if (folder / MANIFEST).is_file() else {}
    config_text = (folder / "config.toml").read_text() if (folder / "config.toml").is_file() else ""
    alpha = manifest.get("alpha", 0.05)

    sections.append(Section(
        "config", "Configuration",
        markdown=f"```toml\n{config_text}\n```\n",
        html=f"<pre>{html.escape(config_text)}</pre>",
    ))

    stats = _read(folder, "data_stats")
    if stats is not None:
        sections.append(Section("data", "Data and splits", markdown=_md_table(stats), html=_html_table(stats)))

    summary = _read(folder, "summary")
    if summary is None:
        return sections
    summary = summary.filter(~pl.col("metric").is_in(AUXILIARY_METRICS))
    folds = summary.get_column("fold").unique(maintain_order=True).to_list()
    fold = "all" if "all" in folds else folds[0]
    # Significance marks: the paired t over fold means for cross-validated runs, else the first test.
    paired = _read(folder, "fold_paired_tests" if fold == "all" else "paired_tests")
    significance = None
    if paired is not None and paired.height:
        significance = paired.filter(pl.col("test") == paired.get_column("test")[0])
    blocks = summary_blocks(summary, fold=fold, significance=significance, alpha=alpha)
    note = (
        f"Mean over users (fold: {fold}); 95% interval in parentheses; best value per column in bold; "
        f"* marks a difference from the baseline significant at {alpha} after correction."
    )
    sections.append(Section(
        "summary", "Summary",
        markdown=note + "\n\n" + to_markdown(blocks),
        html=f'<p class="note">{html.escape(note)}</p>' + _blocks_html(blocks),
    ))
    atomic.write_text(folder / "tables.tex", to_latex(blocks, caption=manifest.get("experiment", "")))

    labels = [metric_label(m, k) for m, k in summary.select("metric", "k").unique(maintain_order=True).iter_rows()]
    main_label = next((lab for lab in labels if lab.startswith("ndcg")), labels[0])

    figs = Section("figures", "Figures")
    for metric in summary.get_column("metric").unique(maintain_order=True).to_list():
        fig = figures.metric_against_k(summary, metric, fold)
        if fig is not None:
            figs.figures.append((f"{metric} against k", figures.to_png_base64(fig)))
    fig = figures.systems_with_intervals(summary, main_label, fold)
    if fig is not None:
        figs.figures.append((f"Systems per protocol, {main_label}, with 95% intervals", figures.to_png_base64(fig)))
    fig = figures.ranks_across_protocols(summary, main_label, fold)
    if fig is not None:
        figs.figures.append((f"System ranks across protocols by {main_label}", figures.to_png_base64(fig)))
    agreement = _read(folder, "agreement")
    if agreement is not None and agreement.height:
        part = agreement.filter(label_filter(main_label))
        fig = figures.agreement_matrix(part if part.height else agreement, main_label)
        if fig is not None:
            figs.figures.append(("Protocol agreement", figures.to_png_base64(fig)))
    at_main = label_filter(main_label)
    sampled = _read(folder, "sampled_correction")
    if sampled is not None and sampled.height:
        part = sampled.filter(at_main)
        for protocol in part.get_column("protocol").unique(maintain_order=True).to_list():
            fig = figures.grouped_bars(part.filter(pl.col("protocol") == protocol), group="system",
                                       series="estimate", value="value",
                                       title=f"{protocol}: sampled, corrected and full-ranking values",
                                       ylabel=main_label)
            if fig is not None:
                figs.figures.append((f"Sampled vs corrected vs full ranking ({protocol})", figures.to_png_base64(fig)))
    popularity = _read(folder, "popularity_bins")
    if popularity is not None and popularity.height:
        fig = figures.grouped_bars(popularity.filter(at_main), group="bin", series="system", value="value",
                                   title=f"{main_label} per item-popularity bin (1 = least popular)",
                                   ylabel=main_label)
        if fig is not None:
            figs.figures.append(("Popularity bins", figures.to_png_base64(fig)))
    exposure = _read(folder, "exposure")
    if exposure is not None and exposure.height:
        first = exposure.get_column("protocol")[0]
        fig = figures.grouped_bars(exposure.filter(pl.col("protocol") == first), group="bin", series="system",
                                   value="share", title=f"Share of top-k recommendations per popularity bin ({first})",
                                   ylabel="share of recommendations")
        if fig is not None:
            figs.figures.append(("Exposure per popularity bin", figures.to_png_base64(fig)))
    curve = _read(folder, "learning_curve")
    if curve is not None and curve.height:
        part = curve.filter(at_main)
        first = part.get_column("protocol")[0] if part.height else None
        fig = figures.lines(part.filter(pl.col("protocol") == first), x="fraction", series="system",
                            value="value", title=f"Learning curve ({first})", xlabel="training fraction",
                            ylabel=main_label) if first else None
        if fig is not None:
            figs.figures.append(("Learning curve", figures.to_png_base64(fig)))
    if figs.figures:
        sections.append(figs)

    for name, title in (("paired_tests", "Significance against the baseline"),
                        ("fold_paired_tests", "Paired t over fold means"),
                        ("agreement", "Protocol agreement"),
                        ("sampled_ordering", "Sampled-metric correction: orderings")):
        frame = _read(folder, name)
        if frame is not None and frame.height:
            if name.endswith("paired_tests"):
                frame = frame.filter(at_main).select(
                    "protocol", "fold", "system", "baseline", "test", "mean_diff", "p_value", "p_adjusted",
                    "cohens_d", "n")
            elif name == "agreement":
                frame = frame.filter(at_main).with_columns(pl.col("swaps").list.join("; "))
            sections.append(Section(name, title, markdown=_md_table(frame), html=_html_table(frame)))
    audit = _aggregation_section(folder, main_label)
    if audit is not None:
        sections.append(audit)
    return sections


def _aggregation_section(folder: Path, main_label: str) -> Section | None:
    """Forman & Scholz's aggregation variants of a cross-validated run, with the system pairs each
    variant would order differently from the reported value."""
    f_table, auc_table = _read(folder, "aggregation_f"), _read(folder, "aggregation_auc")
    if f_table is None and auc_table is None:
        return None
    changes = _read(folder, "aggregation_audit")
    swaps = changes.filter(pl.col("n_swaps") > 0) if changes is not None and changes.height else None
    if swaps is not None and swaps.height:
        verdict = (f"{swaps.height} variant(s) would change a conclusion: they order at least one pair of "
                   "systems unlike the reported value (listed below).")
    else:
        verdict = "No variant orders any pair of systems unlike the reported value."
    note = ("Cross-validated runs only. F1 is reported as F_tp,fp (F of the true and false positives and "
            "negatives summed over folds, the unbiased aggregate); the other four F variants average per "
            "fold. AUC is reported per user, averaged over users, then folds; AUC_avg averages each "
            "fold's pooled AUC and AUC_merge pools every fold's scores (estimated from a seeded sample of "
            "scored targets), which assumes scores comparable across users and folds. " + verdict)
    parts: list[tuple[str, pl.DataFrame]] = []
    if f_table is not None:
        _, _, k = main_label.partition("@")
        shown = f_table.filter(pl.col("k") == int(k)) if k and f_table.filter(pl.col("k") == int(k)).height else f_table
        parts.append(("F-measure variants over folds", shown))
    if auc_table is not None:
        parts.append(("AUC variants", auc_table))
    if swaps is not None and swaps.height:
        parts.append(("Variants that reorder systems", swaps.with_columns(pl.col("swaps").list.join("; "))))
    markdown = note + "\n\n" + "".join(f"**{caption}**\n\n{_md_table(frame)}\n" for caption, frame in parts)
    body = f'<p class="note">{html.escape(note)}</p>' + "".join(
        f"<h3>{html.escape(caption)}</h3>{_html_table(frame)}" for caption, frame in parts)
    return Section("aggregation_audit", "Aggregation audit", markdown=markdown, html=body)


def write_report(folder: str | Path) -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` (self-contained) and ``tables.tex`` into the folder."""
    folder = Path(folder)
    sections = build_sections(folder)
    manifest = ResultsFolder(folder).manifest if (folder / MANIFEST).is_file() else {}
    title = f"recsys_eval report: {manifest.get('experiment', folder.parent.name)}"
    if manifest.get("created"):
        title += f" ({manifest['created'].replace('T', ' ')[:16]} UTC)"
    fig_dir = folder / "figures"
    md = [f"# {title}\n"]
    body = [f"<h1>{html.escape(title)}</h1>", "<nav><ul>"]
    body += [f'<li><a href="#{s.id}">{html.escape(s.title)}</a></li>' for s in sections]
    body.append("</ul></nav>")
    for s in sections:
        md.append(f"## {s.title}\n\n{s.markdown}")
        body.append(f'<section id="{s.id}"><h2>{html.escape(s.title)}</h2>{s.html}')
        for i, (caption, png) in enumerate(s.figures):
            name = f"figure{i + 1}.png"
            atomic.write_bytes(fig_dir / name, base64.b64decode(png))
            md.append(f"![{caption}](figures/{name})\n")
            body.append(
                f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{png}">'
                f"<figcaption>{html.escape(caption)}</figcaption></figure>"
            )
        body.append("</section>")
    page = (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        + "\n".join(body) + "</body></html>\n"
    )
    # Both written before either replaces its old version: a failure keeps the old pair.
    with atomic.atomic_path(folder / "report.md") as md_tmp, atomic.atomic_path(folder / "report.html") as page_tmp:
        md_tmp.write_text("\n".join(md), encoding="utf-8")
        page_tmp.write_text(page, encoding="utf-8")
    return {"markdown": folder / "report.md", "html": folder / "report.html", "latex": folder / "tables.tex"}
