"""The comparison of a study: everything computed from a complete results folder after the run:
paired tests against the baseline, per-user distributions, slices of users, protocol agreement, the sampled-metric correction, popularity
bins, learning curves and the aggregation audit of cross-validated runs.

Every number set beside another is computed through the same rule as the summary: per-unit values
-> per-user means -> fold means -> the mean of the fold means (recsys_eval.measure.aggregate;
docs/CONVENTIONS.md#averaging). Each table is written into the folder as Parquet and CSV (the names
in ``recsys_eval.core.results.ANALYSIS_TABLES``); the report reads them. Options default to the
run's config as recorded in its manifest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import polars as pl

from recsys_eval.compare.parts import FULL_CANDIDATES, SAMPLED_RANK  # noqa: F401  (where the fold phase finds them)
from recsys_eval.compare.parts import PartValues, read_parts
from recsys_eval.core.results import (
    AUC_POOLING,
    DISTRIBUTION_CURVES,
    EXPOSURE,
    LEARNING_CURVE,
    SUMMARY,
    UNIT_SLICES,
    USER_SLICES,
    ResultsFolder,
)
from recsys_eval.core.rng import derive_seed
from recsys_eval.measure.aggregate import ALL_FOLDS, fold_summary, with_all_folds
from recsys_eval.measure.metrics import RATINGS


def _part_options(options: dict, definitions: dict, users: pl.DataFrame) -> dict:
    """The test options of one part of the per-user values (one fold and protocol), its resamples
    seeded by its fold and protocol definition."""
    return _seeded(options, definitions, users.item(0, "fold"), users.item(0, "protocol"))


def _seeded(options: dict, definitions: dict, fold: str, label: str) -> dict:
    """``options`` with the seed of the (fold, protocol)'s resamples: derived from its fold and
    protocol definition, so that a relabelled protocol keeps its p-values."""
    return {**options, "seed": derive_seed(options["seed"], "paired", fold, definitions.get(label, label))}


def part_paired_tests(users: pl.DataFrame, options: dict, definitions: dict) -> list[pl.DataFrame]:
    """The paired tests of one part of the per-user values (one fold and protocol, any of its
    metrics, every system and cutoff), each group of comparable systems tested on its own
    (:func:`~recsys_eval.compare.paired.partition_tests`), its resamples seeded by the part's fold
    and protocol definition (:func:`_seeded`). A part's tests depend on its users alone, so they are
    the same bits wherever the part is tested (the analysis of this process, which tests each
    (fold, protocol)'s matrix as read, or a Spark task: :mod:`recsys_eval.engine.paired`)."""
    from recsys_eval.compare.frames import partitions
    from recsys_eval.compare.paired import partition_tests

    tested = [partition_tests(part, **_part_options(options, definitions, users)) for part in partitions(users)]
    return [frame for frame in tested if frame.height]


def _fold_means(users: pl.DataFrame) -> pl.DataFrame:
    """A part's fold means as a per-user frame of one row per (system, protocol, fold, metric, k):
    the mean over users with a defined value, which is what :func:`fold_paired_tests` averages."""
    return (users.with_columns(pl.col("value").fill_nan(None))
            .group_by(["system", "protocol", "fold", "metric", "k"], maintain_order=True)
            .agg(pl.col("value").mean().fill_null(float("nan")))
            .with_columns(user=pl.lit(0, dtype=users.schema["user"])).select(users.columns))


def _in_part_order(paired: pl.DataFrame, folds: list[str], protocols: list[str]) -> pl.DataFrame:
    """The tests of every part in one order: fold and protocol as the run lists them, then as
    :func:`~recsys_eval.compare.paired_tests` orders one part's (metric, k, test, pair)."""
    order = [pl.col(name).replace_strict(values, list(range(len(values))), return_dtype=pl.Int32)
             for name, values in (("fold", folds), ("protocol", protocols))]
    return paired.sort([*order, "metric", "k", "test", "system", "baseline"], nulls_last=True, maintain_order=True)


def _comparable_groups(users: pl.DataFrame, baseline: str | None) -> list[pl.DataFrame]:
    """The per-user values split by the set of systems that have each (protocol, metric, k): e.g.
    MAE only for rating predictors. Groups without the baseline, or with one system, are left out."""
    key = ["protocol", "metric", "k"]
    keys, systems, cells = users.select(pl.struct(key).n_unique().alias("keys"), pl.col("system").n_unique(),
                                        pl.struct("system", *key).n_unique().alias("cells")).row(0)
    if keys * systems == cells:  # every (protocol, metric, k) has every system: one group (or none)
        present = baseline is None or users.select((pl.col("system") == baseline).any()).item()
        return [users] if systems >= 2 and present else []
    members = users.group_by(key).agg(pl.col("system").unique().sort().alias("members"))
    members = members.filter(pl.col("members").list.len() >= 2)
    if baseline is not None:
        members = members.filter(pl.col("members").list.contains(baseline))
    tagged = users.join(members.with_columns(pl.col("members").list.join("\x1f")), on=key,
                        how="inner", nulls_equal=True, maintain_order="left")
    return [part.drop("members") for part in tagged.partition_by("members", maintain_order=True)]


def run_rows(summary: pl.DataFrame, folds: list[str]) -> pl.DataFrame:
    """The summary rows that describe the whole run (fold ``all``, or the single fold), per-user
    means only (the rule every side-by-side table uses)."""
    return summary.filter((pl.col("fold") == (ALL_FOLDS if len(folds) > 1 else folds[0]))
                          & (pl.col("rule") == "user mean"))


def run_tests_table(folds: list[str]) -> str:
    """The table of the tests that compare systems over the whole run, as :func:`run_rows` gives
    its values: the paired t over fold means (``fold_paired_tests``) when the run has several
    folds, else the per-user tests of its one fold (``paired_tests``)."""
    return "fold_paired_tests" if len(folds) > 1 else "paired_tests"


def agreement_table(summary: pl.DataFrame, folds: list[str]) -> pl.DataFrame:
    """Kendall's tau between the protocols' system orderings, for every metric and cutoff."""
    from recsys_eval.compare import protocol_agreement

    run = run_rows(summary, folds).filter(pl.col("protocol") != RATINGS)
    if run.get_column("protocol").n_unique() < 2 or run.get_column("system").n_unique() < 2:
        return pl.DataFrame()
    tables = []
    for metric, k in run.select("metric", "k").unique(maintain_order=True).iter_rows():
        part = run.filter((pl.col("metric") == metric) & (pl.col("k").is_null() if k is None else pl.col("k") == k))
        if part.get_column("protocol").n_unique() >= 2 and part.drop_nulls("mean").height:
            tables.append(protocol_agreement(part, metric=metric, k=k))
    return pl.concat(tables, how="diagonal_relaxed") if tables else pl.DataFrame()


@dataclass
class SampledCorrection:
    """The sampled-metric table, gathered (fold, protocol) by (fold, protocol) as the analysis reads
    them: for every 1R+NN protocol, per system and metric@k, the sampled value, its rank-rescaled
    and bias-variance corrected estimates of the full-ranking value (Krichene & Rendle), and the
    full-ranking value where AI+1R+AN ran.

    Each estimate is a per-unit value (a function of the unit's sampled rank) averaged exactly like
    the summary: per user, then per fold, then over folds; so ``sampled`` equals the summary's
    value of the same protocol and metric, and ``full`` is the summary's AI+1R+AN value."""

    folder: ResultsFolder
    summary: pl.DataFrame
    undefined: str
    fold_rows: dict[str, list[pl.DataFrame]] = field(default_factory=dict)

    @cached_property
    def protocols(self) -> list[str]:
        """The 1R+NN protocols of the standard design."""
        return [p for p, info in self.folder.manifest.protocol_definitions.items()
                if info["relevant"] == "1R" and info["nonrelevant"] == "NN" and info["design"] == "standard"]

    @cached_property
    def metrics(self) -> list[tuple[str, int | None]]:
        """The run's (metric, k)s that have a closed form of a one-relevant unit's rank, AUC aside."""
        from recsys_eval.compare.sampled import SAMPLED_METRICS

        run = run_rows(self.summary, self.folder.manifest.folds)
        return [(m, k) for m, k in run.select("metric", "k").unique(maintain_order=True).iter_rows()
                if m in SAMPLED_METRICS and m != "auc"]

    def rows(self, part: PartValues) -> tuple[str, list[pl.DataFrame]] | None:
        """(protocol, fold rows) of a (fold, protocol)'s units if it is a 1R+NN protocol: a function
        of the part alone, so parts may be computed on several threads and :meth:`extend` in order."""
        if part.ranks is None or part.protocol not in self.protocols:
            return None
        manifest = self.folder.manifest
        return part.protocol, _sampled_fold_rows(part.ranks, part.protocol, manifest.protocol_definitions[part.protocol]["n"],
                                                 self.metrics, manifest.items, self.undefined, manifest.metric_params)

    def extend(self, rows: tuple[str, list[pl.DataFrame]] | None) -> None:
        """Gather the :meth:`rows` of a part (in the run's order of parts)."""
        if rows is not None:
            self.fold_rows.setdefault(rows[0], []).extend(rows[1])

    def table(self) -> pl.DataFrame:
        """The table of every protocol added."""
        definitions = self.folder.manifest.protocol_definitions
        # The full-ranking counterpart of a 1R+NN protocol is AI+1R+AN (one relevant item against every
        # unseen item); AI+AR+AN ranks all relevant items together and is a different quantity.
        full_label = "AI+1R+AN" if "AI+1R+AN" in definitions else None
        folds = self.folder.manifest.folds
        run = run_rows(self.summary, folds)
        rows = []
        for label in self.protocols:
            if not self.fold_rows.get(label):
                continue
            estimates = run_rows(with_all_folds(pl.concat(self.fold_rows[label])), folds)
            estimates = estimates.with_columns(
                pl.col("protocol").str.split_exact("\x1f", 1).struct.rename_fields(["protocol", "estimate"])
            ).unnest("protocol")
            for system, metric, k, estimate, value in estimates.select(
                    "system", "metric", "k", "estimate", "mean").iter_rows():
                rows.append({"system": system, "protocol": label, "full_protocol": full_label,
                             "metric": metric, "k": k, "estimate": estimate, "value": value})
            if full_label is not None:
                full = run.filter(pl.col("protocol") == full_label)
                for system, metric, k, value in full.select("system", "metric", "k", "mean").iter_rows():
                    if (metric, k) in self.metrics and system in set(estimates.get_column("system")):
                        rows.append({"system": system, "protocol": label, "full_protocol": full_label,
                                     "metric": metric, "k": k, "estimate": "full", "value": value})
        return pl.DataFrame(rows, schema_overrides={"k": pl.Int32, "value": pl.Float64}) if rows else pl.DataFrame()


def _sampled_fold_rows(ranks: pl.DataFrame, label: str, n: int, metrics: list[tuple], n_items: int, undefined: str,
                       params: dict) -> list[pl.DataFrame]:
    """The fold rows of the summary (:func:`~recsys_eval.measure.aggregate.fold_summary`) of each
    estimate of every metric of one fold's 1R+NN units (``ranks``: their sampled rank in ``value``,
    their full candidate count in ``n_full``), under the protocol ``label + "\x1f" + estimate``,
    one frame per estimate. The units are put in users once for all the estimates and metrics, and
    each distinct candidate count's rank distributions serve every metric."""
    from recsys_eval.compare.sampled import sampled_corrections
    from recsys_eval.measure.aggregate import PartitionState, grouped, user_means

    units, starts = grouped(ranks, ["system", "fold", "user"], then="unit")
    rank = units.get_column("value").to_numpy()
    # each unit's own full candidate count N (the catalogue size where it was not recorded)
    n_full = units.get_column("n_full").fill_null(float(n_items)).to_numpy().astype(np.int64)
    ranked = rank > 0
    users = units[starts].select("system", "fold", "user")
    order = {metric: i for i, metric in enumerate(dict.fromkeys(m for m, _ in metrics))}
    frames = []
    for method in ("sampled", "rescale", "bias_variance"):
        corrected = sampled_corrections(rank[ranked].astype(np.int64), n, n_full[ranked], metrics, method=method,
                                          params=params)
        parts = []
        for (metric, k), estimates in zip(metrics, corrected, strict=True):
            value = np.zeros(len(rank))  # a unit whose relevant item was not ranked scores 0
            value[ranked] = estimates
            mean, sums, counts = user_means(value, starts, undefined)
            parts.append(users.with_columns(
                pl.lit(f"{label}\x1f{method}").alias("protocol"), pl.lit(metric).alias("metric"),
                pl.lit(k, pl.Int32).alias("k"), pl.Series("value", mean, dtype=pl.Float64),
                pl.Series("unit_sum", sums), pl.Series("unit_count", counts, dtype=pl.Int64)))
        summary = PartitionState.of_users(pl.concat(parts).select(
            "system", "protocol", "fold", "user", "metric", "k", "value", "unit_sum", "unit_count"), order).summary(undefined)
        # in the order of one summary per metric, concatenated: metric and k, then system
        frames.append(summary.sort(pl.col("metric").replace_strict(order), "k", nulls_last=False, maintain_order=True))
    return frames


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


def popularity_table(summary: pl.DataFrame, folds: list[str], definitions: dict[str, dict]) -> pl.DataFrame:
    """Metrics per item-popularity bin of every percentile design (bins from the manifest)."""
    run = run_rows(summary, folds)
    binned = {label: info for label, info in definitions.items() if info.get("bin") is not None}
    if not binned:
        return pl.DataFrame()
    design = pl.DataFrame({
        "protocol": list(binned), "design": [info["name"] for info in binned.values()],
        "bin": [info["bin"] for info in binned.values()],
    }, schema={"protocol": pl.String, "design": pl.String, "bin": pl.Int32})
    return run.join(design, on="protocol", how="inner", maintain_order="left").select(
        "system", "design", "bin", "metric", "k", pl.col("mean").alias("value"))


def learning_curve_table(folder: ResultsFolder, undefined: str) -> pl.DataFrame:
    """Every metric at each training fraction, averaged like the summary (per user, then users)."""
    frame = folder.table(LEARNING_CURVE)
    if frame is None:
        return pl.DataFrame()
    tables = [
        fold_summary(part.drop("fraction"), undefined=undefined)
        .filter(pl.col("rule") == "user mean")
        .select("system", "protocol", "metric", "k", pl.col("mean").alias("value"))
        .with_columns(pl.lit(fraction).alias("fraction"))
        for (fraction,), part in frame.partition_by("fraction", as_dict=True, maintain_order=True).items()
    ]
    return pl.concat(tables)


def aggregation_tables(folder: ResultsFolder, summary: pl.DataFrame, f_sums: list[pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """The aggregation audit of a cross-validated run (Forman & Scholz): the F-measure variants over
    folds (from ``f_sums``, each (fold, protocol)'s :func:`~recsys_eval.measure.aggregate.f_count_sums`
    in the run's order), the AUC reported (per user, then folds) beside AUC_avg (each fold's pooled
    scores) and AUC_merge (all folds pooled), and the system pairs each variant orders unlike the
    reported value."""
    from recsys_eval.compare.audit import audit_changes
    from recsys_eval.measure.aggregate import f_measure_variants

    folds = folder.manifest.folds
    if len(folds) < 2:
        return {}
    tables = {}
    if summary.filter(pl.col("metric") == "f1").height and f_sums:
        tables["aggregation_f"] = f_measure_variants(pl.concat(f_sums), over="folds")
    pooling = folder.table(AUC_POOLING)
    if pooling is not None:
        reported = summary.filter((pl.col("fold") == ALL_FOLDS) & (pl.col("metric") == "auc")).select(
            "system", "protocol", pl.col("mean").alias("auc"))
        tables["aggregation_auc"] = reported.join(pooling, on=["system", "protocol"], how="inner").sort(
            "protocol", "system")
    changes = audit_changes(tables.get("aggregation_f"), tables.get("aggregation_auc"), auc_reference="auc")
    if changes.height:
        tables["aggregation_audit"] = changes
    return tables


@dataclass(frozen=True)
class _PartDone:
    """What the analysis keeps of one (fold, protocol) part, gathered in the run's order of parts."""

    paired: list[pl.DataFrame]
    means: list[pl.DataFrame]
    spread: list[pl.DataFrame]  # its per-user distributions' statistics, with distributions
    sorted_values: object | None  # and the compare.distributions.SortedValues of its columns
    sliced: list[pl.DataFrame]
    slice_paired: list[pl.DataFrame]
    f_sums: list[pl.DataFrame]
    sampled: tuple[str, list[pl.DataFrame]] | None


@dataclass(frozen=True)
class _PartWork:
    """The analysis of one (fold, protocol) part as read: its paired tests, fold means, per-user
    distributions, slices, F-measure count sums and sampled-metric rows. Each is a function of the
    part alone (its resamples seeded by its fold and protocol definition, :func:`_seeded`), so two
    parts are analysed at once on two threads (numpy, polars and the numba kernels release the GIL)
    and their tables gathered in the run's order: the same bytes as one part after another."""

    options: dict
    definitions: dict
    baseline: str | None
    slices: pl.DataFrame | None
    distributions: bool
    test_here: bool  # False when a paired_runner tests every part elsewhere
    sampled: SampledCorrection

    def __call__(self, part: PartValues) -> _PartDone:
        from recsys_eval.compare.distributions import SortedValues
        from recsys_eval.compare.paired import partition_tests
        from recsys_eval.compare.slices import slice_tables, slice_test_options
        from recsys_eval.measure.aggregate import f_count_sums

        seeded = _seeded(self.options, self.definitions, part.fold, part.protocol)
        # every test family lies within one (protocol, fold, metric, k): each (fold, protocol) is
        # tested on its own, its resamples seeded by its (fold, protocol definition), so no part's
        # tests depend on another's, a relabelled protocol keeps its p-values, and the metrics of
        # one (fold, protocol), measured on the same users, share their sign flips
        paired = [partition_tests(part.matrix, **seeded)] if self.test_here else []
        means = [_fold_means(part.frame(metric)) for metric in part.metrics]
        # the diagnostics take the matrix as read: no other layout of the users, no frame of them
        # (one sort of each column serves its statistics and curves)
        spread = SortedValues.of_columns(part.matrix, part.defined_columns()) if self.distributions else None
        sliced, slice_paired = [], []
        if self.slices is not None and part.metrics:
            group_means, slice_paired = slice_tables(part.matrix, part.metrics, self.slices.filter(pl.col("fold") == part.fold),
                                                     part.comparable_groups(self.baseline), **slice_test_options(seeded))
            sliced = [group_means]
        f_sums = [f_count_sums(part.f_users)] if part.f_users is not None else []
        return _PartDone(paired, means, [spread.summary()] if spread is not None else [], spread, sliced, slice_paired, f_sums, self.sampled.rows(part))


def analyse(
    folder: str | Path | ResultsFolder,
    *,
    baseline: str | None = None,
    tests: list[str] | None = None,
    correction: str | None = None,
    alpha: float | None = None,
    undefined: str | None = None,
    resamples: int | None = None,
    seed: int | None = None,
    distributions: bool | None = None,
    out: str | Path | None = None,
    paired_runner: Callable[[ResultsFolder, dict, str], pl.DataFrame | None] | None = None,
) -> dict[str, pl.DataFrame]:
    """Compute the comparison tables of a results folder and write them to ``out`` (default: the
    folder itself). Returns the tables by name. ``distributions`` (default: the run's ``[analysis]
    distributions``) adds the per-user distributions and their curves. ``paired_runner(folder,
    options, undefined)``, when given, computes the paired tests of every part elsewhere, as
    :func:`part_paired_tests` does here (a Spark job: :class:`recsys_eval.engine.paired.SparkPairedTests`)."""
    from recsys_eval.compare import fold_paired_tests
    from recsys_eval.compare.distributions import CurveMeans, with_fold_means
    from recsys_eval.compare.slices import (
        popularity_parts,
        slice_fold_means,
        slice_means,
        slice_test_options,
        slice_tests,
    )
    from recsys_eval.core.chunks import map_in_order
    from recsys_eval.errors import check_choice

    folder = folder if isinstance(folder, ResultsFolder) else ResultsFolder.open(folder)
    manifest = folder.manifest
    systems = manifest.systems
    baseline = baseline if baseline is not None else manifest.baseline
    if baseline is not None:
        check_choice("baseline system", baseline, systems)
    options = dict(
        baseline=baseline,
        tests=tests or manifest.tests,
        correction=correction or manifest.correction,
        alpha=alpha if alpha is not None else manifest.alpha,
        n_resamples=resamples or manifest.resamples,
        seed=seed if seed is not None else manifest.seed,
    )
    undefined = undefined or manifest.undefined
    folds = manifest.folds
    summary = folder.table(SUMMARY)
    tables: dict[str, pl.DataFrame] = {}
    paired, means, spread, sliced, slice_paired = [], [], [], [], []
    curves = CurveMeans(folds) if (manifest.distributions if distributions is None else distributions) else None
    slices = folder.table(USER_SLICES)
    definitions = manifest.protocol_definitions  # none in a folder no run wrote (evaluate)
    elsewhere = paired_runner(folder, options, undefined) if paired_runner is not None else None
    sampled, f_sums = SampledCorrection(folder, summary, undefined), []
    work = _PartWork(options, definitions, baseline, slices, curves is not None, paired_runner is None, sampled)
    for done in map_in_order(work, read_parts(folder, undefined)):
        paired += done.paired
        means += done.means
        spread += done.spread
        if done.sorted_values is not None:
            curves.add(done.sorted_values)
        sliced += done.sliced
        slice_paired += done.slice_paired
        f_sums += done.f_sums
        sampled.extend(done.sampled)
    units = folder.table(UNIT_SLICES)
    for users, groups in popularity_parts(folder, units, undefined) if units is not None else ():
        part_options = slice_test_options(_part_options(options, definitions, users))
        sliced.append(slice_means(users, groups))
        slice_paired += [slice_tests(group, groups, **part_options) for group in _comparable_groups(users, baseline)]
    fold_paired = []
    if len(folds) >= 2 and means:
        fold_paired = [
            fold_paired_tests(group, baseline=baseline, correction=options["correction"], alpha=options["alpha"],
                              n_resamples=options["n_resamples"], seed=derive_seed(options["seed"], "fold paired"))
            for group in _comparable_groups(pl.concat(means), baseline)
        ]
    if elsewhere is not None and elsewhere.height:
        paired = [elsewhere]
    paired = [tested for tested in paired if tested.height]
    if paired:
        tables["paired_tests"] = _in_part_order(pl.concat(paired), folds, manifest.protocols)
    if fold_paired:
        tables["fold_paired_tests"] = pl.concat(fold_paired)
    if spread:
        tables["distributions"] = with_fold_means(pl.concat(spread))
        tables[DISTRIBUTION_CURVES] = curves.table()
    if sliced:
        tables["slices"] = slice_fold_means(pl.concat(sliced))
        tested = [t for t in slice_paired if t.height]
        tables["slice_tests"] = pl.concat(tested) if tested else pl.DataFrame()
    tables["agreement"] = agreement_table(summary, folds)
    tables["sampled_correction"] = sampled.table()
    tables["sampled_ordering"] = sampled_ordering(tables["sampled_correction"])
    tables["popularity_bins"] = popularity_table(summary, folds, manifest.protocol_definitions)
    exposure = folder.table(EXPOSURE)
    if exposure is not None:
        tables["exposure"] = (exposure.group_by("system", "protocol", "bin", maintain_order=True)
                              .agg(pl.col("share").mean()))
    tables["learning_curve"] = learning_curve_table(folder, undefined)
    tables.update(aggregation_tables(folder, summary, f_sums))
    target = ResultsFolder(Path(out)) if out is not None else folder
    for name, table in tables.items():
        if not table.is_empty():
            target.write_table(name, table, csv=name != DISTRIBUTION_CURVES)
    return tables
