"""``recsys-eval compare`` and ``recsys-eval report``: comparison tables and the report of a
results folder (also run at the end of ``recsys-eval run`` unless ``--no-report``)."""

from __future__ import annotations

from pathlib import Path

import typer

from recsys_eval.cli import app
from recsys_eval.cli.experiment import flag
from recsys_eval.errors import ConfigError


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


@app.command()
def compare(
    results: Path = typer.Argument(..., help="A complete results folder (results/<experiment>/<time>)."),
    baseline: str = typer.Option(None, "--baseline", help="System to test the others against (default: the run's)."),
    tests_option: str = typer.Option(None, "--tests", help="Tests, comma-separated: t, wilcoxon, sign, permutation, mcnemar."),
    correction: str = typer.Option(None, "--correction", help="holm, bonferroni, bh or none."),
    alpha: float = typer.Option(None, "--alpha", help="Significance level (default: the run's)."),
    out: Path = typer.Option(None, "--out", help="Folder for the tables (default: a subfolder named after the options)."),
    metric: str = typer.Option(None, "--metric", help="metric@k whose tests are printed (default: the report's headline metric: the tuned one, else the first nDCG)."),
    force: bool = flag("--force", help="Overwrite an existing output folder."),
) -> None:
    """Paired tests, protocol agreement and sampled-metric correction of a results folder.

    The tables are written as CSV and Parquet; the tests of one metric against the baseline are
    printed, in a table that fits the terminal (every metric and cutoff is in paired_tests.csv).
    """
    from rich.console import Console

    from recsys_eval.compare import CORRECTIONS, TESTS
    from recsys_eval.errors import check_choice
    from recsys_eval.compare.study import analyse, run_tests_table
    from recsys_eval.core.results import COMPARISONS, ResultsFolder
    from recsys_eval.engine.paired import SparkPairedTests

    manifest = ResultsFolder.open(results).manifest
    if manifest.kind == "datasets":
        raise ConfigError(
            f"{results} is a study over datasets ({', '.join(manifest.datasets)}): its comparison is the ranks, "
            "Friedman and post-hoc tables already in it (report.html); `compare` tests the systems of one "
            f"dataset's results folder, beside it in {Path(results).resolve().parent.parent}/<dataset>/")
    tests = _csv(tests_option)
    for name in tests or []:
        check_choice("test", name, TESTS)
    if correction is not None:
        check_choice("correction", correction, CORRECTIONS)
    chosen_baseline = baseline or manifest.baseline
    if out is None:
        parts = [f"baseline-{chosen_baseline or 'all-pairs'}", "-".join(tests or manifest.tests),
                 correction or manifest.correction, f"alpha-{alpha or manifest.alpha}"]
        out = ResultsFolder(results).file(COMPARISONS) / "_".join(parts)
    if out.exists() and any(out.iterdir()) and not force:
        raise ConfigError(f"{out} exists; choose another --out or pass --force to overwrite it")
    out.mkdir(parents=True, exist_ok=True)
    tables = analyse(results, baseline=baseline, tests=tests, correction=correction, alpha=alpha, out=out,
                     paired_runner=SparkPairedTests.of(manifest.engine))  # on Spark when the run was
    console = Console()
    paired = tables.get(run_tests_table(manifest.folds))  # over fold means when cross-validated, as the report
    if paired is not None and paired.height:
        _print_tests(console, paired, manifest, metric or _headline(results, paired), alpha or manifest.alpha)
    console.print(f"tables: {out}", highlight=False)


def _labels(paired: pl.DataFrame) -> list[str]:
    from recsys_eval.measure.metrics import MetricKey

    return [MetricKey(m, k).label for m, k in paired.select("metric", "k").unique(maintain_order=True).iter_rows()]


def _headline(results: Path, paired: pl.DataFrame) -> str:
    """The report's headline metric (recsys_eval.report.choice: the tuned one, else the first nDCG
    column), or the first tested label when the tests leave it out."""
    from recsys_eval.core.results import ResultsFolder
    from recsys_eval.report.choice import report_choice

    headline = report_choice(results, ResultsFolder(results).table("summary")).headline
    labels = _labels(paired)
    return headline if headline in labels else labels[0]


def _print_tests(console: Console, paired: pl.DataFrame, manifest, metric: str, alpha: float) -> None:
    """One metric's tests against the baseline, protocols and systems in config order, p formatted."""
    import polars as pl
    from rich import box
    from rich.table import Table

    from recsys_eval.errors import check_choice
    from recsys_eval.measure.aggregate import ALL_FOLDS
    from recsys_eval.report.build import significance_table

    check_choice("--metric", metric, _labels(paired))
    shown = significance_table(paired, metric, alpha, protocols=manifest.protocols or None,
                               systems=manifest.systems or None)
    fold = shown["fold"][0]
    over = "paired t over the fold means" if fold == ALL_FOLDS else f"fold {fold}"
    table = Table(title=f"Paired tests against the baseline: {shown['metric'][0]} ({over})",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    columns = ("protocol", "system", *(() if fold == ALL_FOLDS else ("test",)), "difference", "vs baseline",
               "p adjusted")  # over fold means the one test is the title's
    for column in columns:
        table.add_column(column, justify="left" if column in ("protocol", "system", "test") else "right",
                         no_wrap=True)
    for row in shown.filter(pl.col("fold") == fold).iter_rows(named=True):
        mark = " *" if row["significant"] == "yes" else ""
        table.add_row(*(str(row[c]) for c in columns[:-1]), row["p adjusted"] + mark)
    console.print(table)
    console.print(f"* significant at {alpha}; baseline {shown['baseline'][0]}"
                  + ("; each fold's per-user tests: paired_tests.csv" if fold == ALL_FOLDS else ""), highlight=False)


@app.command()
def report(
    results: Path = typer.Argument(..., help="A complete results folder."),
    force: bool = flag("--force", help="Rewrite an existing report."),
) -> None:
    """Write report.md, a self-contained report.html, figures/ (PDF, SVG, PNG) and the LaTeX tables
    (tables.tex; tables-twocolumn.tex with table* for two-column papers)."""
    from recsys_eval.compare.study import analyse
    from recsys_eval.core.results import ANALYSIS_TABLES, REPORT_HTML, ResultsFolder
    from recsys_eval.report import write_report

    folder = ResultsFolder.open(results)
    page = folder.file(REPORT_HTML)
    if page.exists() and not force:
        raise ConfigError(f"{page} exists; pass --force to rewrite the report")
    if folder.manifest.kind == "datasets":
        from recsys_eval.report.datasets import write_datasets_report

        typer.echo(f"report: {write_datasets_report(results)}")
        return
    if not any(folder.has_table(name) for name in ANALYSIS_TABLES):  # not analysed yet
        from recsys_eval.engine.paired import SparkPairedTests

        analyse(folder, paired_runner=SparkPairedTests.of(folder.manifest.engine))
    paths = write_report(results)
    typer.echo(f"report: {paths['html']}")
