"""A study over several datasets (``[[datasets]]``): the experiment run on each dataset into its own
results folder under ``<output.folder>/<study>/<dataset>/``, then the systems compared across the
datasets by rank, as Demšar (2006) recommends: each dataset ranks the systems by one metric@k under
one protocol (the mean over users of the ``all`` rows, or of the one fold), the ranks are averaged
over datasets, and the Friedman test with a Nemenyi (all pairs) or Holm (against the baseline)
post-hoc says which differences the datasets support (recsys_eval.compare.datasets).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
from rich.console import Console

from recsys_eval.core.results import CROSS_DATASET, Manifest, ResultsFolder
from recsys_eval.pipeline.config import ExperimentConfig, identity_hash
from recsys_eval.measure.aggregate import ALL_FOLDS, RULE_USER_MEAN
from recsys_eval.measure.metrics import MetricKey
from recsys_eval.pipeline.search import study_metric


def dataset_table(config: ExperimentConfig, summaries: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """One row per (dataset, system): the study metric's mean under the study protocol, from each
    dataset's summary (its ``all`` rows over folds, or its single fold's rows)."""
    metric = study_metric(config)
    key = MetricKey.parse(metric)
    labels = [p.display for p in config.protocols if p.design != "percentiles"]
    protocol = config.compare.datasets_protocol or labels[0]
    frames = []
    for dataset, summary in summaries.items():
        rows = summary.filter(
            (pl.col("protocol") == protocol) & key.rows() & (pl.col("rule") == RULE_USER_MEAN)
        )
        folds = rows.get_column("fold").unique().to_list()
        rows = rows.filter(pl.col("fold") == (ALL_FOLDS if ALL_FOLDS in folds else folds[0]))
        frames.append(rows.select(pl.lit(dataset).alias("dataset"), "system", pl.lit(metric).alias("metric"),
                                  "protocol", "mean"))
    return pl.concat(frames)


def cross_dataset(config: ExperimentConfig, table: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The systems' mean ranks over datasets, the Friedman test, and the configured post-hoc."""
    from recsys_eval.compare.datasets import friedman_test, holm_posthoc, nemenyi_test, rank_systems

    name = MetricKey.parse(study_metric(config)).name
    c = config.compare
    posthoc = (nemenyi_test(table, alpha=c.alpha, metric=name) if c.posthoc == "nemenyi"
               else holm_posthoc(table, c.baseline, alpha=c.alpha, metric=name))
    return {"values": table, "ranks": rank_systems(table, metric=name),
            "friedman": friedman_test(table, metric=name), c.posthoc: posthoc}


def markdown(config: ExperimentConfig, tables: dict[str, pl.DataFrame]) -> str:
    """The cross-dataset summary as Markdown: values per dataset, mean ranks, Friedman, post-hoc."""
    from recsys_eval.report.build import _md_table as markdown_table

    metric = study_metric(config)
    from recsys_eval.report.datasets import study_warnings

    parts = [f"# {config.name}: systems over {tables['values'].get_column('dataset').n_unique()} datasets",
             *(f"**Warning:** {w}" for w in study_warnings(tables["friedman"])),
             f"Metric {metric}, protocol {tables['values'].get_column('protocol')[0]}; rank 1 is best "
             "(Demšar 2006).", "## Values", markdown_table(
                 tables["values"].pivot(on="dataset", index="system", values="mean"))]
    for key in ("ranks", "friedman", config.compare.posthoc):
        parts += [f"## {key.capitalize()}", markdown_table(tables[key])]
    return "\n\n".join(parts) + "\n"


def run_study(config: ExperimentConfig, config_text: str, overrides: Sequence[str] = (), *, out_root: str | Path | None = None,
              resume: bool = False, quiet: bool = False, console: Console | None = None):
    """Run the experiment on every dataset, then write the cross-dataset tables into
    ``<root>/<study>/cross_dataset/<UTC time>/`` (a work folder renamed when complete, never over an
    earlier study's)."""
    from recsys_eval.experiment.runner import RunOutcome, run_experiment

    root = Path(out_root or config.output.folder) / config.name
    summaries, folders = {}, {}
    for dataset in config.datasets:
        one = config.model_copy(update={"name": dataset.display, "dataset": dataset, "datasets": None})
        outcome = run_experiment(one, config_text, overrides, out_root=root,
                                 resume=resume, quiet=quiet, console=console)
        summaries[dataset.display], folders[dataset.display] = outcome.summary, outcome.folder
    tables = cross_dataset(config, dataset_table(config, summaries))
    folder = ResultsFolder.create(root, CROSS_DATASET, identity_hash(config), resume=False)
    for key, frame in tables.items():
        folder.write_table(key, frame)
    folder.write_text(f"{CROSS_DATASET}.md", markdown(config, tables))
    ranked_by = {"metric": study_metric(config), "protocol": tables["values"].get_column("protocol")[0]}
    manifest = Manifest(experiment=config.name, kind="datasets", created=_now(), datasets=list(summaries),
                        systems=[r.display for r in config.recommenders], ranked_by=ranked_by,
                        baseline=config.compare.baseline, alpha=config.compare.alpha)
    folder.write_manifest(manifest)
    if config.output.report:
        from recsys_eval.report.datasets import write_datasets_report

        write_datasets_report(folder.path)
    final = folder.finish(manifest)
    summary = pl.concat([s.with_columns(pl.lit(d).alias("dataset")) for d, s in summaries.items()],
                        how="diagonal_relaxed")
    return RunOutcome(final, summary, folders)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
