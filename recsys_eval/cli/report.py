"""``recsys-eval compare`` and ``recsys-eval report``: comparison tables and the report of a
results folder (also run at the end of ``recsys-eval run`` unless ``--no-report``)."""

from __future__ import annotations

from pathlib import Path

import typer

from recsys_eval.cli import app
from recsys_eval.errors import ConfigError


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


@app.command()
def compare(
    results: Path = typer.Argument(..., help="A complete results folder (results/<experiment>/<time>)."),
    baseline: str = typer.Option(None, "--baseline", help="System to test the others against (default: the run's)."),
    test: str = typer.Option(None, "--test", help="Tests, comma-separated: t, wilcoxon, sign, permutation, mcnemar."),
    correction: str = typer.Option(None, "--correction", help="holm, bonferroni, bh or none."),
    alpha: float = typer.Option(None, "--alpha", help="Significance level (default: the run's)."),
    out: Path = typer.Option(None, "--out", help="Folder for the tables (default: a subfolder named after the options)."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing output folder."),
) -> None:
    """Paired tests, protocol agreement and sampled-metric correction of a results folder.

    The tables are written as CSV and Parquet; the tests against the baseline are printed.
    """
    import polars as pl
    from rich.console import Console
    from rich.table import Table

    from recsys_eval.compare import CORRECTIONS, TESTS
    from recsys_eval.errors import check_choice
    from recsys_eval.compare.study import analyse
    from recsys_eval.core.results import ResultsFolder

    manifest = ResultsFolder.open(results).manifest
    tests = _csv(test)
    for name in tests or []:
        check_choice("test", name, TESTS)
    if correction is not None:
        check_choice("correction", correction, CORRECTIONS)
    chosen_baseline = baseline or manifest.get("baseline")
    if out is None:
        parts = [f"baseline-{chosen_baseline or 'all-pairs'}", "-".join(tests or manifest.get("tests", [])),
                 correction or manifest.get("correction", "holm"), f"alpha-{alpha or manifest.get('alpha', 0.05)}"]
        out = results / "comparisons" / "_".join(parts)
    if out.exists() and any(out.iterdir()) and not force:
        raise ConfigError(f"{out} exists; choose another --out or pass --force to overwrite it")
    out.mkdir(parents=True, exist_ok=True)
    tables = analyse(results, baseline=baseline, tests=tests, correction=correction, alpha=alpha, out=out)
    console = Console()
    paired = tables.get("paired_tests")
    if paired is not None and paired.height:
        shown = paired.filter(pl.col("k").is_null() | (pl.col("k") == pl.col("k").max()))
        table = Table(title="Paired tests against the baseline (largest cutoff)", title_justify="left")
        for column in ("protocol", "fold", "metric", "k", "system", "baseline", "test", "mean_diff", "p_adjusted"):
            table.add_column(column, justify="right" if column in ("k", "mean_diff", "p_adjusted") else "left")
        for row in shown.iter_rows(named=True):
            mark = " *" if row["significant"] else ""
            table.add_row(row["protocol"], row["fold"], row["metric"], str(row["k"] or ""), row["system"],
                          row["baseline"], row["test"], f"{row['mean_diff']:+.4f}", f"{row['p_adjusted']:.3g}{mark}")
        console.print(table)
    console.print(f"tables: {out}", highlight=False)


@app.command()
def report(
    results: Path = typer.Argument(..., help="A complete results folder."),
    force: bool = typer.Option(False, "--force", help="Rewrite an existing report."),
) -> None:
    """Write report.md, a self-contained report.html with figures, and tables.tex."""
    from recsys_eval.compare.study import analyse
    from recsys_eval.core.results import ResultsFolder
    from recsys_eval.report import write_report

    ResultsFolder.open(results)
    if (results / "report.html").exists() and not force:
        raise ConfigError(f"{results / 'report.html'} exists; pass --force to rewrite the report")
    if not (results / "paired_tests.parquet").exists():
        analyse(results)
    paths = write_report(results)
    typer.echo(f"report: {paths['html']}")
