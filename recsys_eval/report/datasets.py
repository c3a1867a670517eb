"""The report of a study over several datasets (``[[datasets]]``): the values per dataset, the mean
ranks, Friedman's test, the post-hoc and Demšar's (2006) critical-difference diagram, as
``report.html`` (self-contained) and ``figures/critical_difference.{pdf,svg,png}`` in the
cross-dataset folder (recsys_eval.experiment.datasets_study).

The diagram: the systems on an axis of mean rank (1, the best, on the left), the Nemenyi critical
difference CD = q_alpha sqrt(k (k + 1) / (6 N)) drawn above it, and a thick bar joining each maximal
group of systems whose mean ranks lie within CD of one another (the differences the datasets do not
support).
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import polars as pl

from recsys_eval.core import atomic
from recsys_eval.core.results import FIGURES, REPORT_HTML, ResultsFolder
from recsys_eval.report import figures
from recsys_eval.report.build import CSS, _html_table

#: Under this many datasets Friedman's test says little (Demšar 2006 asks for more than 10).
FEW_DATASETS = 3


def study_warnings(friedman: pl.DataFrame) -> list[str]:
    """What the reader must know before reading Friedman's row: too few datasets, an infinite F_F."""
    row = friedman.row(0, named=True)
    out = []
    if row["n_datasets"] < FEW_DATASETS:
        out.append(f"{row['n_datasets']} datasets: Friedman's test and its post-hoc need at least {FEW_DATASETS} "
                   "(Demšar 2006 recommends more than 10); read the ranks as a description, not as evidence")
    if not np.isfinite(row["f"]):
        out.append("every dataset ranks the systems alike: Iman-Davenport's F_F is infinite and its p-value 0 by "
                   f"the formula, which with {row['n_datasets']} datasets is no evidence of a difference")
    return out


def critical_difference_groups(ranks: dict[str, float], cd: float) -> list[tuple[str, ...]]:
    """The maximal groups (two systems or more) of systems whose mean ranks lie within ``cd`` of
    one another, in rank order: the bars of the diagram."""
    names = sorted(ranks, key=ranks.get)
    groups = []
    for i, name in enumerate(names):
        j = i
        while j + 1 < len(names) and ranks[names[j + 1]] - ranks[name] <= cd:
            j += 1
        group = tuple(names[i:j + 1])
        if len(group) > 1 and not any(set(group) <= set(g) for g in groups):
            groups.append(group)
    return groups


def critical_difference_figure(ranks: dict[str, float], cd: float, n_systems: int, caption: str):
    """Demšar's diagram of ``ranks`` (system -> mean rank) with the critical difference ``cd``."""
    import matplotlib.pyplot as plt

    names = sorted(ranks, key=ranks.get)
    groups = critical_difference_groups(ranks, cd)
    with plt.rc_context(figures.STYLE | {"axes.grid": False}):
        fig, ax = plt.subplots(figsize=(7.0, 1.2 + 0.25 * (len(names) + len(groups))))
        ax.set_xlim(0.5, n_systems + 0.5)
        ax.set_ylim(-(len(names) + len(groups)) - 1, 2)
        ax.axhline(0, color="black", lw=1)
        for r in range(1, n_systems + 1):
            ax.plot([r, r], [0, 0.15], color="black", lw=1)
            ax.text(r, 0.3, str(r), ha="center", va="bottom", fontsize=9)
        ax.plot([1, 1 + cd], [1.3, 1.3], color="black", lw=1.5)
        ax.text(1 + cd / 2, 1.45, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=9)
        for g, group in enumerate(groups):
            y = -0.4 - 0.35 * g
            ax.plot([ranks[group[0]] - 0.05, ranks[group[-1]] + 0.05], [y, y], color="black", lw=3)
        base = -0.6 - 0.35 * len(groups)
        half = (len(names) + 1) // 2
        for i, name in enumerate(names):
            left = i < half
            y = base - 0.45 * (i if left else len(names) - 1 - i)
            x_end = 0.6 if left else n_systems + 0.4
            ax.plot([ranks[name], ranks[name], x_end], [0, y, y], color="black", lw=0.8)
            ax.text(x_end + (-0.05 if left else 0.05), y, f"{name} ({ranks[name]:.2f})", ha="right" if left else "left",
                    va="center", fontsize=9)
        ax.axis("off")
        ax.set_title(caption, fontsize=10)
    return fig


def write_datasets_report(folder: str | Path) -> Path:
    """Write ``report.html`` and the critical-difference figure into a cross-dataset folder (its
    tables written already); return the page's path."""
    from recsys_eval.compare.datasets import nemenyi_test

    results = ResultsFolder(Path(folder))
    manifest = results.manifest
    values, ranks, friedman = (results.table(name) for name in ("values", "ranks", "friedman"))
    posthoc = next((results.table(n) for n in ("nemenyi", "holm") if results.has_table(n)), None)
    ranked_by = manifest.ranked_by or {}
    mean_ranks = dict(ranks.select("system", "mean_rank").iter_rows())
    cd = float(nemenyi_test(values, alpha=manifest.alpha, metric=ranked_by.get("metric", "").split("@")[0] or None)
               .get_column("critical_difference")[0])
    caption = (f"Mean ranks over {values.get_column('dataset').n_unique()} datasets by {ranked_by.get('metric')} "
               f"under {ranked_by.get('protocol')}; systems joined by a bar are not significantly different "
               f"(Nemenyi, alpha = {manifest.alpha})")
    figure_folder = results.file(FIGURES)
    png = figures.save(critical_difference_figure(mean_ranks, cd, len(mean_ranks), ""), figure_folder,
                       "critical_difference")
    title = f"recsys_eval report: {manifest.experiment} over {len(manifest.datasets)} datasets"
    body = [f"<h1>{html.escape(title)}</h1>"]
    body += [f'<p class="warning"><strong>Warning:</strong> {html.escape(w)}</p>' for w in study_warnings(friedman)]
    body += [f"<p>Datasets: {html.escape(', '.join(manifest.datasets))}; systems ranked by "
             f"{html.escape(str(ranked_by.get('metric')))} under {html.escape(str(ranked_by.get('protocol')))}, "
             "rank 1 best (Demšar 2006).</p>",
             f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{png}">'
             f"<figcaption>{html.escape(caption)} (figures/critical_difference.pdf, .svg, .png)</figcaption></figure>",
             "<h2>Values</h2>", _html_table(values.pivot(on="dataset", index="system", values="mean")),
             "<h2>Mean ranks</h2>", _html_table(ranks), "<h2>Friedman</h2>", _html_table(friedman)]
    if posthoc is not None:
        body += ["<h2>Post-hoc</h2>", _html_table(posthoc)]
    page = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{CSS}</style></head><body>" + "\n".join(body) + "</body></html>\n")
    path = results.file(REPORT_HTML)
    atomic.write_text(path, page)
    return path
