"""What a report shows of a results folder: the columns of its tables and its headline metric, one
choice read by every output (report.md/html, tables.tex, the terminal tables, the first screen).

The columns are the config's ``[report] metrics`` when given, else every metric the config asked
for at one cutoff (:func:`recsys_eval.report.tables.default_columns`: the tuning's cutoff, else the
smallest-but-one). The headline is the tuning metric of a run that tuned (what its systems were
chosen for), else the first nDCG column, else the first column.
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
    (None for a run that did not tune) and whether the LaTeX tables carry intervals."""

    columns: list[str]
    headline: str
    tuned: str | None
    intervals: bool


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
    return Choice(columns, main_label(columns, tuned), tuned, bool(options.get("intervals", False)))
