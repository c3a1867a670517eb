"""What a report shows of a results folder: the columns of its tables and its headline metric, one
choice read by every output (report.md/html, tables.tex, the terminal tables, the first screen).

The columns are the config's ``[report] metrics`` when given, else every metric the config asked
for at one cutoff (:func:`recsys_eval.report.tables.default_columns`: the tuning's cutoff, else the
smallest-but-one). The headline is the tuning metric of a run that tuned (what its systems were
chosen for), else the first nDCG column, else the first column; ``recsys-eval compare`` prints its
tests by the same headline. The headline's metric is also shown at every cutoff the run measured
(``by_cutoff``), so that every cutoff asked for is in the report.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from recsys_eval.core.results import CONFIG, TUNING, ResultsFolder
from recsys_eval.measure.metrics import MetricKey
from recsys_eval.report.tables import default_columns, main_label

#: The tuning metric when the config's ``[tuning]`` names none (recsys_eval.pipeline.config.TuningConfig).
DEFAULT_TUNING_METRIC = "ndcg@10"


@dataclass(frozen=True)
class Choice:
    """The tables' ``columns`` (``metric@k`` labels), the ``headline`` label, the ``tuned`` label
    (None for a run that did not tune), whether the LaTeX tables carry intervals, and
    ``by_cutoff``: the headline's metric at every cutoff measured (empty under two cutoffs)."""

    columns: list[str]
    headline: str
    tuned: str | None
    intervals: bool
    by_cutoff: list[str]


def config_table(folder: Path, key: str) -> dict:
    """A table of the config as run (``[report]``, ``[tuning]``), empty when absent."""
    return tomllib.loads(ResultsFolder(folder).text(CONFIG)).get(key, {})


def report_choice(folder: str | Path, summary: pl.DataFrame) -> Choice:
    """The choice for the results folder ``folder`` whose summary is ``summary``."""
    folder = Path(folder)
    results = ResultsFolder(folder)
    options = config_table(folder, "report")
    tuned = None
    if results.file(TUNING).is_file():
        tuned = MetricKey.parse(config_table(folder, "tuning").get("metric", DEFAULT_TUNING_METRIC)).label
        measured = {MetricKey(m, k).label for m, k in summary.select("metric", "k").unique().iter_rows()}
        tuned = tuned if tuned in measured else None
    columns = options.get("metrics") or default_columns(summary, metrics=results.manifest.metrics or None,
                                                        tuned=tuned)
    headline = main_label(columns, tuned)
    return Choice(columns, headline, tuned, bool(options.get("intervals", False)),
                  every_cutoff(summary, headline, columns))


def every_cutoff(summary: pl.DataFrame, headline: str, columns: list[str]) -> list[str]:
    """The labels of one metric at every cutoff the summary has (``ndcg@1`` ... ``ndcg@50``): the
    headline's metric, or the first column's with a cutoff when the headline has none (``auc``);
    empty when that metric was measured at fewer than two cutoffs."""
    names = [MetricKey.parse(label).name for label in [headline, *columns] if MetricKey.parse(label).k is not None]
    if not names:
        return []
    ks = sorted(summary.filter(pl.col("metric") == names[0]).get_column("k").drop_nulls().unique().to_list())
    return [MetricKey(names[0], k).label for k in ks] if len(ks) > 1 else []
