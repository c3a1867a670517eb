"""The report's diagnostics of the evaluation itself (issue 31): the effect sizes of the comparisons
with the baseline (with their LaTeX table), the distribution of per-user values behind each mean
(with ECDF and Lorenz figures), the metric per slice of users, the leakage audit of the splits and
the tuning budget each system got.

Each function returns a :class:`~recsys_eval.report.build.Section`, or None when the results folder
has nothing for it; :func:`diagnostic_sections` is the one hook :mod:`recsys_eval.report.build` calls.
"""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from recsys_eval.core import atomic
from recsys_eval.core.results import (
    DISTRIBUTION_CURVES,
    EFFECT_SIZES_TEX,
    FIGURES,
    LEAKAGE,
    TUNING_BUDGET,
    ResultsFolder,
)
from recsys_eval.measure.metrics import MetricKey, display_label
from recsys_eval.report import figures, style
from recsys_eval.report.build import Figure, Section, _html_table, _md_table, _slug
from recsys_eval.report.tables import format_p, latex_escape

#: Cohen's (1988) conventional bounds of |d|: below 0.2 negligible, then small, medium, large.
MAGNITUDES = ((0.2, "negligible"), (0.5, "small"), (0.8, "medium"), (float("inf"), "large"))

#: The leakage shares as the report names them (docs/CONVENTIONS.md#leakage).
LEAKAGE_COLUMNS = {
    "share_after_test_start": "train after test start",
    "share_after_user_test": "train after the user's test",
    "share_future_items": "test items first trained on later",
    "share_users_leaking": "test users with later training",
}


def diagnostic_sections(folder: Path, focus: str) -> list[Section]:
    """Every diagnostic section the folder has data for; ``focus`` is the report's main
    ``metric@k`` (``ndcg@10``)."""
    sections = (effect_size_section(folder, focus), distribution_section(folder, focus),
                slice_section(folder, focus), leakage_section(folder), tuning_hygiene_section(folder))
    return [s for s in sections if s is not None]


def magnitude(d: float | None) -> str:
    """Cohen's label of a standardised effect |d| (:data:`MAGNITUDES`)."""
    if d is None or d != d:
        return "–"
    return next(label for bound, label in MAGNITUDES if abs(d) < bound)


def effect_size_table(paired: pl.DataFrame, label: str, *, protocols: list[str] | None = None,
                      systems: list[str] | None = None) -> pl.DataFrame:
    """The effect sizes of ``label`` (``ndcg@10``) against the baseline, one row per protocol, fold
    and system: the difference with its interval, the relative difference in % with its bootstrap
    interval, d_z with Cohen's label, and the corrected p of the first test (the effect sizes are
    the same for every test of a pair)."""
    rows = paired.filter(MetricKey.parse(label).rows())
    if rows.is_empty():
        return rows
    rows = rows.filter(pl.col("test") == rows.get_column("test")[0])
    rows = _in_order(rows, protocols, systems)
    return pl.DataFrame([{
        "protocol": r["protocol"], "fold": r["fold"], "system": r["system"], "baseline": r["baseline"],
        "difference": f"{r['mean_diff']:+.4f} [{r['diff_lower']:+.4f}, {r['diff_upper']:+.4f}]",
        "relative": _percent(r["relative_diff"], r["relative_lower"], r["relative_upper"]),
        "d_z": "–" if r["cohens_d"] is None or r["cohens_d"] != r["cohens_d"] else f"{r['cohens_d']:+.2f}",
        "magnitude": magnitude(r["cohens_d"]),
        "p adjusted": format_p(r["p_adjusted"]),
        "significant": "yes" if r["significant"] else "no",
    } for r in rows.iter_rows(named=True)], schema_overrides={"difference": pl.String})


def _percent(value: float | None, lower: float | None, upper: float | None) -> str:
    if value is None or value != value:
        return "–"
    bounds = "" if lower is None or lower != lower else f" [{100 * lower:+.1f}%, {100 * upper:+.1f}%]"
    return f"{100 * value:+.1f}%{bounds}"


def effect_size_latex(table: pl.DataFrame, label: str, *, test: str, alpha: float) -> str:
    """A booktabs table of :func:`effect_size_table`, a dagger on the differences significant at
    ``alpha`` after correction."""
    lines = [r"\begin{table}[t]", r"\centering", r"\small",
             r"\resizebox{\ifdim\width>\linewidth\linewidth\else\width\fi}{!}{%",
             r"\begin{tabular}{@{}llllrl@{}}", r"\toprule",
             r"Protocol & System & $\Delta$ [95\% CI] & Relative [95\% CI] & $d_z$ & $p_{adj}$ \\", r"\midrule"]
    for r in table.iter_rows(named=True):
        mark = r"$^{\dagger}$" if r["significant"] == "yes" else ""
        protocol = r["protocol"] + ("" if r["fold"] in ("all", "holdout") else f" ({r['fold']})")
        cells = [latex_escape(c) for c in (protocol, r["system"], r["difference"], r["relative"], r["d_z"],
                                           r["p adjusted"])]
        cells[2] += mark
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}}",
              rf"\caption{{Effect sizes of {latex_escape(display_label(label))} against "
              rf"{latex_escape(table.get_column('baseline')[0])}: mean per-user difference with its 95\% "
              r"t-interval, relative difference of the means with a paired percentile-bootstrap interval, "
              r"and the standardised paired effect $d_z$ = mean / sd of the differences. $\dagger$: "
              rf"significant by a paired {latex_escape(test)} test at $\alpha = {alpha}$ after correction.}}",
              r"\label{tab:effect-sizes}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def effect_size_section(folder: Path, focus: str) -> Section | None:
    """The effect sizes of the report's main metric against the baseline, and their LaTeX table."""
    results = ResultsFolder(folder)
    paired = results.table("paired_tests")
    if paired is None or paired.is_empty() or "relative_diff" not in paired.columns:
        return None
    manifest = results.manifest
    table = effect_size_table(paired, focus, protocols=manifest.protocols or None, systems=manifest.systems or None)
    if table.is_empty():
        return None
    test = paired.get_column("test")[0]
    atomic.write_text(results.file(EFFECT_SIZES_TEX),
                      effect_size_latex(table, focus, test=test, alpha=manifest.alpha))
    note = (f"How large each difference from {table.get_column('baseline')[0]} on {display_label(focus)} is, "
            "beside whether it is significant. difference: the mean per-user difference (system - baseline) "
            "with its 95% t-interval; relative: the system's mean over the baseline's, minus 1, with a 95% "
            "paired bootstrap interval (users resampled); d_z: the mean difference over the standard "
            "deviation of the per-user differences (Lakens 2013), labelled by Cohen's bounds 0.2, 0.5, 0.8. "
            "A tiny d_z can be significant with many users; a large one can miss significance with few. "
            f"p adjusted: {test} test. LaTeX: {EFFECT_SIZES_TEX}; every metric: paired_tests.csv.")
    return Section("effect_sizes", f"Effect sizes: {display_label(focus)}",
                   markdown=f"{note}\n\n{_md_table(table)}",
                   html=f'<p class="note">{html.escape(note)}</p>' + _html_table(table))


def leakage_section(folder: Path) -> Section | None:
    """The leakage audit per fold, the shares above the threshold named in the verdict."""
    audit = ResultsFolder(folder).table(LEAKAGE)
    if audit is None or audit.is_empty():
        return None
    threshold = audit.get_column("threshold")[0]
    flagged = audit.filter(pl.col("flagged").list.len() > 0)
    if flagged.height:
        names = sorted({LEAKAGE_COLUMNS[s] for s in flagged.get_column("flagged").explode().to_list()})
        verdict = (f"**Leakage flagged** in {flagged.height} of {audit.height} fold(s): {', '.join(names)} above "
                   f"{threshold:.0%}. The models were trained on interactions from after the moments they are "
                   "tested at; values and even the ordering of systems may differ under a split that follows "
                   "the global timeline (a `time` split).")
    else:
        verdict = f"No share is above {threshold:.0%}: the folds respect the global timeline."
    note = ("Ji, Sun, Zhang & Li (TOIS 2023): with T0 the earliest test time of a fold and tau_u a user's "
            "earliest test time, the shares of training interactions later than T0 and later than their "
            "user's tau_u, of test interactions whose item was first trained on after tau_u, and of test "
            "users with any training interaction after tau_u. Per user: leakage_users.parquet.")
    table = audit.select("fold", *[pl.col(s).round(4).alias(t) for s, t in LEAKAGE_COLUMNS.items()])
    return Section("leakage", "Leakage audit",
                   markdown=f"{verdict}\n\n{note}\n\n{_md_table(table)}",
                   html=f"<p>{html.escape(verdict.replace('**', '').replace('`', ''))}</p><p class=\"note\">{html.escape(note)}</p>"
                   + _html_table(table))


#: At most this many protocols get a distribution figure (the manifest's first ones); the table
#: has every protocol.
DISTRIBUTION_FIGURES = 4


def _focus_rows(results: ResultsFolder, name: str, key: MetricKey) -> tuple[pl.DataFrame, str] | None:
    """The rows of diagnostics table ``name`` for the report's metric in the report's fold (``all``
    when the run has several folds, else its one), in config order, with that fold; None when
    there are none."""
    table = results.table(name)
    if table is None or table.is_empty():
        return None
    folds = table.get_column("fold").unique().to_list()
    fold = "all" if "all" in folds else folds[0]
    rows = table.filter(key.rows() & (pl.col("fold") == fold))
    manifest = results.manifest
    return None if rows.is_empty() else (_in_order(rows, manifest.protocols, manifest.systems), fold)


def distribution_section(folder: Path, focus: str) -> Section | None:
    """The per-user distribution of the main metric: quantiles, share at zero and Gini per protocol
    and system, and per protocol the ECDF and the Lorenz curve of every system
    (recsys_eval.compare.distributions)."""
    results = ResultsFolder(folder)
    key = MetricKey.parse(focus)
    found = _focus_rows(results, "distributions", key)
    if found is None:
        return None
    rows, fold = found
    manifest = results.manifest
    shown = rows.select("protocol", "system", pl.col("n").alias("users"),
                        *[pl.col(c).round(4) for c in ("mean", "q10", "q25", "q50", "q75", "q90")],
                        pl.col("share_zero").round(4).alias("share at 0"), pl.col("gini").round(4).alias("Gini"))
    main = display_label(focus)
    note = (f"Who the mean of {main} serves (fold {fold}): the per-user values' quantiles (q10 ... q90), the "
            "share of users at exactly 0, and the Gini coefficient of the per-user values (0: every user gets "
            "the same; near 1: a few users get nearly everything), after Ekstrand, Carterette & Diaz (TORS "
            "2024). Two systems with one mean can differ here. Every metric and fold: distributions.csv.")
    section = Section("distributions", f"Per-user distributions: {main}", markdown=f"{note}\n\n{_md_table(shown)}",
                      html=f'<p class="note">{html.escape(note)}</p>' + _html_table(shown))
    colors = figures.system_colors(manifest.systems or rows.get_column("system").unique(maintain_order=True).to_list())
    curves = results.table(DISTRIBUTION_CURVES)
    curves = curves.filter(key.rows() & (pl.col("fold") == fold)) if curves is not None else pl.DataFrame()
    drawn = rows.get_column("protocol").unique(maintain_order=True).to_list()[:DISTRIBUTION_FIGURES]
    fig = distribution_figure([(p, curves.filter(pl.col("protocol") == p)) for p in drawn] if curves.height else [],
                              main, colors)
    if fig is not None:
        name = _slug(f"{focus}-distributions")
        caption = (f"{main} (fold {fold}), a column per protocol. Top: the share of users (y) whose value is at "
                   "most x, one line per system; a line further right serves more users well. Bottom: the "
                   "Lorenz curve, the share of the total value held by the share of users (x) who get least; "
                   "the diagonal is equality, and the Gini is twice the area between it and the curve.")
        section.figures.append(Figure(caption, name, figures.save(fig, results.file(FIGURES), name)))
    return section


def _in_order(rows: pl.DataFrame, protocols: list[str], systems: list[str]) -> pl.DataFrame:
    order = [pl.col(c).replace_strict({v: i for i, v in enumerate(names)}, default=len(names))
             for c, names in (("protocol", protocols), ("system", systems)) if names]
    return rows.sort(order, maintain_order=True) if order else rows


def distribution_figure(panels: list[tuple[str, pl.DataFrame]], label: str, colors: dict):
    """One figure, a column per (protocol, curves) of ``panels``: each system's ECDF (the quantile
    function drawn as (Q(p), p)) above its Lorenz curve with the line of equality. One figure, not
    one per protocol: a saved figure's fixed cost (layout, fonts embedded in the PDF) is most of it."""
    panels = [(protocol, curves) for protocol, curves in panels if not curves.is_empty()]
    if not panels:
        return None
    import matplotlib.pyplot as plt

    with plt.rc_context(figures.STYLE):
        fig, axes = plt.subplots(2, len(panels), figsize=(style.PAGE, 4.4), squeeze=False, sharex="row", sharey=True)
        for (protocol, curves), ecdf, curve in zip(panels, axes[0], axes[1], strict=True):
            for system in curves.get_column("system").unique(maintain_order=True).to_list():
                part = curves.filter(pl.col("system") == system).sort("p")
                color = colors.get(system)
                ecdf.step(part["quantile"], part["p"], where="post", label=system, color=color)
                if part["lorenz"].is_not_nan().all():
                    curve.plot(part["p"], part["lorenz"], color=color)
            curve.plot([0, 1], [0, 1], color="0.6", ls="--", lw=1)
            ecdf.set(xlabel=f"per-user {label}", title=f"ECDF ({protocol})")
            curve.set(xlabel="share of users", title=f"Lorenz ({protocol})")
        axes[0, 0].set_ylabel("share of users at or below")
        axes[1, 0].set_ylabel(f"share of total {label}")
        style.legend_below(fig, axes[0, 0])
    return fig


def slice_section(folder: Path, focus: str) -> Section | None:
    """The main metric per slice group (``[analysis] slices``) of the report's fold, with the
    paired test against the baseline in each group, each slice under the first protocol that has
    it, and a figure of the metric by group with a panel per slice (one line per system)."""
    results = ResultsFolder(folder)
    tests = results.table("slice_tests")
    key = MetricKey.parse(focus)
    found = _focus_rows(results, "slices", key)
    if found is None:
        return None
    rows, fold = found
    manifest = results.manifest
    firsts = rows.group_by("slice", maintain_order=True).agg(pl.col("protocol").first())
    rows = rows.join(firsts, on=["slice", "protocol"], maintain_order="left")  # the others: slices.csv
    rows = rows.sort("slice", "order", maintain_order=True)
    shown = rows.select("protocol", "slice", "group", "system", pl.col("n").alias("users"),
                        pl.format("{} [{}, {}]", *[pl.col(c).round(4) for c in ("mean", "lower", "upper")])
                        .fill_null(pl.col("mean").round(4).cast(pl.String)).alias(display_label(focus)))
    if tests is not None and tests.height:
        test = tests.get_column("test")[0]
        marks = tests.filter(key.rows() & (pl.col("test") == test)).select(
            "protocol", "fold", "slice", "group", "system",
            pl.col("mean_diff").round(4).alias("vs baseline"), pl.col("p_adjusted").map_elements(
                format_p, return_dtype=pl.String).alias(f"p adjusted ({test})"))
        shown = shown.join(marks.filter(pl.col("fold") == fold).drop("fold"),
                           on=["protocol", "slice", "group", "system"], how="left", maintain_order="left")
    main = display_label(focus)
    note = (f"{main} within groups of test users (fold {fold}; [analysis] slices), each slice under the first "
            "protocol it has: activity:N cuts the users at the N quantiles of their training interactions, cold:N "
            "separates users with fewer than N training interactions, time:N cuts the period of the users' first "
            "test interactions into N equal windows, attribute:COLUMN groups by a user attribute, popularity:S "
            "groups the units of a 1R protocol by their target item's training popularity (head: the S most "
            "popular share of the items, tail: the S least popular). Mean over the group's users with a 95% "
            "t-interval (fold all: mean of the fold means); vs baseline: the paired difference from the baseline "
            "on the same users, p corrected within the group. A system that wins overall can lose in a group. "
            "Every protocol and metric: slices.csv, slice_tests.csv.")
    section = Section("slices", f"Slices of users: {main}", markdown=f"{note}\n\n{_md_table(shown)}",
                      html=f'<p class="note">{html.escape(note)}</p>' + _html_table(shown))
    colors = figures.system_colors(manifest.systems or rows.get_column("system").unique(maintain_order=True).to_list())
    fig = slice_figure(rows, main, colors)
    if fig is not None:
        stem = _slug(f"{focus}-by-slice")
        caption = (f"{main} per group of each slice (fold {fold}; a panel per slice, under the protocol it names), "
                   "one line per system, with 95% intervals; groups in their natural order (least active, "
                   "coldest, earliest or most popular first).")
        section.figures.append(Figure(caption, stem, figures.save(fig, results.file(FIGURES), stem)))
    return section


def slice_figure(rows: pl.DataFrame, label: str, colors: dict):
    """A panel per slice of ``rows`` with two groups or more: the metric (y) by slice group (x, in
    order), one line per system with its interval band. One figure for every slice, as
    :func:`distribution_figure`."""
    names = [n for n in rows.get_column("slice").unique(maintain_order=True).to_list()
             if rows.filter(pl.col("slice") == n).get_column("group").n_unique() >= 2]
    if not names:
        return None
    import matplotlib.pyplot as plt

    with plt.rc_context(figures.STYLE):
        ncols = min(2, len(names))  # two a row: the groups' labels are long
        nrows = -(-len(names) // ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(style.PAGE, 2.6 * nrows + 0.5), squeeze=False)
        for ax in axes.flat[len(names):]:
            ax.set_visible(False)
        for name, ax in zip(names, axes.flat, strict=False):
            part = rows.filter(pl.col("slice") == name).sort("order")
            groups = part.get_column("group").unique(maintain_order=True).to_list()
            for system in part.get_column("system").unique(maintain_order=True).to_list():
                line = part.filter(pl.col("system") == system)
                x = [groups.index(g) for g in line.get_column("group")]
                ax.plot(x, line["mean"], marker="o", ms=4, label=system, color=colors.get(system))
                if line["lower"].is_not_null().all():
                    ax.fill_between(x, line["lower"], line["upper"], alpha=0.15, color=colors.get(system), lw=0)
            ax.set_xticks(range(len(groups)), groups, rotation=20, ha="right")
            ax.set(ylabel=label, title=f"{name} ({part.get_column('protocol')[0]})")
        style.legend_below(fig, axes.flat[0])
    return fig


#: A tuned system is flagged when its trials or seconds are below this share of the best-tuned one's.
BUDGET_SHARE = 0.5


def tuning_flags(budget: pl.DataFrame) -> pl.DataFrame:
    """Per system over the folds: tunable, tuned, trials, trial seconds, the search space, and
    ``flags``: ``under-tuned`` (a budget below :data:`BUDGET_SHARE` of the largest any system got,
    counted in the run's budget unit: trials, or seconds when [tuning] gave only seconds),
    ``untuned beside tuned`` (hyperparameters left at their defaults while other systems were
    tuned) and ``tuning read test data``."""
    per_system = budget.group_by("system", maintain_order=True).agg(
        pl.col("tunable").all(), pl.col("tuned").any(), pl.col("budget").drop_nulls().first(),
        pl.col("trials").sum(), pl.col("trial_seconds").sum().round(1),
        pl.col("search_space").drop_nulls().first(), pl.col("validation_rows_in_test").sum())
    tuned = pl.col("tuned")
    unit = "trial_seconds" if "seconds" in per_system.get_column("budget").to_list() else "trials"
    most = per_system.filter(tuned).get_column(unit).max() or 0
    flags = pl.concat_list(
        pl.when(tuned & (pl.col(unit) < BUDGET_SHARE * most)).then(pl.lit("under-tuned")),
        pl.when(~tuned & pl.col("tunable") & pl.lit(bool(per_system.get_column("tuned").any())))
        .then(pl.lit("untuned beside tuned")),
        pl.when(pl.col("validation_rows_in_test") > 0).then(pl.lit("tuning read test data")),
    ).list.drop_nulls()
    return per_system.with_columns(flags.list.join("; ").alias("flags"))


def tuning_hygiene_section(folder: Path) -> Section | None:
    """The tuning budget of every system side by side, with the systems the comparison
    disadvantages or favours flagged (recsys_eval.tune.budget)."""
    budget = ResultsFolder(folder).table(TUNING_BUDGET)
    if budget is None or budget.is_empty():
        return None
    table = tuning_flags(budget)
    flagged = table.filter(pl.col("flags") != "")
    if flagged.height:
        verdict = (f"**Unequal tuning** for {', '.join(flagged.get_column('system'))}: a system tuned with less "
                   f"than {BUDGET_SHARE:.0%} of the largest budget, or left at its defaults beside tuned ones, is "
                   "compared at a disadvantage (Rendle, Zhang & Koren 2019; Ferrari Dacrema et al., RecSys 2019; "
                   "Shehzad & Jannach, RecSys 2023).")
    else:
        verdict = "Every system got a comparable tuning budget."
    note = ("Per system over every fold: tunable (it has hyperparameters), tuned (it had a search space), the trials and the seconds its trials took "
            "(fit and validation), the space searched; tuning ran on a validation split carved from each fold's "
            "train side, and validation_rows_in_test counts the validation interactions that are also in the "
            "fold's test side (0: tuning saw no test data). Per fold: tuning_budget.csv.")
    shown = table.select("system", "tunable", "tuned", "trials", pl.col("trial_seconds").alias("trial seconds"),
                         pl.col("search_space").fill_null("–").alias("search space"),
                         pl.col("validation_rows_in_test").alias("validation rows in test"), "flags")
    return Section("tuning_hygiene", "Tuning hygiene",
                   markdown=f"{verdict}\n\n{note}\n\n{_md_table(shown)}",
                   html=f"<p>{html.escape(verdict.replace('**', ''))}</p><p class=\"note\">{html.escape(note)}</p>"
                   + _html_table(shown))
