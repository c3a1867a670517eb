"""Aggregation audit: how a summary depends on the order of averaging (DESIGN.md section 6).

Forman & Scholz ("Apples-to-Apples in Cross-Validation Studies") show that F-measure aggregated
across folds (or users) differs by method, and that only F_tp,fp is unbiased; AUC averaged over
folds differs from AUC of the pooled scores, which needs calibrated scores. This module computes
the variants side by side and lists the system pairs whose order a variant changes.

F-measure inputs, one row per aggregated item (a unit, or a fold after summing its units): TP =
hits@k, FP = listed non-relevant items (k - hits@k when precision divides by k), FN = relevant items
missed (R - hits@k). Precision is undefined when TP + FP = 0, recall when TP + FN = 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from recsys_eval.compare.agreement import swapped_pairs
from recsys_eval.errors import DataError, check_choice

F_VARIANTS = ("F_tp_fp", "F_avg", "F_avg_skip", "F_pr_re", "F_pr_re_skip")
AUC_VARIANTS = ("auc_avg", "auc_merge")
AGGREGATION_LEVELS = ("folds", "units")


def _harmonic(p: pl.Expr, r: pl.Expr) -> pl.Expr:
    return pl.when(p + r > 0).then(2 * p * r / (p + r)).otherwise(0.0)


def f_measure_variants(counts: pl.DataFrame, *, over: str = "folds") -> pl.DataFrame:
    """The five F-measure aggregates of Forman & Scholz, one row per system x protocol x k
    (``over="folds"``: folds are the items, after summing TP, FP, FN within each fold) or per
    system x protocol x fold x k (``over="units"``: the fold's units are the items).

    With P_i, R_i, F_i = 2 TP_i / (2 TP_i + FP_i + FN_i) per item and V_i = both P_i and R_i defined:
    F_tp_fp = F of the summed counts; F_avg = mean F_i (F_i = 0 where not V_i); F_avg_skip = mean F_i
    over V_i; F_pr_re = F(mean P, mean R) with undefined P, R as 0; F_pr_re_skip = F(mean P, mean R)
    over V_i. Also n_items and n_undefined (items without V_i).
    """
    check_choice("aggregation level", over, AGGREGATION_LEVELS)
    needed = ["system", "protocol", "fold", "k", "tp", "fp", "fn"]
    missing = [c for c in needed if c not in counts.columns]
    if missing:
        raise DataError(f"F-measure counts: missing columns {missing}; expected {needed} (one row per unit)")
    items = counts.select(needed).with_columns(pl.col("tp", "fp", "fn").cast(pl.Float64))
    if (items.select((pl.col("tp", "fp", "fn") < 0).any()).row(0)).count(True):
        raise DataError("F-measure counts: tp, fp and fn must be non-negative")
    group = ["system", "protocol", "k"]
    if over == "folds":
        items = items.group_by([*group, "fold"]).agg(pl.col("tp", "fp", "fn").sum())
    else:
        group = ["system", "protocol", "fold", "k"]
    tp, fp, fn = pl.col("tp"), pl.col("fp"), pl.col("fn")
    items = items.with_columns(
        precision=pl.when(tp + fp > 0).then(tp / (tp + fp)),
        recall=pl.when(tp + fn > 0).then(tp / (tp + fn)),
        f=pl.when(2 * tp + fp + fn > 0).then(2 * tp / (2 * tp + fp + fn)).otherwise(0.0),
    ).with_columns(valid=pl.col("precision").is_not_null() & pl.col("recall").is_not_null())
    valid = pl.col("valid")
    return (
        items.group_by(group)
        .agg(
            sum_tp=tp.sum(), sum_fp=fp.sum(), sum_fn=fn.sum(),
            F_avg=pl.col("f").mean(),
            F_avg_skip=pl.col("f").filter(valid).mean(),
            mean_p=pl.col("precision").fill_null(0.0).mean(),
            mean_r=pl.col("recall").fill_null(0.0).mean(),
            mean_p_skip=pl.col("precision").filter(valid).mean(),
            mean_r_skip=pl.col("recall").filter(valid).mean(),
            n_items=pl.len().cast(pl.Int64),
            n_undefined=(~valid).sum().cast(pl.Int64),
        )
        .with_columns(
            F_tp_fp=pl.when(2 * pl.col("sum_tp") + pl.col("sum_fp") + pl.col("sum_fn") > 0)
            .then(2 * pl.col("sum_tp") / (2 * pl.col("sum_tp") + pl.col("sum_fp") + pl.col("sum_fn")))
            .otherwise(0.0),
            F_pr_re=_harmonic(pl.col("mean_p"), pl.col("mean_r")),
            F_pr_re_skip=_harmonic(pl.col("mean_p_skip"), pl.col("mean_r_skip")),
        )
        .select(*group, *F_VARIANTS, "n_items", "n_undefined")
        .sort([c for c in group if c != "system"] + ["system"], nulls_last=True)
    )


def auc_aggregation(scores: pl.DataFrame) -> pl.DataFrame:
    """AUC averaged over folds (AUC_avg) beside AUC of all folds' scores pooled (AUC_merge).

    ``scores`` has one row per scored example: system, fold, score, label (1 relevant, 0 not).
    AUC = (sum of the positives' mid-ranks - n1 (n1 + 1) / 2) / (n1 n0), ties counting one half.
    Folds without both labels are left out of AUC_avg. Columns: system, auc_avg, auc_merge, n_folds.
    """
    missing = [c for c in ("system", "fold", "score", "label") if c not in scores.columns]
    if missing:
        raise DataError(f"AUC scores: missing columns {missing}; expected system, fold, score, label")
    frame = scores.select("system", "fold", pl.col("score").cast(pl.Float64), pl.col("label").cast(pl.Int8))
    per_fold = _auc(frame, ["system", "fold"])
    pooled = _auc(frame, ["system"])
    return (
        per_fold.drop_nulls("auc")
        .group_by("system")
        .agg(auc_avg=pl.col("auc").mean(), n_folds=pl.len().cast(pl.Int64))
        .join(pooled.rename({"auc": "auc_merge"}), on="system", how="full", coalesce=True)
        .select("system", "auc_avg", "auc_merge", "n_folds")
        .sort("system")
    )


def _auc(frame: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    positive = pl.col("label") == 1
    return (
        frame.with_columns(rank=pl.col("score").rank("average").over(by))
        .group_by(by)
        .agg(
            rank_sum=pl.col("rank").filter(positive).sum(),
            n1=positive.sum().cast(pl.Float64),
            n0=(~positive).sum().cast(pl.Float64),
        )
        .with_columns(
            auc=pl.when((pl.col("n1") > 0) & (pl.col("n0") > 0)).then(
                (pl.col("rank_sum") - pl.col("n1") * (pl.col("n1") + 1) / 2) / (pl.col("n1") * pl.col("n0"))
            )
        )
        .select(*by, "auc")
    )


def ordering_changes(table: pl.DataFrame, variants: tuple[str, ...], reference: str) -> pl.DataFrame:
    """For each group of ``table`` (its columns other than system and the variants) and each variant,
    the system pairs that the variant orders against ``reference``: columns group..., variant,
    n_swaps, swaps ("A vs B": A ahead under the reference)."""
    keys = [c for c in table.columns if c not in ("system", *variants, "n_items", "n_undefined", "n_folds")]
    groups = table.partition_by(keys, as_dict=True) if keys else {(): table}
    rows = []
    for key, group in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        base = dict(zip(group["system"], group[reference], strict=True))
        for variant in variants:
            if variant == reference:
                continue
            other = dict(zip(group["system"], group[variant], strict=True))
            swaps = [f"{a} vs {b}" for a, b in swapped_pairs(base, other)]
            rows.append({**dict(zip(keys, key, strict=True)), "variant": variant, "n_swaps": len(swaps), "swaps": swaps})
    return pl.DataFrame(rows, schema_overrides={"swaps": pl.List(pl.String)}) if rows else pl.DataFrame()


@dataclass(frozen=True)
class AggregationAudit:
    """F-measure variants and AUC variants side by side, and where they reorder systems."""

    f_measure: pl.DataFrame | None
    auc: pl.DataFrame | None
    changes: pl.DataFrame  # table ("f_measure" | "auc"), group keys, variant, n_swaps, swaps


def aggregation_audit(
    counts: pl.DataFrame | None = None, scores: pl.DataFrame | None = None, *, over: str = "folds"
) -> AggregationAudit:
    """Run :func:`f_measure_variants` on ``counts`` and :func:`auc_aggregation` on ``scores`` (either
    may be None) and list the system pairs each variant orders unlike the unbiased default
    (F_tp_fp; AUC_avg)."""
    if counts is None and scores is None:
        raise DataError("aggregation audit: give per-unit counts (tp, fp, fn), per-example scores, or both")
    f_table = f_measure_variants(counts, over=over) if counts is not None else None
    auc_table = auc_aggregation(scores) if scores is not None else None
    changes = []
    if f_table is not None:
        changes.append(ordering_changes(f_table, F_VARIANTS, "F_tp_fp").with_columns(table=pl.lit("f_measure")))
    if auc_table is not None:
        changes.append(ordering_changes(auc_table, AUC_VARIANTS, "auc_avg").with_columns(table=pl.lit("auc")))
    changes = [c for c in changes if c.width > 1]
    return AggregationAudit(f_table, auc_table, pl.concat(changes, how="diagonal_relaxed") if changes else pl.DataFrame())
