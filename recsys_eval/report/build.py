"""The report of a results folder: ``report.md``, a self-contained ``report.html``, ``tables.tex``
(one-column articles) and ``tables-twocolumn.tex`` (``table*``), and ``figures/``.

A first screen says what ran and who won (recsys_eval.report.overview); then the results: the
summary tables (what recsys_eval.report.choice chooses: the config's ``[report] metrics``, default
every metric asked for at one cutoff), the significance matrices against the baseline
(recsys_eval.report.significance), the figures (one style, recsys_eval.report.style) and the
analyses; then a glossary of the protocols and metrics shown, generated from their definitions
(:mod:`recsys_eval.report.glossary`), the data statistics and, collapsed, the config as run. Every
figure is written as PDF, SVG and a 200-dpi PNG named by its content (``ndcg@10-by-protocol.pdf``),
each system in the same colour throughout; the HTML page embeds the PNGs and loads nothing from the
network.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from recsys_eval.core import atomic
from recsys_eval.core.results import (
    CONFIG,
    CURVES,
    FIGURES,
    REPORT_HTML,
    REPORT_MD,
    TABLES_TEX,
    TABLES_TEX_WIDE,
    TUNING,
    Manifest,
    ResultsFolder,
)
from recsys_eval.compare.study import run_tests_table
from recsys_eval.measure.metrics import AUXILIARY_METRICS, MetricKey, display_label, lower_is_better
from recsys_eval.report import figures
from recsys_eval.report.choice import config_table, report_choice
from recsys_eval.report.glossary import glossary
from recsys_eval.report.overview import first_screen
from recsys_eval.report.significance import Matrix, effect_note, matrices
from recsys_eval.report.tables import (
    format_p,
    latex_caption,
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
th, td { padding: .25em .6em; border-bottom: 1px solid #ddd; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
thead th { border-bottom: 2px solid #444; }
.best { font-weight: bold; }
.ci { color: #777; font-size: .8em; display: block; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; font-size: .85em; }
figure { margin: 1em 0; } figure img { max-width: min(100%, 900px); }
figcaption { color: #555; font-size: .9em; max-width: 60em; }
.note { color: #555; font-size: .9em; }
td.wrap { white-space: normal; text-align: left; min-width: 18em; max-width: 40em; }
table.overview th { text-align: left; padding-right: 1.5em; border-bottom: none; }
table.overview th.sub { font-weight: normal; padding-left: 1.5em; }
table.overview td { text-align: left; border-bottom: none; white-space: normal; }
td[title] { cursor: help; }
dt { font-weight: bold; margin-top: .5em; } dd { margin-left: 1.5em; }
"""

#: How the sampled-correction figure's legend names the estimates of sampled_correction.parquet.
ESTIMATE_NAMES = {"sampled": "sampled", "rescale": "rescaled rank", "bias_variance": "bias-variance corrected",
                  "full": "full ranking"}

#: How the captions name the paired tests of ``recsys_eval.compare``.
TEST_NAMES = {"t": "t", "t_folds": "t (over fold means)", "wilcoxon": "Wilcoxon signed-rank", "sign": "sign", "permutation": "randomization",
              "mcnemar": "McNemar"}


@dataclass
class Figure:
    """A figure of the report: its caption and file name stem in ``figures/``, and the PNG as base64."""

    caption: str
    name: str
    png: str


@dataclass
class Section:
    """A report section: a title, Markdown text, HTML text and its figures."""

    id: str
    title: str
    markdown: str = ""
    html: str = ""
    figures: list[Figure] = field(default_factory=list)


def _read(folder: Path, name: str) -> pl.DataFrame | None:
    """A table of the results folder by name (``summary``, ``paired_tests``...), None if absent."""
    return ResultsFolder(folder).table(name)


def _text(v: object, digits: int) -> str:
    return f"{v:.{digits}g}" if isinstance(v, float) else ("–" if v is None else str(v))


def _html_table(frame: pl.DataFrame, digits: int = 4, wrap: set[str] = frozenset()) -> str:
    """A frame as an HTML table; the ``wrap`` columns' cells wrap (long lists), the others do not."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    classes = ["".join(' class="wrap"' if c in wrap else "") for c in frame.columns]
    body = ["<tr>" + "".join(f"<td{cls}>{html.escape(_text(v, digits))}</td>" for cls, v in zip(classes, row, strict=True))
            + "</tr>" for row in frame.iter_rows()]
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _md_table(frame: pl.DataFrame, digits: int = 4) -> str:
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(_text(v, digits) for v in row) + " |" for row in frame.iter_rows()]
    return "\n".join(lines) + "\n"


def _blocks_html(blocks, digits: int = 4) -> str:
    parts = []
    for block in blocks:
        head = "".join(f"<th>{html.escape(display_label(c))}</th>" for c in block.columns)
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
                    text += f'<span class="ci">{cell.lower:.{digits}f}–{cell.upper:.{digits}f}</span>'
                tds.append(f'<td class="{"best" if cell.best else ""}">{text}</td>')
            rows.append("<tr>" + "".join(tds) + "</tr>")
        parts.append(
            f"<h3>{html.escape(block.protocol)}</h3><table><thead><tr><th>system</th>{head}</tr>"
            f"</thead><tbody>{''.join(rows)}</tbody></table>"
        )
    return "".join(parts)


def _slug(text: str) -> str:
    """A file name stem from a figure's content: ``ndcg@10-by-protocol``; ``/`` and spaces become ``-``."""
    return re.sub(r"[^\w@+.=-]+", "-", text).strip("-")


def significance_table(paired: pl.DataFrame, label: str, alpha: float, *, protocols: list[str] | None = None,
                       systems: list[str] | None = None) -> pl.DataFrame:
    """The tests of ``label`` (``ndcg@10``) against the baseline, as read in a paper: the metric and
    k named, the difference with its direction (better or worse than the baseline, given whether
    the metric is better higher or lower), p and corrected p formatted (``< 0.001``); protocols and
    systems in the given (config) order."""
    rows = paired.filter(MetricKey.parse(label).rows())
    order = [pl.col(c).replace_strict({v: i for i, v in enumerate(names)}, default=len(names))
             for c, names in (("protocol", protocols), ("system", systems)) if names]
    rows = rows.sort([*order, "test"], maintain_order=True) if order else rows
    lower = lower_is_better(MetricKey.parse(label).name)
    return rows.select(
        "protocol", "fold",
        pl.lit(display_label(label)).alias("metric"),
        "system", "baseline", "test",
        pl.col("mean_diff").map_elements(lambda d: f"{d:+.4f}", return_dtype=pl.String).alias("difference"),
        pl.when(pl.col("mean_diff") == 0).then(pl.lit("equal"))
        .when((pl.col("mean_diff") < 0) == lower).then(pl.lit("better")).otherwise(pl.lit("worse"))
        .alias("vs baseline"),
        pl.col("p_value").map_elements(format_p, return_dtype=pl.String).alias("p"),
        pl.col("p_adjusted").map_elements(format_p, return_dtype=pl.String).alias("p adjusted"),
        pl.when(pl.col("p_adjusted") < alpha).then(pl.lit("yes")).otherwise(pl.lit("no")).alias("significant"),
        "n",
    )


def _sampled_caption(protocol: str, definition: dict, full: str | None, label: str) -> str:
    """What each bar of the sampled-correction figure is, and what "full" is."""
    n = definition.get("n")
    text = (f"{display_label(label)} under {protocol}, bars in greys (not the systems' colours): "
            f"'{ESTIMATE_NAMES['sampled']}' is the metric of each relevant item's rank among "
            f"itself and {n} sampled non-relevant items, averaged per user then per fold like the summary; "
            f"'{ESTIMATE_NAMES['rescale']}' evaluates the metric at the full rank whose expected sampled rank is "
            f"the observed one; '{ESTIMATE_NAMES['bias_variance']}' is Krichene & Rendle's corrected metric (the "
            "per-rank values that best match the full-ranking metric in expectation, with a variance penalty). ")
    if full:
        text += f"'{ESTIMATE_NAMES['full']}' is the same metric measured by ranking every candidate item ({full})."
    else:
        text += "The run has no full-ranking counterpart (AI+1R+AN), so no full-ranking bar is drawn."
    return text


def build_sections(folder: Path) -> list[Section]:
    """Collect every section the results folder has data for, results first."""
    sections: list[Section] = []
    results = ResultsFolder(folder)
    manifest = results.manifest
    config_text = results.text(CONFIG)
    alpha = manifest.alpha
    tail = _closing_sections(folder, manifest, config_text)

    summary = _read(folder, "summary")
    if summary is None:
        return tail
    summary = summary.filter(~pl.col("metric").is_in(AUXILIARY_METRICS))
    protocols, systems = manifest.protocols or None, manifest.systems or None
    folds = summary.get_column("fold").unique(maintain_order=True).to_list()
    fold = "all" if "all" in folds else folds[0]
    choice = report_choice(folder, summary)
    columns, intervals, focus = choice.columns, choice.intervals, choice.headline
    sections.append(_overview(folder, manifest, summary, focus, fold))
    # Significance marks: the paired t over fold means for cross-validated runs, else the first test.
    paired = _read(folder, run_tests_table(manifest.folds))
    significance, test = None, None
    if paired is not None and paired.height:
        test = next((t for t in manifest.tests if t in set(paired.get_column("test"))), paired.get_column("test")[0])
        significance = paired.filter(pl.col("test") == test)
    blocks = summary_blocks(summary, fold=fold, significance=significance, alpha=alpha, columns=columns,
                            protocols=protocols, systems=systems)
    baseline = manifest.baseline
    note = (f"Mean over users (fold: {fold}); 95% interval under each value; best value per column in bold "
            "(every value within 1e-9 of the best: ties are bold alike)"
            + (f"; * marks a difference from {baseline} significant at {alpha} after "
               f"{manifest.correction} correction ({TEST_NAMES.get(test, test)} test)"
               if test and baseline else "")
            + ". Every metric at every cutoff is in summary.csv.")
    sections.append(Section(
        "summary", "Summary",
        markdown=note + "\n\n" + to_markdown(blocks),
        html=f'<p class="note">{html.escape(note)}</p>' + _blocks_html(blocks),
    ))
    if choice.by_cutoff:
        sections.append(_cutoff_section(choice.by_cutoff, summary_blocks(
            summary, fold=fold, significance=significance, alpha=alpha, columns=choice.by_cutoff,
            protocols=protocols, systems=systems)))
    caption = latex_caption(manifest.description or manifest.experiment, protocol="{protocol}",
                            intervals=intervals, test=TEST_NAMES.get(test, test), baseline=baseline,
                            correction=manifest.correction, alpha=alpha)
    label = f"tab:{_slug(manifest.experiment)}"
    atomic.write_text(results.file(TABLES_TEX), to_latex(blocks, caption=caption, label=label, intervals=intervals))
    atomic.write_text(results.file(TABLES_TEX_WIDE),
                      to_latex(blocks, caption=caption, label=label, intervals=intervals, wide=True))

    at_main = MetricKey.parse(focus).rows()
    for name, title in (("paired_tests", "Significance against the baseline"),
                        ("fold_paired_tests", "Significance against the baseline: paired t over fold means")):
        frame = _read(folder, name)
        if frame is not None and frame.height:
            sections.append(_significance_section(name, title, frame, manifest, columns))

    sections.append(_figures(folder, manifest, summary, fold, focus))
    agreement = _read(folder, "agreement")
    if agreement is not None and agreement.height:
        sections.append(_agreement_section(agreement.filter(at_main), focus, protocols))
    ordering = _read(folder, "sampled_ordering")
    if ordering is not None and ordering.height:
        sections.append(Section("sampled_ordering", "Sampled-metric correction: orderings",
                                markdown=_md_table(ordering), html=_html_table(ordering)))
    audit = _aggregation_section(folder, focus)
    if audit is not None:
        sections.append(audit)
    tuning = _tuning_section(folder)
    if tuning is not None:
        sections.append(tuning)
    from recsys_eval.report.diagnostics import diagnostic_sections

    sections += diagnostic_sections(folder, focus)
    labels = [c for c in dict.fromkeys(columns + summary.get_column("metric").unique(maintain_order=True).to_list())]
    terms = glossary(manifest.protocol_definitions, labels)
    sections.append(Section(
        "glossary", "Glossary",
        markdown="".join(f"- **{term}**: {text}\n" for term, text in terms),
        html="<dl>" + "".join(f"<dt>{html.escape(term)}</dt><dd>{html.escape(text)}</dd>" for term, text in terms)
        + "</dl>",
    ))
    return [s for s in sections if s.html or s.figures] + tail


def _cutoff_section(labels: list[str], blocks) -> Section:
    """The headline's metric at every cutoff the run measured (recsys_eval.report.choice), marked
    as the summary is: the summary shows one cutoff, and every cutoff asked for is shown here."""
    metric = display_label(MetricKey.parse(labels[0]).name)
    ks = ", ".join(str(MetricKey.parse(label).k) for label in labels)
    note = (f"{metric} at every cutoff measured (k = {ks}), intervals, bold and * as in the summary. Every "
            "cutoff metric against k: the figure metrics-by-k; every value: summary.csv.")
    return Section("cutoffs", f"{metric} at every cutoff", markdown=note + "\n\n" + to_markdown(blocks),
                   html=f'<p class="note">{html.escape(note)}</p>' + _blocks_html(blocks))


def _overview(folder: Path, manifest: Manifest, summary: pl.DataFrame, headline: str, fold: str) -> Section:
    """The first screen (recsys_eval.report.overview): what ran, and the winner per protocol."""
    lines = first_screen(manifest, {"split": config_table(folder, "split")}, summary, headline, fold)
    markdown = "".join(f"- **{term.strip()}**: {text}\n" if not term.startswith(" ") else f"  - {term.strip()}: {text}\n"
                       for term, text in lines)
    rows = "".join(f'<tr><th{" class=sub" if term.startswith(" ") else ""}>{html.escape(term.strip())}</th>'
                   f"<td>{html.escape(text)}</td></tr>" for term, text in lines)
    return Section("overview", "At a glance", markdown=markdown, html=f'<table class="overview">{rows}</table>')


def _matrix_html(matrix: Matrix) -> str:
    head = "".join(f"<th>{html.escape(display_label(c))}</th>" for c in matrix.columns)
    body = "".join(
        f"<tr><td>{html.escape(system)}</td>" + "".join(
            f'<td title="{html.escape(cells[c].title)}">{html.escape(cells[c].text)}</td>' if c in cells
            else "<td>–</td>" for c in matrix.columns) + "</tr>"
        for system, cells in matrix.rows.items())
    return (f"<h3>{html.escape(matrix.protocol)}</h3><table><thead><tr><th>system</th>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def _matrix_markdown(matrix: Matrix) -> str:
    lines = [f"**{matrix.protocol}**\n", "| system | " + " | ".join(map(display_label, matrix.columns)) + " |",
             "|---|" + "---:|" * len(matrix.columns)]
    lines += [f"| {system} | " + " | ".join(cells[c].text if c in cells else "–" for c in matrix.columns) + " |"
              for system, cells in matrix.rows.items()]
    return "\n".join(lines) + "\n"


def _significance_section(name: str, title: str, paired: pl.DataFrame, manifest: Manifest,
                          columns: list[str]) -> Section:
    """One matrix per protocol (recsys_eval.report.significance) of the report's columns."""
    shown = matrices(paired, columns=columns, alpha=manifest.alpha, tests=manifest.tests,
                     protocols=manifest.protocols or None, systems=manifest.systems or None)
    if not shown:
        return Section(name, title)
    test = TEST_NAMES.get(shown[0].test, shown[0].test)
    several = paired.get_column("fold").n_unique() > 1
    what = ("per fold: the count of folds where the system is significantly better (▲) and worse (▼) "
            "than the baseline, of the folds tested" if several else
            "the difference system - baseline; ▲ significantly better, ▼ significantly worse")
    note = (f"Every system against {manifest.baseline or 'the baseline'} by a paired {test} test, {what}, at "
            f"{manifest.alpha} after {manifest.correction} correction over the systems of a protocol, fold, "
            f"metric and test. Better is higher, or lower for error metrics. "
            + ("Hover a cell for its interval, effect size (Cohen's d) and p-values. " if not several else "")
            + f"Every test, metric and cutoff: {name}.csv.")
    md, body = [note + "\n"], [f'<p class="note">{html.escape(note)}</p>']
    for matrix in shown:
        notes = [n for n in [effect_note(matrix), *matrix.notes] if n]
        md.append(_matrix_markdown(matrix) + "".join(f"\n{n}\n" for n in notes))
        body.append(_matrix_html(matrix) + "".join(f'<p class="note">{html.escape(n)}</p>' for n in matrix.notes))
    return Section(name, title, markdown="\n".join(md), html="".join(body))


def _agreement_section(agreement: pl.DataFrame, focus: str, protocols: list[str] | None) -> Section:
    """Kendall's tau between the protocols' orderings of the systems by the headline metric, with
    readable headers and the swapped pairs in a cell that wraps; protocol pairs in config order."""
    if protocols:
        rank = {p: i for i, p in enumerate(protocols)}
        agreement = agreement.with_columns(
            pl.col("protocol_a").replace_strict(rank, default=len(rank)).alias("_a"),
            pl.col("protocol_b").replace_strict(rank, default=len(rank)).alias("_b"),
        ).with_columns(
            pl.when(pl.col("_a") > pl.col("_b")).then(pl.col("protocol_b")).otherwise(pl.col("protocol_a")).alias("protocol_a"),
            pl.when(pl.col("_a") > pl.col("_b")).then(pl.col("protocol_a")).otherwise(pl.col("protocol_b")).alias("protocol_b"),
            pl.min_horizontal("_a", "_b").alias("_first"), pl.max_horizontal("_a", "_b").alias("_second"),
        ).sort("_first", "_second")
    table = agreement.select(
        pl.col("protocol_a").alias("protocol A"), pl.col("protocol_b").alias("protocol B"),
        pl.col("tau").alias("Kendall's τ"), pl.col("p_value").map_elements(format_p, return_dtype=pl.String).alias("p"),
        pl.col("n_systems").alias("systems"),
        pl.col("swaps").list.len().alias("pairs swapped"),
        pl.col("swaps").list.join("; ").alias("swapped pairs (ahead under A, behind under B)"),
    )
    note = (f"How alike two protocols order the systems by {display_label(focus)}: Kendall's τ-b (1 = the same "
            "order); systems whose means differ by at most 1e-9 are tied, and a tie is never a swap. Every "
            "metric and cutoff: agreement.csv.")
    return Section("agreement", "Protocol agreement", markdown=note + "\n\n" + _md_table(table),
                   html=f'<p class="note">{html.escape(note)}</p>' + _html_table(table, wrap={table.columns[-1]}))


def _closing_sections(folder: Path, manifest: Manifest, config_text: str) -> list[Section]:
    """The data statistics and the config as run (collapsed): what the results rest on."""
    sections = []
    stats = _read(folder, "data_stats")
    if stats is not None:
        sections.append(Section("data", "Data and splits", markdown=_md_table(stats), html=_html_table(stats)))
    collapsed = "<details><summary>config.toml as run (click to show)</summary>{}</details>"
    sections.append(Section(
        "config", "Configuration",
        markdown=collapsed.format(f"\n\n```toml\n{config_text}\n```\n\n") + "\n",
        html=collapsed.format(f"<pre>{html.escape(config_text)}</pre>"),
    ))
    return sections


def _figures(folder: Path, manifest: Manifest, summary: pl.DataFrame, fold: str, focus: str) -> Section:
    """Every figure the run has data for, each system in the colour the manifest's order gives it."""
    out = ResultsFolder(folder).file(FIGURES)
    systems = manifest.systems or summary.get_column("system").unique(maintain_order=True).to_list()
    colors = figures.system_colors(systems)
    main = display_label(focus)
    at_main = MetricKey.parse(focus).rows()
    section = Section("figures", "Figures")

    def add(fig, name: str, caption: str) -> None:
        if fig is not None:
            section.figures.append(Figure(caption, _slug(name), figures.save(fig, out, _slug(name))))

    order = {"protocols": manifest.protocols or None, "systems": systems}
    add(figures.systems_with_intervals(summary, focus, fold, colors=colors, **order), f"{focus}-by-protocol",
        f"{main} of every system under every protocol (fold {fold}), bars with 95% intervals.")
    add(figures.ranks_across_protocols(summary, focus, fold, colors=colors, **order),
        f"{focus}-ranks-across-protocols",
        f"Each system's rank by {main} under every protocol (1 = best; means within 1e-9 share a rank).")
    # the headline metric by k under every protocol, and every cutoff metric by k under the first
    # protocol: two figures, not one per metric (13 figures of 11 panels each cost a minute)
    focus_metric = MetricKey.parse(focus).name
    add(figures.metric_against_k(summary, focus_metric, fold, colors=colors, ylabel=display_label(focus_metric),
                                 **order),
        f"{focus_metric}-by-k", f"{display_label(focus_metric)} against the cutoff k, one panel per protocol "
        f"(fold {fold}).")
    first = (manifest.protocols or summary.get_column("protocol").unique(maintain_order=True).to_list())[0]
    add(figures.metrics_against_k(summary, first, fold, metrics=manifest.metrics or None, colors=colors,
                                  systems=systems),
        f"metrics-by-k-{first}", f"Every cutoff metric against the cutoff k under {first} (fold {fold}), "
        "one panel per metric; every protocol's values are in summary.csv.")
    curves = _read(folder, CURVES)
    if curves is not None and curves.height:
        curve_fold = fold if fold in set(curves.get_column("fold")) else curves.get_column("fold")[0]
        add(figures.curves_by_protocol(curves, "roc", curve_fold, colors=colors, **order), "roc-by-protocol",
            f"ROC curves (fold {curve_fold}): the true positive rate at each false positive rate, averaged over "
            "the units (vertical averaging) of each fold, then over folds; each unit's whole target set is "
            "ranked, unlisted targets tied last. The dashed diagonal is a random ranking.")
        add(figures.curves_by_protocol(curves, "pr", curve_fold, colors=colors, **order), "pr-by-protocol",
            f"Precision-recall curves (fold {curve_fold}): at each recall level the unit's interpolated "
            "precision (the best precision at that recall or beyond, 0 if never reached), averaged over the "
            "units of each fold, then over folds.")
    agreement = _read(folder, "agreement")
    if agreement is not None and agreement.height:
        part = agreement.filter(at_main)
        add(figures.agreement_matrix(part if part.height else agreement, main, manifest.protocols or None),
            f"{focus}-protocol-agreement",
            f"Kendall's tau between the orderings of the systems by {main} under each pair of protocols.")
    sampled = _read(folder, "sampled_correction")
    definitions = manifest.protocol_definitions
    if sampled is not None and sampled.height:
        part = sampled.filter(at_main)
        for protocol in part.get_column("protocol").unique(maintain_order=True).to_list():
            rows = part.filter(pl.col("protocol") == protocol)
            rows = rows.sort(pl.col("system").replace_strict({s: i for i, s in enumerate(systems)},
                                                             default=len(systems)), maintain_order=True)
            full = rows.get_column("full_protocol").drop_nulls()
            add(figures.grouped_bars(rows, group="system", series="estimate", value="value", title=protocol,
                                     ylabel=main, xlabel="system", names=ESTIMATE_NAMES),
                f"{focus}-sampled-correction-{protocol}",
                _sampled_caption(protocol, definitions.get(protocol, {}), full[0] if full.len() else None,
                                 focus))
    popularity = _read(folder, "popularity_bins")
    if popularity is not None and popularity.height:
        add(figures.grouped_bars(popularity.filter(at_main), group="bin", series="system", value="value",
                                 title=f"{main} per item-popularity bin", ylabel=main,
                                 xlabel="popularity bin (1 = least popular)", colors=colors),
            f"{focus}-by-popularity-bin", f"{main} when only the items of one popularity bin are targets.")
    exposure = _read(folder, "exposure")
    if exposure is not None and exposure.height:
        first = exposure.get_column("protocol")[0]
        add(figures.grouped_bars(exposure.filter(pl.col("protocol") == first), group="bin", series="system",
                                 value="share", title=f"Top-k recommendations per popularity bin ({first})",
                                 ylabel="share of recommendations", xlabel="popularity bin (1 = least popular)",
                                 colors=colors),
            f"exposure-by-popularity-bin-{first}",
            f"Share of each system's top-k recommendations that falls in each item-popularity bin ({first}).")
    curve = _read(folder, "learning_curve")
    if curve is not None and curve.height:
        part = curve.filter(at_main)
        first = part.get_column("protocol")[0] if part.height else None
        if first:
            add(figures.lines(part.filter(pl.col("protocol") == first), x="fraction", series="system",
                              value="value", title=f"Learning curve ({first})", xlabel="training fraction",
                              ylabel=main, colors=colors),
                f"{focus}-learning-curve-{first}",
                f"{main} against the fraction of the training data each system was fitted on ({first}).")
    return section


def _tuning_section(folder: Path) -> Section | None:
    """A run that tuned (``tuning.parquet``): the hyperparameters chosen per fold and system, the
    tuning cost, and each system's validation value by trial (recsys_eval.report.tuning)."""
    path = ResultsFolder(folder).file(TUNING)
    if not path.is_file():
        return None
    from recsys_eval.report.tuning import chosen_parameters, curve_figure, tuning_cost

    trials = pl.read_parquet(path)
    if trials.is_empty():
        return None
    options = config_table(folder, "tuning")
    what = display_label(options.get("metric", "ndcg@10"))
    where = options.get("protocol") or "the first protocol"
    note = (f"Each system with a search space was tuned ({options.get('method', 'tpe')}) on a validation split "
            f"carved from each fold's train side, maximising {what} under {where}; the chosen "
            "hyperparameters (the best validation value, the earliest trial on ties) were refitted on the "
            "fold's whole train side before the test side was used. Every trial: tuning.parquet.")
    parts = (("Chosen hyperparameters", chosen_parameters(trials)), ("Tuning cost (seconds)", tuning_cost(trials)))
    section = Section(
        "tuning", "Tuning",
        markdown=note + "\n\n" + "".join(f"**{caption}**\n\n{_md_table(frame)}\n" for caption, frame in parts),
        html=f'<p class="note">{html.escape(note)}</p>' + "".join(
            f"<h3>{html.escape(caption)}</h3>{_html_table(frame)}" for caption, frame in parts),
    )
    caption = (f"Validation {what} by trial (dots) and the best so far (line), one panel per tuned system "
               "(shared axes), a grey line per fold.")
    figure = curve_figure(trials, ResultsFolder(folder).manifest.systems, ylabel=f"validation {what}")
    section.figures.append(Figure(caption, "tuning-validation-curves",
                                  figures.save(figure, ResultsFolder(folder).file(FIGURES), "tuning-validation-curves")))
    return section


def _aggregation_section(folder: Path, focus: str) -> Section | None:
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
        k = MetricKey.parse(focus).k
        shown = f_table.filter(pl.col("k") == k) if k and f_table.filter(pl.col("k") == k).height else f_table
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
    """Write ``report.md``, ``report.html`` (self-contained), ``tables.tex``, ``tables-twocolumn.tex``
    and ``figures/`` into the folder."""
    folder = Path(folder)
    sections = build_sections(folder)
    results = ResultsFolder(folder)
    manifest = results.manifest
    title = f"recsys_eval report: {manifest.experiment}"
    if manifest.created:
        title += f" ({manifest.created.replace('T', ' ')[:16]} UTC)"
    md = [f"# {title}\n"]
    body = [f"<h1>{html.escape(title)}</h1>", "<nav><ul>"]
    body += [f'<li><a href="#{s.id}">{html.escape(s.title)}</a></li>' for s in sections]
    body.append("</ul></nav>")
    for s in sections:
        md.append(f"## {s.title}\n\n{s.markdown}")
        body.append(f'<section id="{s.id}"><h2>{html.escape(s.title)}</h2>{s.html}')
        for fig in s.figures:
            md.append(f"![{fig.caption}](figures/{fig.name}.png)\n\n{fig.caption}\n")
            body.append(
                f'<figure id="fig-{html.escape(fig.name)}"><img alt="{html.escape(fig.caption)}" '
                f'src="data:image/png;base64,{fig.png}"><figcaption>{html.escape(fig.caption)} '
                f"(figures/{html.escape(fig.name)}.pdf, .svg, .png)</figcaption></figure>"
            )
        body.append("</section>")
    page = (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        + "\n".join(body) + "</body></html>\n"
    )
    # Both written before either replaces its old version: a failure keeps the old pair.
    paths = {"markdown": results.file(REPORT_MD), "html": results.file(REPORT_HTML),
             "latex": results.file(TABLES_TEX), "latex_wide": results.file(TABLES_TEX_WIDE)}
    with atomic.atomic_path(paths["markdown"]) as md_tmp, atomic.atomic_path(paths["html"]) as page_tmp:
        md_tmp.write_text("\n".join(md), encoding="utf-8")
        page_tmp.write_text(page, encoding="utf-8")
    return paths
