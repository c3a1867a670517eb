"""Aggregation audit: how a summary depends on the order of averaging (docs/CONVENTIONS.md#averaging).

Forman & Scholz ("Apples-to-Apples in Cross-Validation Studies") show that F-measure aggregated
across folds (or users) differs by method, and that only F_tp,fp is unbiased; AUC averaged over
folds differs from AUC of the pooled scores, which needs calibrated scores. This module computes
the variants side by side and lists the system pairs whose order a variant changes.

The F-measure variants themselves are :func:`recsys_eval.measure.f_measure_variants` (per-unit TP =
hits@k, FP = k - hits@k, FN = R - hits@k); this module sets them beside the AUC variants.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from recsys_eval.compare.agreement import swapped_pairs
from recsys_eval.errors import DataError
from recsys_eval.measure.aggregate import F_VARIANTS, f_measure_variants
from recsys_eval.measure.auc import weighted_auc

AUC_VARIANTS = ("auc_avg", "auc_merge")


def auc_aggregation(scores: pl.DataFrame) -> pl.DataFrame:
    """AUC averaged over folds (AUC_avg) beside AUC of all folds' scores pooled (AUC_merge).

    ``scores`` has one row per scored example: system, fold, score, label (1 relevant, 0 not), an
    optional ``weight`` (see :func:`recsys_eval.measure.auc.scored_targets`) and any further key
    columns (e.g. protocol), which group like ``system``. AUC is the Mann-Whitney share of pairs
    won, ties counting one half. Folds without both labels are left out of AUC_avg. Columns: the
    keys, auc_avg, auc_merge, n_folds.
    """
    missing = [c for c in ("system", "fold", "score", "label") if c not in scores.columns]
    if missing:
        raise DataError(f"AUC scores: missing columns {missing}; expected system, fold, score, label")
    keys = [c for c in scores.columns if c not in ("fold", "score", "label", "weight")]
    rows = []
    for key, group in sorted(group_by_keys(scores, keys).items()):
        per_fold = [weighted_auc(fold) for fold in group.partition_by("fold")]
        defined = [auc for auc in per_fold if not math.isnan(auc)]
        rows.append({**dict(zip(keys, key, strict=True)),
                     "auc_avg": sum(defined) / len(defined) if defined else None,
                     "auc_merge": weighted_auc(group), "n_folds": len(defined)})
    schema = {**{c: scores.schema[c] for c in keys}, "auc_avg": pl.Float64, "auc_merge": pl.Float64,
              "n_folds": pl.Int64}
    return pl.DataFrame(rows, schema=schema)


def group_by_keys(frame: pl.DataFrame, keys: list[str]) -> dict[tuple, pl.DataFrame]:
    """``frame`` split by ``keys`` (one group under the empty key when there are none)."""
    return frame.partition_by(keys, as_dict=True) if keys else {(): frame}


def ordering_changes(table: pl.DataFrame, variants: tuple[str, ...], reference: str) -> pl.DataFrame:
    """For each group of ``table`` (its columns other than system and the variants) and each variant,
    the system pairs that the variant orders against ``reference``: columns group..., variant,
    n_swaps, swaps ("A vs B": A ahead under the reference)."""
    keys = [c for c in table.columns if c not in ("system", *variants, "n_items", "n_undefined", "n_folds")]
    groups = group_by_keys(table, keys)
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
    return AggregationAudit(f_table, auc_table, audit_changes(f_table, auc_table))


def audit_changes(
    f_table: pl.DataFrame | None, auc_table: pl.DataFrame | None, *, auc_reference: str = "auc_avg"
) -> pl.DataFrame:
    """The system pairs each F variant orders unlike F_tp_fp and each AUC variant (``auc``, the
    per-user value, where the table has it) unlike ``auc_reference``: columns table, group keys,
    variant, n_swaps, swaps."""
    changes = []
    if f_table is not None:
        changes.append(ordering_changes(f_table, F_VARIANTS, "F_tp_fp").with_columns(table=pl.lit("f_measure")))
    if auc_table is not None:
        variants = tuple(c for c in ("auc", *AUC_VARIANTS) if c in auc_table.columns)
        changes.append(ordering_changes(auc_table, variants, auc_reference).with_columns(table=pl.lit("auc")))
    changes = [c for c in changes if c.width > 1]
    if not changes:
        return pl.DataFrame()
    return pl.concat(changes, how="diagonal_relaxed").select("table", pl.all().exclude("table"))
