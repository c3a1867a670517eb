"""Everything computed from a complete results folder after the run: paired tests against the
baseline, protocol agreement, the sampled-metric correction, popularity bins, learning curves and
the aggregation audit of cross-validated runs.

Each table is written into the folder as Parquet and CSV (``paired_tests``, ``agreement``,
``sampled_correction``, ``popularity_bins``, ``exposure``, ``learning_curve``, ``aggregation_f``,
``aggregation_auc``, ``aggregation_audit``); the report reads them. Options default to the run's config as recorded in its manifest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from recsys_eval.errors import DataError
from recsys_eval.experiment.folder import (
    FORMAT_VERSION,
    MANIFEST,
    write_csv_atomic,
    write_parquet_atomic,
)
from recsys_eval.measure.metrics import AUXILIARY_METRICS as AUXILIARY

REQUIRED = ("manifest.json", "config.toml", "per_unit.parquet", "summary.parquet")


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of a complete results folder; a clear error naming what is missing."""
    if not folder.is_dir():
        raise DataError(f"{folder}: no such results folder")
    missing = [name for name in REQUIRED if not (folder / name).is_file()]
    if missing:
        raise DataError(
            f"{folder}: not a complete results folder (missing {', '.join(missing)}); an interrupted "
            "run can be finished with `recsys-eval run CONFIG --resume`"
        )
    manifest = json.loads((folder / MANIFEST).read_text())
    if manifest.get("format") != FORMAT_VERSION:
        raise DataError(
            f"{folder}: results format {manifest.get('format')!r}, this version reads format "
            f"{FORMAT_VERSION}; rerun the experiment with this version"
        )
    return manifest


def per_user_values(folder: Path, folds: list[str], undefined: str) -> pl.DataFrame:
    """Per-user values of every (system, protocol, fold, metric, k), read one fold at a time."""
    from recsys_eval.compare import per_user

    scan = pl.scan_parquet(folder / "per_unit.parquet")
    frames = []
    for fold in folds:
        part = scan.filter(
            (pl.col("fold") == fold) & pl.col("user").is_not_null() & ~pl.col("metric").is_in(AUXILIARY)
        ).collect()
        frames.append(per_user(part, undefined=undefined))
    return pl.concat(frames)


def _comparable_groups(users: pl.DataFrame, baseline: str | None) -> list[pl.DataFrame]:
    """The per-user values split by the set of systems that have each (protocol, metric, k): e.g.
    MAE only for rating predictors. Groups without the baseline, or with one system, are left out."""
    key = ["protocol", "metric", "k"]
    members = users.group_by(key).agg(pl.col("system").unique().sort().alias("members"))
    members = members.filter(pl.col("members").list.len() >= 2)
    if baseline is not None:
        members = members.filter(pl.col("members").list.contains(baseline))
    tagged = users.join(members.with_columns(pl.col("members").list.join("\x1f")), on=key,
                        how="inner", nulls_equal=True)
    return [part.drop("members") for part in tagged.partition_by("members", maintain_order=True)]


def _summary_of_run(summary: pl.DataFrame, folds: list[str]) -> pl.DataFrame:
    """The summary rows that describe the whole run (fold ``all``, or the single fold), metrics only."""
    return summary.filter((pl.col("fold") == ("all" if len(folds) > 1 else folds[0]))
                          & ~pl.col("metric").is_in(AUXILIARY))


def agreement_table(summary: pl.DataFrame, folds: list[str]) -> pl.DataFrame:
    """Kendall's tau between the protocols' system orderings, for every metric and cutoff."""
    from recsys_eval.compare import protocol_agreement

    run = _summary_of_run(summary, folds).filter(pl.col("protocol") != "ratings")
    if run.get_column("protocol").n_unique() < 2 or run.get_column("system").n_unique() < 2:
        return pl.DataFrame()
    tables = []
    for metric, k in run.select("metric", "k").unique(maintain_order=True).iter_rows():
        part = run.filter((pl.col("metric") == metric) & (pl.col("k").is_null() if k is None else pl.col("k") == k))
        if part.get_column("protocol").n_unique() >= 2 and part.drop_nulls("mean").height:
            tables.append(protocol_agreement(part, metric=metric, k=k))
    return pl.concat(tables, how="diagonal_relaxed") if tables else pl.DataFrame()


def sampled_table(folder: Path, manifest: dict, summary: pl.DataFrame) -> pl.DataFrame:
    """For every 1R+NN protocol: per system and metric@k, the sampled value, its rank-rescaled and
    bias-variance corrected estimates of the full-ranking value (Krichene & Rendle), and the
    full-ranking value where AI+1R+AN ran."""
    from recsys_eval.compare import sampled_correction
    from recsys_eval.compare.sampled import SAMPLED_METRICS

    protocols = manifest["protocols"]
    sampled = [p for p, info in protocols.items()
               if info["relevant"] == "1R" and info["nonrelevant"] == "NN" and info["design"] == "standard"]
    if not sampled:
        return pl.DataFrame()
    # The full-ranking counterpart of a 1R+NN protocol is AI+1R+AN (one relevant item against every
    # unseen item); AI+AR+AN ranks all relevant items together and is a different quantity.
    full_label = "AI+1R+AN" if "AI+1R+AN" in protocols else None
    folds = manifest["folds"]
    run = _summary_of_run(summary, folds)
    metrics = [(m, k) for m, k in run.select("metric", "k").unique(maintain_order=True).iter_rows()
               if m in SAMPLED_METRICS and m != "auc"]
    n_items = manifest["items"]
    scan = pl.scan_parquet(folder / "per_unit.parquet")
    rows = []
    for label in sampled:
        n = protocols[label]["n"]
        ranks = (
            scan.filter((pl.col("protocol") == label) & (pl.col("metric") == "rr") & pl.col("k").is_null())
            .select("system", "fold", "value").collect()
        )
        for system in ranks.get_column("system").unique(maintain_order=True).to_list():
            values = ranks.filter(pl.col("system") == system).get_column("value").to_numpy()
            sampled_rank = (1.0 / values[values > 0]).round().astype(np.int64)
            for metric, k in metrics:
                estimates = {}
                for method in ("sampled", "rescale", "bias_variance"):
                    per_unit = sampled_correction(sampled_rank, n, n_items, metric, k, method=method)
                    # units whose relevant item was left out of the ranking score 0 everywhere
                    estimates[method] = float(per_unit.sum() / len(values))
                full = None
                if full_label is not None:
                    cond = (pl.col("system") == system) & (pl.col("protocol") == full_label) & (pl.col("metric") == metric)
                    cond &= pl.col("k").is_null() if k is None else pl.col("k") == k
                    hit = run.filter(cond)
                    full = hit["mean"][0] if hit.height else None
                for estimate, value in (*estimates.items(), ("full", full)):
                    rows.append({"system": system, "protocol": label, "full_protocol": full_label,
                                 "metric": metric, "k": k, "estimate": estimate, "value": value})
    return pl.DataFrame(rows, schema_overrides={"k": pl.Int32, "value": pl.Float64})


def sampled_ordering(table: pl.DataFrame) -> pl.DataFrame:
    """Share of system pairs the sampled and the corrected values order like the full ranking."""
    from recsys_eval.compare import ordering_agreement

    if table.is_empty() or table.filter(pl.col("estimate") == "full")["value"].null_count() == table.filter(pl.col("estimate") == "full").height:
        return pl.DataFrame()
    rows = []
    for (protocol, metric, k), part in table.group_by("protocol", "metric", "k", maintain_order=True):
        values = {e: dict(part.filter(pl.col("estimate") == e).select("system", "value").iter_rows())
                  for e in ("sampled", "bias_variance", "full")}
        if None in values["full"].values() or len(values["full"]) < 2:
            continue
        shares = ordering_agreement(values["full"], values["sampled"], values["bias_variance"])
        rows.append({"protocol": protocol, "metric": metric, "k": k,
                     "sampled_orders_like_full": shares["sampled"],
                     "corrected_orders_like_full": shares["corrected"]})
    return pl.DataFrame(rows, schema_overrides={"k": pl.Int32})


def popularity_table(summary: pl.DataFrame, folds: list[str]) -> pl.DataFrame:
    """Metrics per item-popularity bin, from the percentile design's labels ``...+pct<m>/bin<b>``."""
    run = _summary_of_run(summary, folds)
    binned = run.filter(pl.col("protocol").str.contains(r"\+pct\d+/bin\d+$"))
    if binned.is_empty():
        return pl.DataFrame()
    return binned.with_columns(
        pl.col("protocol").str.extract(r"^(.*)\+pct\d+/bin\d+$").alias("design"),
        pl.col("protocol").str.extract(r"/bin(\d+)$").cast(pl.Int32).alias("bin"),
    ).select("system", "design", "bin", "metric", "k", pl.col("mean").alias("value"))


def learning_curve_table(folder: Path, undefined: str) -> pl.DataFrame:
    """Mean over users of every metric at each training fraction."""
    from recsys_eval.compare import per_user

    path = folder / "per_unit_learning_curve.parquet"
    if not path.is_file():
        return pl.DataFrame()
    frame = pl.read_parquet(path).filter(pl.col("user").is_not_null() & ~pl.col("metric").is_in(AUXILIARY))
    tables = []
    for fraction in frame.get_column("fraction").unique(maintain_order=True).to_list():
        part = frame.filter(pl.col("fraction") == fraction).drop("fraction")
        tables.append(per_user(part, undefined=undefined).group_by("system", "protocol", "metric", "k")
                      .agg(pl.col("value").mean()).with_columns(pl.lit(fraction).alias("fraction")))
    return pl.concat(tables)


def aggregation_tables(folder: Path, manifest: dict, summary: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The aggregation audit of a cross-validated run (Forman & Scholz): the F-measure variants over
    folds (from the ``f1`` rows), the AUC reported (per user, then folds) beside AUC_avg (each
    fold's pooled scores) and AUC_merge (all folds pooled), and the system pairs each variant
    orders unlike the reported value."""
    from recsys_eval.compare.audit import audit_changes
    from recsys_eval.measure import f_counts, f_measure_variants

    folds = manifest["folds"]
    if len(folds) < 2:
        return {}
    tables = {}
    scan = pl.scan_parquet(folder / "per_unit.parquet")
    if summary.filter(pl.col("metric") == "f1").height:
        sums = [
            f_counts(scan.filter((pl.col("fold") == fold) & pl.col("metric").is_in(["f1", *AUXILIARY])).collect())
            .group_by("system", "protocol", "fold", "k").agg(pl.col("tp", "fp", "fn").sum())
            for fold in folds
        ]
        tables["aggregation_f"] = f_measure_variants(pl.concat(sums), over="folds")
    if (folder / "auc_pooling.parquet").is_file():
        reported = summary.filter((pl.col("fold") == "all") & (pl.col("metric") == "auc")).select(
            "system", "protocol", pl.col("mean").alias("auc"))
        tables["aggregation_auc"] = reported.join(
            pl.read_parquet(folder / "auc_pooling.parquet"), on=["system", "protocol"], how="inner"
        ).sort("protocol", "system")
    changes = audit_changes(tables.get("aggregation_f"), tables.get("aggregation_auc"), auc_reference="auc")
    if changes.height:
        tables["aggregation_audit"] = changes
    return tables


def analyse(
    folder: str | Path,
    *,
    baseline: str | None = None,
    tests: list[str] | None = None,
    correction: str | None = None,
    alpha: float | None = None,
    undefined: str | None = None,
    resamples: int | None = None,
    seed: int | None = None,
    out: str | Path | None = None,
) -> dict[str, pl.DataFrame]:
    """Compute the comparison tables of a results folder and write them to ``out`` (default: the
    folder itself). Returns the tables by name."""
    from recsys_eval.compare import fold_paired_tests, paired_tests
    from recsys_eval.errors import check_choice

    folder = Path(folder)
    manifest = read_manifest(folder)
    systems = manifest["systems"]
    baseline = baseline if baseline is not None else manifest.get("baseline")
    if baseline is not None:
        check_choice("baseline system", baseline, systems)
    options = dict(
        baseline=baseline,
        tests=tests or manifest.get("tests", ["t", "wilcoxon"]),
        correction=correction or manifest.get("correction", "holm"),
        alpha=alpha if alpha is not None else manifest.get("alpha", 0.05),
        n_resamples=resamples or manifest.get("resamples", 1000),
        seed=seed if seed is not None else manifest.get("seed", 0),
    )
    undefined = undefined or manifest.get("undefined", "skip")
    folds = manifest["folds"]
    summary = pl.read_parquet(folder / "summary.parquet")
    users = per_user_values(folder, folds, undefined)
    tables: dict[str, pl.DataFrame] = {}
    paired, fold_paired = [], []
    for group in _comparable_groups(users, baseline):
        paired.append(paired_tests(group, **options))
        if len(folds) >= 2:
            fold_paired.append(fold_paired_tests(
                group, baseline=baseline, correction=options["correction"], alpha=options["alpha"]))
    if paired:
        tables["paired_tests"] = pl.concat(paired)
    if fold_paired:
        tables["fold_paired_tests"] = pl.concat(fold_paired)
    tables["agreement"] = agreement_table(summary, folds)
    tables["sampled_correction"] = sampled_table(folder, manifest, summary)
    tables["sampled_ordering"] = sampled_ordering(tables["sampled_correction"])
    tables["popularity_bins"] = popularity_table(summary, folds)
    if (folder / "exposure_bins.parquet").is_file():
        tables["exposure"] = (pl.read_parquet(folder / "exposure_bins.parquet")
                              .group_by("system", "protocol", "bin", maintain_order=True)
                              .agg(pl.col("share").mean()))
    tables["learning_curve"] = learning_curve_table(folder, undefined)
    tables.update(aggregation_tables(folder, manifest, summary))
    target = Path(out) if out is not None else folder
    for name, table in tables.items():
        if table.is_empty():
            continue
        write_parquet_atomic(table, target / f"{name}.parquet")
        flat = table.with_columns(pl.col(pl.List(pl.String)).list.join("; ")) if any(
            dtype == pl.List(pl.String) for dtype in table.dtypes) else table
        write_csv_atomic(flat, target / f"{name}.csv")
    return tables
